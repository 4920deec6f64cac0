"""One incident as the memory keeps it: what a finished run was about, what it found, what was done.

Every text in it was redacted with the run's redactor before it was built (``bot.runs.incident_capture``)
and is untrusted when read back: the model reads it as quoted data, Slack shows it inert.
``from_json`` refuses anything that is not exactly this shape (a hostile Redis writer), and every
reader skips what it refuses.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from bot.memory.errors import MalformedIncident

MAX_TEXT = 2_000  # a question, a conclusion, a statement: bounded so one record stays small
MAX_ITEMS = 20  # hypotheses, quotes, actions, targets, labels


@dataclass(frozen=True)
class Action:
    """A mutating or destructive call that ran, and who approved it."""

    tool: str
    target: str = ""
    approved_by: str = ""
    arguments: str = ""


@dataclass(frozen=True)
class Supported:
    """A hypothesis the findings supported, with its verified quotes."""

    statement: str
    quotes: tuple[str, ...] = ()
    cause: str = ""


@dataclass(frozen=True)
class Incident:
    id: str  # the run's id
    channel: str
    private: bool  # unknown counts as private (fail closed)
    thread_ts: str
    link: str  # the thread's permalink, or "" when Slack did not give one
    at: float  # when the run ended
    requester: str = ""
    question: str = ""
    alert_name: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    fingerprints: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    status: str = ""  # the run's end (completed, failed, ...)
    conclusion: str = ""  # the findings' conclusion (root_cause_found, ...)
    answer: str = ""  # the run's final answer, cut
    supported: tuple[Supported, ...] = ()
    actions: tuple[Action, ...] = ()
    feedback: str = ""  # "up" | "down" | "" (👍 / 👎 on the answer)

    @property
    def disputed(self) -> bool:
        return self.feedback == "down"

    @property
    def root_cause(self) -> str:
        """The first supported hypothesis, else the answer's first line."""
        if self.supported:
            return self.supported[0].statement
        return self.answer.strip().split("\n", 1)[0] if self.answer.strip() else ""

    @property
    def fix(self) -> str:
        """What was done: the approved actions, by tool and target."""
        return "; ".join(
            f"{a.tool}"
            + (f" on {a.target}" if a.target else "")
            + (f" (approved by {a.approved_by})" if a.approved_by else "")
            for a in self.actions
        )

    def words(self) -> str:
        """The text the relevance score reads."""
        parts = [
            self.question,
            self.answer,
            self.alert_name,
            *self.targets,
            *(s.statement for s in self.supported),
        ]
        return " ".join(parts)

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> Incident:
        try:
            raw = json.loads(text)
            if not isinstance(raw, dict):
                raise TypeError("not an object")
            return cls(
                id=_text(raw["id"]),
                channel=_text(raw["channel"]),
                private=_flag(raw.get("private", True)),
                thread_ts=_text(raw.get("thread_ts", "")),
                link=_text(raw.get("link", "")),
                at=float(raw["at"]),
                requester=_text(raw.get("requester", "")),
                question=_text(raw.get("question", "")),
                alert_name=_text(raw.get("alert_name", "")),
                labels=_labels(raw.get("labels", {})),
                fingerprints=tuple(_text(f) for f in _items(raw.get("fingerprints", []))),
                targets=tuple(_text(t) for t in _items(raw.get("targets", []))),
                status=_text(raw.get("status", "")),
                conclusion=_text(raw.get("conclusion", "")),
                answer=_text(raw.get("answer", "")),
                supported=tuple(_supported(s) for s in _items(raw.get("supported", []))),
                actions=tuple(_action(a) for a in _items(raw.get("actions", []))),
                feedback=_text(raw.get("feedback", "")),
            )
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise MalformedIncident(f"not an incident record: {error}") from error


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected text, got {type(value).__name__}")
    return value[:MAX_TEXT]


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError("private is not a boolean")
    return value


def _items(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError("expected a list")
    return value[:MAX_ITEMS]


def _labels(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise TypeError("labels are not an object")
    return {_text(k): _text(v) for k, v in list(value.items())[:MAX_ITEMS]}


def _supported(value: Any) -> Supported:
    return Supported(
        _text(value["statement"]),
        tuple(_text(q) for q in _items(value.get("quotes", []))),
        _text(value.get("cause", "")),
    )


def _action(value: Any) -> Action:
    return Action(
        _text(value["tool"]),
        _text(value.get("target", "")),
        _text(value.get("approved_by", "")),
        _text(value.get("arguments", "")),
    )
