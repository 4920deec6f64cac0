"""Errors raised by the tools package.

Two kinds are kept apart:

* start-up mistakes (a bad catalog, two tools with one name, a bad redaction pattern) raise a
  ``ToolConfigError`` subclass at once, before any run starts: nothing half-loads;
* mistakes in one call (bad arguments, a path outside the log directories) are raised inside a
  tool and turned into an ``Error: ...`` tool result by ``tools.base.FunctionTool``, so the model
  reads them and can correct itself.

Tree::

    ToolError
    ├── RunbookFormatError          one runbook's front matter is malformed (that file is skipped)
    ├── MalformedChange             a change record that is not one chatops wrote (skipped by readers)
    ├── ToolConfigError             start-up misconfiguration (programmer or operator mistake)
    │   ├── DuplicateToolError          two tools share a name
    │   ├── CatalogError                the YAML catalog is wrong (file, tool and field named)
    │   ├── InventoryError              the inventory of targets is wrong (file, target and field named)
    │   └── McpToolsetError             MCP servers' tools cannot be offered (a name collision, named both)
    └── ToolCallError               one call cannot run; becomes an ``Error: ...`` result
        ├── ToolArgumentError           the arguments fail validation (the field is named)
        │   └── MatcherSyntaxError          a label matcher does not parse (also a ``ValueError``)
        │   └── TargetSelectorError         a target selector (name or labels) is malformed
        ├── PathNotAllowedError         a path escapes the configured directories
        ├── EgressRefusedError          a network tool was asked to reach a host it may not
        ├── RunbookUnavailable          a runbook id is not in the index, or its URL cannot be read
        ├── SshConnectionError          an SSH target cannot be reached or logged in to
        │   └── SshHostKeyError             its host key is unknown or changed (never accepted)
        └── McpCallError                an MCP server could not answer one call
            ├── McpUnavailableError         the server is down or cannot start (answered at once)
            └── McpTimeoutError             the call outlived its timeout and was cancelled
"""

from __future__ import annotations

from tools.config_errors import problems_message


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


class InventoryError(ToolConfigError):
    """The inventory file has one or more mistakes; each problem names file, target and field.

    ``problems`` are the problems without the file name; the message repeats the file on every
    line, so one line copied from a log still says which file to fix.
    """

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = list(problems)
        super().__init__(problems_message("the inventory", path, self.problems))


class ToolCallError(ToolError):
    """One call cannot run; the message is written for the model and the on-call engineer."""


class ToolArgumentError(ToolCallError):
    """The arguments of a call fail validation."""


class TargetSelectorError(ToolArgumentError):
    """A target selector is neither a target name (``web-03``) nor labels (``env=prod,role=web``)."""


class PathNotAllowedError(ToolCallError):
    """A path lies outside the directories a tool may touch (``..``, absolute escapes, symlinks)."""


class RunbookUnavailable(ToolCallError):
    """A runbook id names nothing in the index, or its URL is refused, failed or is no runbook
    (``tools.runbooks``); the message says which."""


class MalformedChange(ToolError, ValueError):
    """A change record of the wrong shape or over its bounds (a hostile Redis writer, a bad
    webhook body): a reader skips it, a webhook answers 400 with this message."""


class RunbookFormatError(ToolError, ValueError):
    """A runbook's front matter is malformed; the message says what (the index adds which file).
    Not a configuration error: the index skips that file and serves the others."""


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


class SshConnectionError(ToolCallError):
    """An SSH target cannot be reached (DNS, refused, timeout) or refused our key.

    ``target`` is the inventory's name of the target, which every message names.
    """

    def __init__(self, target: str, message: str) -> None:
        self.target = target
        super().__init__(message)


class SshHostKeyError(SshConnectionError):
    """The target's host key is not in its known_hosts file, or differs from the one there.

    Never a prompt and never added automatically: a person checks the key and writes it down.
    """


class McpToolsetError(ToolConfigError):
    """The MCP servers' tools cannot be offered as configured (two offered names collide)."""


class McpCallError(ToolCallError):
    """One call of an MCP tool failed before the server answered it; ``server`` is its name."""

    def __init__(self, server: str, message: str) -> None:
        self.server = server
        super().__init__(message)


class McpUnavailableError(McpCallError):
    """The server is down (crashed, cannot start, waiting out its restart backoff)."""

    def __init__(self, server: str, reason: str) -> None:
        self.reason = reason
        super().__init__(server, f"MCP server {server} is unavailable: {reason}")


class McpTimeoutError(McpCallError):
    """The call did not finish within its timeout; it was cancelled on the server's session."""

    def __init__(self, server: str, tool: str, timeout: float) -> None:
        self.tool = tool
        self.timeout = timeout
        super().__init__(
            server, f"MCP tool {tool} on server {server} timed out after {timeout:.1f} s (cancelled)"
        )


class MatcherSyntaxError(ToolArgumentError, ValueError):
    """A label matcher (``team="sre"``, ``severity=~"critical|warning"``) does not parse
    (``tools.alert_matchers``). Also a ``ValueError``, so a pydantic validator that parses
    matchers reports it as that field's mistake."""
