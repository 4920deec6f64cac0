"""Typed events a run emits to its ``on_event`` callback (the Slack run card, metrics, audit).

Every event is a frozen dataclass. The three a listened-to run builds at every iteration
(``IterationStarted``, ``ToolStart``, ``ToolEnd``) fill their fields with one ``__dict__`` update
instead of the generated ``__init__``'s ``object.__setattr__`` per field (a frozen dataclass's
only way past its own ``__setattr__``): a fifth of the cost, the same fields, defaults, equality,
hash, repr and match arguments, and still no assignment after construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent.findings import Findings
from agent.series import SeriesSet
from agent.tooling import ToolCategory
from agent.types import Message, RunResult, ToolCall, Usage

if TYPE_CHECKING:
    from agent.checks import CheckOutcome


@dataclass(frozen=True, init=False)
class IterationStarted:
    iteration: int
    usage: Usage = field(default_factory=Usage)  # the run's usage so far (the card's tokens and cost)
    model: str | None = None  # the model that answered last (what the usage is priced by)

    def __init__(self, iteration: int, usage: Usage | None = None, model: str | None = None) -> None:
        self.__dict__.update(iteration=iteration, usage=Usage() if usage is None else usage, model=model)


@dataclass(frozen=True)
class MessagesInjected:
    """Messages from the inject callback, already stored in history."""

    messages: list[Message]


@dataclass(frozen=True)
class TextDelta:
    """Assistant text as it streams in (only when the run streams)."""

    text: str


@dataclass(frozen=True, init=False)
class ToolStart:
    call: ToolCall
    category: ToolCategory | None

    def __init__(self, call: ToolCall, category: ToolCategory | None) -> None:
        self.__dict__.update(call=call, category=category)


@dataclass(frozen=True)
class ToolEnd:
    """A tool call finished. ``call.arguments`` holds ``confirmed_by`` for approved calls."""

    call: ToolCall
    category: ToolCategory | None
    output: str
    is_error: bool
    duration_seconds: float
    executed: bool = True  # False when the call was refused, declined or unknown and nothing ran
    target: str | None = None  # the inventory target it ran on (``None``: no inventory)
    executor: str | None = None  # who ran it there (a runner's ``host:pid``)
    evidence: str | None = None  # the result's evidence id (``E3``), when the run gives them
    series: SeriesSet | None = (
        None  # the series the output lists, when the model read them (``agent.series``)
    )

    def __init__(
        self,
        call: ToolCall,
        category: ToolCategory | None,
        output: str,
        is_error: bool,
        duration_seconds: float,
        executed: bool = True,
        target: str | None = None,
        executor: str | None = None,
        evidence: str | None = None,
        series: SeriesSet | None = None,
    ) -> None:
        self.__dict__.update(
            call=call,
            category=category,
            output=output,
            is_error=is_error,
            duration_seconds=duration_seconds,
            executed=executed,
            target=target,
            executor=executor,
            evidence=evidence,
            series=series,
        )


@dataclass(frozen=True)
class CheckEnded:
    """An approved change's check ran (or could not): after the change's ``ToolEnd``."""

    call: ToolCall
    outcome: CheckOutcome
    evidence: str | None = None


@dataclass(frozen=True)
class FindingsUpdated:
    """``update_findings`` recorded new findings (as shown: verified by code); already stored."""

    findings: Findings


@dataclass(frozen=True)
class Condensed:
    removed_messages: int
    summary_chars: int


@dataclass(frozen=True)
class CondenseFailed:
    error: str


@dataclass(frozen=True)
class RunFinished:
    result: RunResult
    extra: dict[str, str] = field(default_factory=dict)


Event = (
    IterationStarted
    | MessagesInjected
    | TextDelta
    | ToolStart
    | ToolEnd
    | CheckEnded
    | FindingsUpdated
    | Condensed
    | CondenseFailed
    | RunFinished
)
