"""What the loop needs to know about a tool. Concrete tools live in ``tools/``.

The loop never imports a concrete tool: anything with this shape can be offered to a run.
``WrapperTool`` is the one base of the tools that wrap another (a route by target, a policy or
grant check, a runner's proxy): it forwards everything, each wrapper overrides what it changes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from agent.series import SeriesSet
from agent.types import ToolDef
from agent.verification import Verification


class ToolCategory(StrEnum):
    """The risk of a tool; it, not the model, decides whether a human must approve."""

    READ_ONLY = "read_only"
    MUTATING = "mutating"
    DESTRUCTIVE = "destructive"

    @property
    def requires_confirmation(self) -> bool:
        return self is not ToolCategory.READ_ONLY

    @property
    def rank(self) -> int:
        """Read-only < mutating < destructive: a call's category is never below its tool's."""
        return _RANKS[self]


_RANKS = {ToolCategory.READ_ONLY: 0, ToolCategory.MUTATING: 1, ToolCategory.DESTRUCTIVE: 2}


@dataclass(frozen=True)
class CallCategory:
    """The category of one call, and why it is above its tool's own when it is.

    A read-only network tool asked to reach a host the egress policy does not list becomes a
    mutating call under ``CHATOPS_EGRESS_UNLISTED=approve``: ``reason`` says so in plain text for
    the approver (written by the tool; it may carry the host the model asked for, so it is shown
    inert).
    """

    category: ToolCategory
    reason: str | None = None


# A call whose tool's category decides: one shared (frozen) answer per category.
_OF_TOOL = {category: CallCategory(category) for category in ToolCategory}


@dataclass(frozen=True)
class ToolResult:
    """The text the model will read, and whether it reports a failure."""

    output: str
    is_error: bool = False
    plan: str | None = None
    """A dry run's machine-readable plan (JSON text): the approved execution does exactly this."""
    nothing_to_do: bool = False
    """A dry run that found nothing to change: nobody is asked, the model is told."""
    stable_output: str | None = None
    """``output`` without its decoration (elapsed time, approval note): what loop detection
    hashes, so the same finding reported twice is recognised. ``None``: ``output`` itself."""
    target: str | None = None
    """The inventory target the call ran on (``None``: no inventory, the worker's own host)."""
    executor: str | None = None
    """Who executed it there: ``host:pid`` of the runner, or the worker for local and SSH calls."""
    series: SeriesSet | None = None
    """The samples of exactly the series ``output`` lists, for a chart (``agent.series``); never
    sent to the model."""


@dataclass(frozen=True)
class CallTarget:
    """The target one call acts on, as the approval card shows it."""

    name: str
    via: str
    labels: tuple[tuple[str, str], ...] = ()

    @property
    def production(self) -> bool:
        return any(key == "env" and value in ("prod", "production") for key, value in self.labels)


# Written into the arguments of an approved destructive call by the loop (never by the model),
# next to ``confirmed_by``: the plan of the dry run the approver saw.
APPROVED_PLAN = "approved_plan"
# Written into the arguments of an approved call by the loop when the approval carries a grant
# (signed by the web process when the approver clicked): a runner verifies it before acting.
APPROVAL_GRANT = "approval_grant"


@runtime_checkable
class Tool(Protocol):
    """A tool a run may call.

    ``execute`` receives the model's arguments as the JSON string from the wire (with
    ``confirmed_by`` already written in for approved calls) and must validate them itself.
    ``timeout`` is the most it may take; the loop passes a smaller one near the deadline.
    A tool may raise: the loop turns any exception into an ``Error: ...`` result.

    Optional: ``category_for(arguments) -> CallCategory``, the category of one call when it
    depends on the arguments (read through ``call_category``, the one place the loop asks);
    ``enforces_timeout = True`` for a tool whose ``execute`` itself returns by its ``timeout``
    (read through ``enforces_own_timeout``).
    """

    @property
    def definition(self) -> ToolDef: ...

    @property
    def category(self) -> ToolCategory: ...

    @property
    def parallel(self) -> bool: ...

    @property
    def timeout(self) -> float: ...

    def execute(self, arguments: str, *, timeout: float) -> ToolResult: ...

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        """The dry run shown to the approver of a destructive call (``None`` for other tools).

        Its ``plan`` is stored with the approval and handed back to ``execute`` in the arguments
        (``approved_plan``); the execution must do exactly the planned items and nothing else.
        """
        ...


def call_category(tool: Tool, arguments: str) -> CallCategory:
    """The category of one call of ``tool``: what decides its approval, batching and records.

    ``tool.category_for(arguments)`` when the tool has it, never below ``tool.category``: the
    arguments can make a call need approval, never spare one.
    """
    static = _OF_TOOL[tool.category]
    category_for = getattr(tool, "category_for", None)
    if category_for is None:
        return static
    found = category_for(arguments)
    if not isinstance(found, CallCategory) or found.category.rank <= tool.category.rank:
        return static
    return found


def enforces_own_timeout(tool: Tool) -> bool:
    """True when ``tool.execute`` returns by the timeout it is given whatever happens, so the loop may
    run it on its own thread instead of handing it to the pool and back (two thread wake-ups).

    Optional for a tool (``enforces_timeout``, ``False`` when absent): a subprocess killed with its
    process group at the deadline (``tools.process``), a remote call waiting on its own budget (a
    runner, SSH, an MCP server) may say so; a Python function that could block in a library call
    must not, and is cut off by the loop's wait instead. A tool that says so and then overruns is
    not cut short: it holds the run until it returns, and the run's deadline stops the run after it
    (a worker's job timeout, a signal raised in this thread, is set past the run's deadline, so it
    cannot arrive during a tool that keeps its word).
    """
    return getattr(tool, "enforces_timeout", False) is True


def call_refusal(tool: Tool, arguments: str) -> str | None:
    """Why this call cannot be put before a person at all (its target is unknown or unreachable),
    as an ``Error: ...`` text for the model; ``None`` when it can.

    Optional for a tool (``refusal(arguments) -> str | None``)."""
    refusal = getattr(tool, "refusal", None)
    if refusal is None:
        return None
    text = refusal(arguments)
    if not isinstance(text, str) or not text:
        return None
    return text if text.startswith("Error") else f"Error: {text}"


def call_target(tool: Tool, arguments: str) -> CallTarget | None:
    """The target this call acts on, for the approval card (optional ``target_of(arguments)``)."""
    target_of = getattr(tool, "target_of", None)
    if target_of is None:
        return None
    found = target_of(arguments)
    return found if isinstance(found, CallTarget) else None


def describe_call(tool: Tool, arguments: str) -> str | None:
    """The exact command or request ``tool`` would execute for ``arguments`` (for the approval card).

    Optional for a tool (``describe(arguments) -> str | None``): one without it shows its arguments only.
    """
    describe = getattr(tool, "describe", None)
    if describe is None:
        return None
    text = describe(arguments)
    return text if isinstance(text, str) and text else None


def call_verification(tool: Tool, arguments: str) -> Verification | None:
    """The check, before-read and undo this call declares (``agent.verification``), on the call's
    own target; ``None`` when it declares none or the arguments do not derive one.

    Optional for a tool (``verification_of(arguments) -> Verification | None``)."""
    verification_of = getattr(tool, "verification_of", None)
    if verification_of is None:
        return None
    found = verification_of(arguments)
    if not isinstance(found, Verification):
        return None
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return found
    return found.on_target(parsed) if isinstance(parsed, dict) else found


class WrapperTool:
    """A tool that is another tool with some of its parts changed: everything is forwarded to
    ``inner``, so a wrapper overrides only what it changes (pydantic-ai's ``WrapperToolset``, for
    one tool).

    Forwarded: the ``Tool`` protocol, every optional part the loop reads (``category_for``,
    ``refusal``, ``target_of``, ``describe``, ``verification_of``, ``enforces_timeout``), each through the reader above
    so a missing part means what it means for any tool, and by name every other attribute of
    ``inner`` (parts other layers define: where a tool runs, an MCP tool's server).

    ``inner_arguments(arguments)`` is what ``inner`` receives of a call's arguments: the same text
    by default; a wrapper that drops its own keys returns them through
    ``agent.arguments.arguments_without``, worked out once per call for every part that asks.
    """

    def __init__(self, inner: Tool) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (a copy being made): never recurse
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def definition(self) -> ToolDef:
        return self.inner.definition

    @property
    def category(self) -> ToolCategory:
        return self.inner.category

    @property
    def parallel(self) -> bool:
        return self.inner.parallel

    @property
    def timeout(self) -> float:
        return self.inner.timeout

    @property
    def enforces_timeout(self) -> bool:
        return enforces_own_timeout(self.inner)

    def inner_arguments(self, arguments: str) -> str:
        return arguments

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        return self.inner.execute(self.inner_arguments(arguments), timeout=timeout)

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        return self.inner.preview(self.inner_arguments(arguments), timeout=timeout)

    def category_for(self, arguments: str) -> CallCategory:
        return call_category(self.inner, self.inner_arguments(arguments))

    def refusal(self, arguments: str) -> str | None:
        return call_refusal(self.inner, self.inner_arguments(arguments))

    def target_of(self, arguments: str) -> CallTarget | None:
        return call_target(self.inner, self.inner_arguments(arguments))

    def describe(self, arguments: str) -> str | None:
        return describe_call(self.inner, self.inner_arguments(arguments))

    def verification_of(self, arguments: str) -> Verification | None:
        # The inner tool derives from its own arguments; the target is put on by ``call_verification``.
        verification_of = getattr(self.inner, "verification_of", None)
        if verification_of is None:
            return None
        found = verification_of(self.inner_arguments(arguments))
        return found if isinstance(found, Verification) else None
