"""The shift handoff: what is still open and what changed during the shift, from facts only.

Built from the alert groups (``AlertStore``), the runs not finished (``RunRecords``) with their
approvals (``Approvals``) and the audit entries since the shift began (``AuditLog.since``). Every
item is one record or one audit entry, named by its id. ``may_see`` keeps channel boundaries: an
item of a channel the reader may not see is left out (the CLI, for operators, sees every channel).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import redis

from bot.alerts.store import AlertStore, Group
from bot.keys import Keys
from bot.observability.audit import AuditEntry, AuditKind, AuditLog
from bot.runs.approvals import Approval, Approvals, ApprovalStatus
from bot.runs.record import RunRecord, RunRecords


@dataclass(frozen=True)
class Item:
    at: float
    channel: str
    what: str
    ref: str  # the run id, alert group id, approval id or audit entry id it comes from


@dataclass(frozen=True)
class Handoff:
    since: float
    now: float
    firing: tuple[Item, ...]
    in_progress: tuple[Item, ...]
    waiting: tuple[Item, ...]  # approvals not decided, with how long they have waited
    changed: tuple[Item, ...]  # changes run during the shift, with their approvers
    undecided: tuple[Item, ...]  # approvals of the shift that expired or were declined

    def as_json(self) -> dict[str, object]:
        return asdict(self)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


def build_handoff(
    *,
    now: float,
    since: float,
    groups: Sequence[Group],
    active: Sequence[tuple[RunRecord, Sequence[Approval]]],
    entries: Sequence[AuditEntry],
    redact: Callable[[str], str],
    may_see: Callable[[str], bool] = lambda channel: True,
) -> Handoff:
    def text(value: str, limit: int = 200) -> str:
        flat = " ".join(redact(value).split())
        return flat if len(flat) <= limit else flat[: limit - 1] + "…"

    firing = [
        Item(
            _ts(g.root_ts),
            g.channel,
            f"alert firing: {text(g.title or g.group_key)} (run {g.run_id or 'none'})",
            g.id,
        )
        for g in groups
        if g.status == "firing" and may_see(g.channel)
    ]
    in_progress, waiting = [], []
    for record, approvals in active:
        if not may_see(record.channel):
            continue
        in_progress.append(
            Item(
                record.created_at,
                record.channel,
                f"run {record.status.value} for {_minutes(now - record.created_at)}, asked by "
                f"{text(record.requester, 40)}: {text(record.text)}",
                record.run_id,
            )
        )
        for approval in approvals:
            if approval.status is ApprovalStatus.PENDING:
                target = f" on {text(approval.target, 80)}" if approval.target else ""
                waiting.append(
                    Item(
                        approval.created_at,
                        record.channel,
                        f"approval of {text(approval.tool, 80)}{target} waiting {_minutes(now - approval.created_at)} "
                        f"(run {record.run_id[:12]}, asked by {text(approval.requester, 40)})",
                        approval.id,
                    )
                )
    changed, undecided = [], []
    channels: dict[str, str] = {}
    for entry in entries:
        f = entry.fields
        if entry.kind is AuditKind.RUN_STARTED:
            channels[entry.run_id] = f.get("channel", "")
        channel = channels.get(entry.run_id, "")
        if not channel or not may_see(channel):
            continue  # a run started before the shift, or in a channel the reader may not see
        if entry.kind is AuditKind.TOOL_EXECUTED and f.get("category") not in ("read_only", None):
            by = f", approved by {text(f['confirmed_by'], 40)}" if f.get("confirmed_by") else ""
            target = f" on {text(f['target'], 80)}" if f.get("target") else ""
            what = f"{text(f.get('tool', '?'), 80)}{target}{by}: {f.get('outcome', '?')} (run {entry.run_id[:12]})"
            changed.append(Item(entry.at, channel, what, entry.id))
        elif entry.kind is AuditKind.APPROVAL_DECIDED and f.get("status") in ("expired", "declined"):
            who = f" by {text(f['decided_by'], 40)}" if f.get("decided_by") else ""
            what = f"approval of {text(f.get('tool', '?'), 80)} {f['status']}{who} (run {entry.run_id[:12]})"
            undecided.append(Item(entry.at, channel, what, entry.id))
    return Handoff(
        since, now, tuple(firing), tuple(in_progress), tuple(waiting), tuple(changed), tuple(undecided)
    )


def _ts(ts: str) -> float:
    try:
        return float(ts)
    except ValueError:
        return 0.0


def load_handoff(
    client: redis.Redis,
    keys: Keys,
    audit: AuditLog,
    approvals: Approvals,
    *,
    since: float,
    redact: Callable[[str], str],
    may_see: Callable[[str], bool] = lambda channel: True,
    clock: Callable[[], float] = time.time,
) -> Handoff:
    records = RunRecords(client, keys)
    active = [(record, approvals.for_run(record.run_id)) for record in records.get_many(records.active_ids())]
    return build_handoff(
        now=clock(),
        since=since,
        groups=AlertStore(client, keys).groups(),
        active=active,
        entries=audit.since(since),
        redact=redact,
        may_see=may_see,
    )


def handoff_text(handoff: Handoff) -> str:
    """Plain text (the CLI escapes control characters of what it prints)."""

    def stamp(at: float) -> str:
        return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(at)) if at else "-"

    out = [f"Shift handoff: {stamp(handoff.since)} to {stamp(handoff.now)}"]
    sections = (
        ("Alert groups firing", handoff.firing),
        ("Runs in progress", handoff.in_progress),
        ("Approvals waiting", handoff.waiting),
        ("Changed during the shift", handoff.changed),
        ("Left undecided (approvals expired or declined)", handoff.undecided),
    )
    for title, items in sections:
        out += ["", f"{title}:"]
        out += [f"  {stamp(i.at)}  {i.channel}  {i.what}  [{i.ref}]" for i in items] or ["  none"]
    return "\n".join(out)
