"""Each change's undo as the audit tells it (pure): offered until when, requested by whom, executed
and checked, expired, or none.

The facts are four kinds of audit entry (``bot.runs.undo_offering``, ``bot.runs.undo_requests``):
``undo_offered`` in the change's own run (the change's ``call_id``; an ``offer_id`` and ``until``,
or a ``problem`` when no undo could be offered); ``undo_requested`` and ``undo_executed`` in the
undo's own run, a follow-up in the same thread (naming the change's run as ``action_run_id``);
and that run's ``check_ended`` for the undo's call (``undo_<offer id>``). A change with no
``undo_offered`` has no undo (its record declares none). An offer nobody asked for is "offered
until" while ``now`` is before its end, "expired" after.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from bot.observability.audit import AuditEntry, AuditKind

UNDO_CALL_PREFIX = "undo_"  # as ``bot.runs.undo_requests`` names an undo's call


@dataclass(frozen=True)
class Undo:
    state: str = "none"  # none | not offered | offered | expired | requested | executed | failed
    until: float = 0.0  # the offer's end
    requested_by: str = ""
    undo_run: str = ""  # the run that carried the undo out
    check: str = ""  # the undo's own check: passed | failed | timed out | "" (none recorded)
    problem: str = ""  # why no undo was offered
    audit_id: str = ""  # the entry of the latest of these facts


def _verdict(fields: dict[str, str]) -> str:
    if fields.get("passed") == "1":
        return "passed"
    return "timed out" if fields.get("timed_out") == "1" else "failed"


class UndoLedger:
    """The undo facts of one run's changes, from the audit entries around it (oldest first)."""

    def __init__(self, run_id: str, entries: Sequence[AuditEntry], now: float | None) -> None:
        self._now = now
        self._by_call: dict[str, Undo] = {}
        self._offer_call: dict[str, str] = {}  # offer id -> the change's call id
        self._undo_runs: set[str] = set()
        self.related: set[str] = set()  # ids of the entries of other runs that tell this run's undos
        for entry in entries:
            self._fold(run_id, entry)

    def _fold(self, run_id: str, entry: AuditEntry) -> None:
        f = entry.fields
        if entry.kind is AuditKind.UNDO_OFFERED and entry.run_id == run_id:
            action = f.get("call_id", "")
            if f.get("offer_id"):
                self._offer_call[f["offer_id"]] = action
                self._by_call[action] = Undo("offered", _float(f.get("until")), audit_id=entry.id)
            else:
                self._by_call[action] = Undo("not offered", problem=f.get("problem", ""), audit_id=entry.id)
            return
        if f.get("action_run_id") == run_id and entry.kind is AuditKind.UNDO_REQUESTED:
            call = self._offer_call.get(f.get("offer_id", ""))
            if call is not None:
                self._undo_runs.add(entry.run_id)
                told = replace(self._of(call), state="requested", requested_by=f.get("user", ""))
                self._told(entry, call, replace(told, undo_run=entry.run_id))
        elif f.get("action_run_id") == run_id and entry.kind is AuditKind.UNDO_EXECUTED:
            call = self._offer_call.get(f.get("offer_id", ""))
            if call is not None and entry.run_id in self._undo_runs:
                state = "failed" if f.get("failed") in ("true", "1") else "executed"
                self._told(entry, call, replace(self._of(call), state=state))
        elif entry.kind is AuditKind.CHECK_ENDED and entry.run_id in self._undo_runs:
            undo_call = f.get("call_id", "")
            call = self._offer_call.get(undo_call.removeprefix(UNDO_CALL_PREFIX))
            if call is not None and undo_call.startswith(UNDO_CALL_PREFIX):
                self._told(entry, call, replace(self._of(call), check=_verdict(f)))

    def _of(self, call: str) -> Undo:
        return self._by_call.get(call, Undo())

    def _told(self, entry: AuditEntry, call: str, undo: Undo) -> None:
        """``entry`` (of the undo's run) told ``undo`` of the change ``call``."""
        self.related.add(entry.id)
        self._by_call[call] = replace(undo, audit_id=entry.id)

    def of(self, call_id: str) -> Undo:
        """The undo of the change ``call_id`` as of ``now``."""
        undo = self._of(call_id)
        if undo.state == "offered" and self._now is not None and undo.until and self._now >= undo.until:
            return replace(undo, state="expired")
        return undo

    def line(self, entry: AuditEntry) -> tuple[str, str] | None:
        """The timeline's ``(actor, what)`` of an undo fact (``None``: not one)."""
        f = entry.fields
        if entry.kind is AuditKind.UNDO_OFFERED:
            if not f.get("offer_id"):
                return "chatops", f"offered no undo of the change: {f.get('problem', '')}"
            until = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(_float(f.get("until"))))
            return "chatops", f"offered the undo {f.get('undo', '')} until {until}"
        if entry.id not in self.related:
            return None
        if entry.kind is AuditKind.UNDO_REQUESTED:
            return f.get(
                "user", ""
            ), f"asked to undo the change: {f.get('undo', '')} (run {entry.run_id[:12]})"
        if entry.kind is AuditKind.UNDO_EXECUTED:
            failed = f.get("failed") in ("true", "1")
            return (
                "chatops",
                f"ran the undo {'and it failed' if failed else 'of the change'} (run {entry.run_id[:12]})",
            )
        if entry.kind is AuditKind.CHECK_ENDED:
            return (
                "chatops",
                f"check after the undo {f.get('tool', '?')} {_verdict(f)}: {f.get('output', '')}",
            )
        return None


def _float(value: str | None) -> float:
    try:
        return float(value or 0)
    except ValueError:
        return 0.0
