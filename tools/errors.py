"""Errors raised by the tools package.

Two kinds are kept apart:

* start-up mistakes (a bad catalog, two tools with one name, a bad redaction pattern) raise a
  ``ToolConfigError`` subclass at once, before any run starts: nothing half-loads;
* mistakes in one call (bad arguments, a path outside the log directories) are raised inside a
  tool and turned into an ``Error: ...`` tool result by ``tools.base.FunctionTool``, so the model
  reads them and can correct itself.

Tree::

    ToolError
    ├── ToolConfigError             start-up misconfiguration (programmer or operator mistake)
    │   ├── DuplicateToolError          two tools share a name
    │   └── CatalogError                the YAML catalog is wrong (file, tool and field named)
    └── ToolCallError               one call cannot run; becomes an ``Error: ...`` result
        ├── ToolArgumentError           the arguments fail validation (the field is named)
        ├── PathNotAllowedError         a path escapes the configured directories
        └── EgressRefusedError          a network tool was asked to reach a host it may not
"""

from __future__ import annotations


class ToolError(Exception):
    """Root of every error the tools package raises."""


class ToolConfigError(ToolError):
    """The tools were configured wrongly; raised at start-up, never shown to a model."""


class DuplicateToolError(ToolConfigError):
    """Two tools were registered under the same name."""


class CatalogError(ToolConfigError):
    """The YAML tool catalog has one or more mistakes; the message names file, tool and field."""

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = list(problems)
        lines = "\n".join(f"  - {problem}" for problem in self.problems)
        super().__init__(f"tool catalog {path} is invalid:\n{lines}")


class ToolCallError(ToolError):
    """One call cannot run; the message is written for the model and the on-call engineer."""


class ToolArgumentError(ToolCallError):
    """The arguments of a call fail validation."""


class PathNotAllowedError(ToolCallError):
    """A path lies outside the directories a tool may touch (``..``, absolute escapes, symlinks)."""


class EgressRefusedError(ToolCallError):
    """A network tool was asked to reach a host or address the egress policy does not allow.

    Typed, so a caller can tell a refusal from a failure; ``target`` is what was refused
    (``host`` or ``host:port``) and ``reason`` why, when more than "not listed".
    """

    def __init__(self, target: str, reason: str = "") -> None:
        self.target = target
        self.reason = reason
        detail = f": {reason}" if reason else ""
        super().__init__(
            f"egress to {target} is not allowed (CHATOPS_EGRESS_ALLOW){detail}; ask a human to add it"
        )
