"""What an approved change declares besides itself: how it is checked, what is read just before it,
and how it is taken back (issue 34).

A mutating or destructive tool may say, per call, a ``Verification``: its arguments are derived
from the action's own (``tools.verification`` renders a tool's declared templates), so the same
call always derives the same verification. The approval card shows it ("Then checks: ...",
"Undo: ..." / "No undo: ..."), the approval record stores it (sealed), the grant signs its
SHA-256, and the loop derives it again from the approved call and runs the check only if it is
byte for byte the one approved (``same_as_approved``): neither a second call under the same id
nor a record changed in Redis can make it run another.

An undo's arguments may hold ``{before.<field>}``: the value read by ``before`` just before the
action ran, filled in only when the undo is asked for; the card shows the template.

``on_target`` puts the action's target into every derived call: a check runs where the action ran.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from agent.arguments import canonical_arguments

HEALTH_TOOL = "http_check"  # what requests a health URL (it runs on the worker: no target)
TARGET_KEY = "target"  # the routing argument (``tools.targets.TARGET_ARGUMENT``), copied onto derived calls
# ``since Thu 2026-12-03 22:00:01 UTC``: what ``service_status`` says of a systemd unit.
_SINCE = re.compile(r"since (?:[A-Z][a-z]{2} )?(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?: (UTC|GMT))?")
_ACTIVE = re.compile(r": active \(")
_BEFORE = re.compile(r"\{before\.([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class PlannedCall:
    """One derived call: a tool, its arguments (canonical JSON), and for a check what passes."""

    tool: str
    arguments: str
    expect: str | None = None
    """A check passes only if its output contains this text."""
    expect_absent: str | None = None
    """A check passes only if its output does not contain this text (a rollout still in progress)."""
    active_since_action: bool = False
    """A check passes only if its output says ``active (...)`` ``since`` a time later than the one
    the before-read said (the host's own clock on both sides: a systemd unit restarted by the
    action, not one still up from before), or, without one, not before the action started."""

    def shown(self) -> str:
        """As the card and the thread show it: ``tool {"arg": "value"}`` (plus what passes)."""
        text = f"{self.tool} {self.arguments}"
        if self.expect is not None:
            text += f"\n  passes when its output contains: {self.expect}"
        if self.expect_absent is not None:
            text += f"\n  passes when its output does not contain: {self.expect_absent}"
        if self.active_since_action:
            text += "\n  passes when the unit is active since after the action started"
        return text

    def passed(self, output: str, is_error: bool, action_started: float, before: str | None = None) -> bool:
        """Whether one run of this check, with ``output``, says the action worked (``before``: what
        the before-read printed, if there was one)."""
        if is_error or output.startswith("Error"):
            return False
        if self.expect is not None and self.expect not in output:
            return False
        if self.expect_absent is not None and self.expect_absent in output:
            return False
        if self.active_since_action:
            return _active_since(output, action_started, _since(before) if before else None)
        return True

    def as_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"tool": self.tool, "arguments": self.arguments}
        if self.expect is not None:
            found["expect"] = self.expect
        if self.expect_absent is not None:
            found["expect_absent"] = self.expect_absent
        if self.active_since_action:
            found["active_since_action"] = True
        return found


@dataclass(frozen=True)
class Verification:
    """The declared check, before-read and undo of one call (any may be absent)."""

    check: PlannedCall | None = None
    before: PlannedCall | None = None
    undo: PlannedCall | None = None
    no_undo: str | None = None
    """Why this change cannot be taken back (shown as "No undo: ...")."""
    health: PlannedCall | None = None
    """A health URL the check also requests (``http_check``, on the worker, through the egress
    policy like any): a restarted service's, where the inventory gives one (``with_health``)."""

    def to_json(self) -> str:
        """Canonical text: what the approval record stores and the grant's SHA-256 covers."""
        facts: dict[str, Any] = {}
        for name in ("check", "before", "undo", "health"):
            planned: PlannedCall | None = getattr(self, name)
            if planned is not None:
                facts[name] = planned.as_dict()
        if self.no_undo is not None:
            facts["no_undo"] = self.no_undo
        return canonical_arguments(facts)

    def sha256(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    @classmethod
    def from_json(cls, text: str) -> Verification | None:
        """The verification stored in ``text`` (``None`` for "" or anything that is not one)."""
        if not text:
            return None
        try:
            raw = json.loads(text)
            return cls(
                check=_planned(raw.get("check")),
                before=_planned(raw.get("before")),
                undo=_planned(raw.get("undo")),
                no_undo=_text(raw.get("no_undo")),
                health=_planned(raw.get("health")),
            )
        except (ValueError, TypeError, AttributeError):
            return None

    def card_lines(self) -> list[tuple[str, str]]:
        """(label, text) for the approval card: the check, the before-read, the undo."""
        lines = []
        if self.check is not None:
            also = f"\n  and {self.health.shown()}" if self.health is not None else ""
            lines.append(("Then checks", self.check.shown() + also))
        if self.before is not None:
            lines.append(("Reads first", self.before.shown()))
        if self.undo is not None:
            lines.append(("Undo", self.undo.shown()))
        elif self.no_undo is not None:
            lines.append(("No undo", self.no_undo))
        return lines

    def with_health(self, url: str) -> Verification:
        """The same, its check also requesting ``url``: it passes when ``http_check`` says ``OK``
        (a status below 400). Nothing to add to a verification without a check."""
        if self.check is None:
            return self
        arguments = canonical_arguments({"url": url})
        return replace(self, health=PlannedCall(HEALTH_TOOL, arguments, expect=f"OK: GET {url} -> "))

    def on_target(self, action_arguments: dict[str, Any]) -> Verification:
        """Every derived call on the action's target (its ``target`` argument, when it has one)."""
        target = action_arguments.get(TARGET_KEY)
        if not isinstance(target, str):
            return self
        return replace(
            self,
            check=_with_target(self.check, target),
            before=_with_target(self.before, target),
            undo=_with_target(self.undo, target),
        )


def filled_undo(undo: PlannedCall, before: Mapping[str, object] | None) -> PlannedCall | str:
    """The undo as it runs: each ``{before.X}`` of its arguments replaced by field ``X`` of what the
    before-read printed (a value that is exactly one placeholder keeps the field's JSON type), or
    why it cannot be (the before-read printed no object, or no such field: nothing is guessed)."""
    arguments = json.loads(undo.arguments)
    filled: dict[str, Any] = {}
    for key, value in arguments.items():
        if not isinstance(value, str) or "{before." not in value:
            filled[key] = value
            continue
        names = _BEFORE.findall(value)
        if before is None:
            return "the state before the change could not be read"
        missing = [name for name in names if before.get(name) is None]
        if missing:
            return f"the state read before the change has no {', '.join(missing)}"
        whole = _BEFORE.fullmatch(value)
        if whole is not None:
            filled[key] = before[whole.group(1)]
            continue
        filled[key] = _BEFORE.sub(lambda m: _as_text(before[m.group(1)]), value)
    return replace(undo, arguments=canonical_arguments(filled))


def _as_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def same_as_approved(derived: Verification | None, approved: str | None) -> bool:
    """Whether the verification derived now is exactly the one the approval stored."""
    return (derived.to_json() if derived is not None else "") == (approved or "")


def _with_target(planned: PlannedCall | None, target: str) -> PlannedCall | None:
    if planned is None:
        return None
    arguments = json.loads(planned.arguments)
    arguments[TARGET_KEY] = target
    return replace(planned, arguments=canonical_arguments(arguments))


def _planned(raw: object) -> PlannedCall | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise TypeError("not a planned call")
    tool, arguments = raw.get("tool"), raw.get("arguments")
    if not isinstance(tool, str) or not isinstance(arguments, str):
        raise TypeError("not a planned call")
    return PlannedCall(
        tool,
        arguments,
        expect=_text(raw.get("expect")),
        expect_absent=_text(raw.get("expect_absent")),
        active_since_action=raw.get("active_since_action") is True,
    )


def _text(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError("not text")
    return value


def _active_since(output: str, action_started: float, before: float | None) -> bool:
    since = _since(output)
    if not _ACTIVE.search(output) or since is None:
        return False
    if before is not None:
        return since > before  # the host's clock on both sides: no skew with the worker's
    # systemd shows whole seconds: a start in the same second as the action counts as after it.
    return since >= int(action_started)


def _since(output: str) -> float | None:
    match = _SINCE.search(output)
    if match is None:
        return None
    return datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()
