"""The shift handoff: what is still open and what changed during the shift, from facts only.

Built from the alert groups (``AlertStore``), the runs not finished (``RunRecords``) with their
approvals (``Approvals``), the audit entries since the shift began (``AuditLog.since``) and the
change journal of the targets the reader may see (``bot.changes.journal``). Every item is one
record, one audit entry or one journal change, named by its id. ``may_see`` keeps channel
boundaries: an item of a channel the reader may not see is left out (the CLI, for operators, sees
every channel).

A **follow-up asked for in a thread** is, from the shift's audit entries: a run that ended
answering with a question (its answer's last line ends with ``?``) after which no run started in
its thread (nobody replied to it); or a reply that came as a run ended (``message_unread``) after
which no run started in its thread (nobody read it). Runs waiting for approval are listed with
their approvals (``waiting``).

``shift_seconds`` parses ``--since`` (``90m``, ``12h``, ``2d``) for the CLI and Slack alike.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import redis

from bot.alerts.store import AlertStore, Group
from bot.changes.journal import ChangeJournal
from bot.keys import Keys
from bot.observability.audit import AuditEntry, AuditKind, AuditLog
from bot.runs.approvals import Approval, Approvals, ApprovalStatus
from bot.runs.record import RunRecord, RunRecords
from tools.changes.record import Change

_DURATION = re.compile(r"(\d{1,5})([mhd])")
_UNIT = {"m": 60, "h": 3600, "d": 86400}
JOURNAL_PER_TARGET = 50  # the newest changes of one target in a handoff


def shift_seconds(text: str) -> float | None:
    """How far back a shift goes: ``90m``, ``12h``, ``2d``; ``None`` for anything else."""
    found = _DURATION.fullmatch(text.strip())
    return int(found.group(1)) * _UNIT[found.group(2)] if found else None


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
    follow_ups: tuple[Item, ...] = ()  # questions and replies left unanswered in threads
    journal: tuple[Item, ...] = ()  # the change journal's entries of the shift (``channel``: "")

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
    journal: Sequence[Change] = (),
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
    threads: dict[str, tuple[str, str]] = {}  # run -> (channel, thread)
    open_asks: dict[tuple[str, str, AuditKind], Item] = {}  # a thread's unanswered question, unread reply
    for entry in entries:
        f = entry.fields
        if entry.kind is AuditKind.RUN_STARTED:
            channels[entry.run_id] = f.get("channel", "")
            threads[entry.run_id] = (f.get("channel", ""), f.get("thread_ts", ""))
            for kind in (AuditKind.RUN_FINISHED, AuditKind.MESSAGE_UNREAD):  # a later run: answered
                open_asks.pop((*threads[entry.run_id], kind), None)
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
        elif entry.kind in (AuditKind.RUN_FINISHED, AuditKind.MESSAGE_UNREAD):
            asked = _follow_up(entry, text)
            if asked:
                open_asks[(*threads[entry.run_id], entry.kind)] = Item(entry.at, channel, asked, entry.id)
    changes = [
        Item(
            change.at,
            "",
            f"{text(change.kind, 20)} on {text(change.target, 80)}: {text(change.what)}"
            f" (by {text(change.who, 40) or '-'}, {text(change.source, 20) or '-'})",
            change.id,
        )
        for change in sorted(journal, key=lambda change: change.at)
    ]
    return Handoff(
        since,
        now,
        tuple(firing),
        tuple(in_progress),
        tuple(waiting),
        tuple(changed),
        tuple(undecided),
        tuple(sorted(open_asks.values(), key=lambda item: item.at)),
        tuple(changes),
    )


def _follow_up(entry: AuditEntry, text: Callable[..., str]) -> str:
    """What a run's end or an unread reply leaves to follow up ("": nothing)."""
    f = entry.fields
    if entry.kind is AuditKind.MESSAGE_UNREAD:
        return f"{text(f.get('user', ''), 40)}'s reply came as run {entry.run_id[:12]} ended, unread: {text(f.get('text', ''))}"
    lines = [line for line in f.get("output", "").splitlines() if line.strip()]
    if f.get("status") == "completed" and lines and lines[-1].rstrip().endswith("?"):
        return f"run {entry.run_id[:12]} asked, and nobody answered: {text(lines[-1])}"
    return ""


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
    journal: ChangeJournal | None = None,
    targets: Sequence[str] = (),
) -> Handoff:
    """``journal``, ``targets``: the change journal and the targets whose changes the reader may see."""
    now = clock()
    records = RunRecords(client, keys)
    active = [(record, approvals.for_run(record.run_id)) for record in records.get_many(records.active_ids())]
    changes: list[Change] = []
    if journal is not None:
        for target in targets:
            changes += journal.between(target, since, now, limit=JOURNAL_PER_TARGET)
    return build_handoff(
        now=now,
        since=since,
        groups=AlertStore(client, keys).groups(),
        active=active,
        entries=audit.since(since),
        redact=redact,
        may_see=may_see,
        journal=changes,
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
        ("Follow-ups asked for in threads", handoff.follow_ups),
        ("Changed during the shift (changes run, with their approvers)", handoff.changed),
        ("Changed on the targets (the change journal)", handoff.journal),
        ("Left undecided (approvals expired or declined)", handoff.undecided),
    )
    for title, items in sections:
        out += ["", f"{title}:"]
        out += [f"  {stamp(i.at)}  {i.channel or '-'}  {i.what}  [{i.ref}]" for i in items] or ["  none"]
    return "\n".join(out)
