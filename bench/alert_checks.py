"""What the alert benchmark checks once the worker drained the notifications (``bench.alerts``).

Nothing lost: every accepted notification was applied, so each group's record holds exactly the
fingerprints sent and counts every delivery, its root message says so, and no notification
record is left. Nothing twice: one group record per group key, one root message per group in the
emulator's channel, no more thread notes than deliveries that brought new alerts, and exactly the
route's storm limit of automatic runs, each in its own group's thread.

The notes are an upper bound, not a count: several workers apply one group's notifications one
at a time under its lock but not necessarily in the order sent (a notification that found the
lock taken comes back a second later), and a delivery that arrives after one carrying a superset
of its alerts brings nothing new. Every figure is read from
Redis (``bot.alerts.store``'s records) and from the emulator's control API, never from the
bot's logs.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.redis_util import as_text
from bench.alert_traffic import Expected
from bench.common import BenchRedis
from bot.alerts.store import AlertStore, Group, group_id
from bot.keys import Keys

_SHOWN_PROBLEMS = 5


@dataclass
class Tally:
    """One row of the after-the-drain table: what the accepted deliveries imply, what was found."""

    what: str
    expected: int
    found: int
    at_most: bool = False  # ``expected`` is an upper bound

    @property
    def ok(self) -> bool:
        return self.found <= self.expected if self.at_most else self.found == self.expected

    @property
    def shown_expected(self) -> str:
        return f"at most {self.expected}" if self.at_most else str(self.expected)


@dataclass
class AlertCheck:
    lost: list[Tally] = field(default_factory=list)
    duplicated: list[Tally] = field(default_factory=list)
    # Per group, what differs: ("lost", ...) for something sent and not applied or shown,
    # ("duplicate", ...) for something applied or shown twice.
    problems: list[tuple[str, str]] = field(default_factory=list)
    alert_runs: int = 0

    def problem(self, kind: str, text: str) -> None:
        self.problems.append((kind, text))

    @property
    def nothing_lost(self) -> bool:
        return all(t.ok for t in self.lost) and not any(kind == "lost" for kind, _ in self.problems)

    @property
    def nothing_duplicated(self) -> bool:
        return all(t.ok for t in self.duplicated) and not any(
            kind == "duplicate" for kind, _ in self.problems
        )


def pending_notifications(bench: BenchRedis) -> int:
    """Accepted notifications no worker has applied yet (their records go once applied)."""
    return _count(bench, f"{bench.prefix}alerts:notification:*")


def check_alerts(
    bench: BenchRedis,
    expected: Mapping[str, Expected],
    roots: list[dict[str, Any]],
    storm_limit: int,
) -> AlertCheck:
    """``expected`` by group key; ``roots``: the alert channel's messages with their replies (the
    emulator's ``SlackEmulatorClient.messages``)."""
    keys = Keys(bench.prefix)
    store = AlertStore(bench.client, keys)
    check = AlertCheck()
    groups = {key: store.group(group_id("alertmanager", key)) for key in expected}
    by_ts = {message["ts"]: message for message in roots}
    fingerprints_found = notifications_found = notes_found = 0
    for key, want in expected.items():
        group = groups[key]
        if group is None:
            check.problem("lost", f"{want.name}: no group record")
            continue
        found = set(group.fingerprints) & set(want.fingerprints)
        fingerprints_found += len(found)
        if found != set(want.fingerprints):
            check.problem(
                "lost", f"{want.name}: {len(found)} of the {len(want.fingerprints)} alerts sent stored"
            )
        if len(group.fingerprints) != len(set(group.fingerprints)):
            check.problem("duplicate", f"{want.name}: an alert stored twice in {group.fingerprints}")
        notifications_found += group.notifications
        root = by_ts.get(group.root_ts)
        if root is None:
            check.problem("lost", f"{want.name}: its root message {group.root_ts} is not in the channel")
            continue
        notes_found += len(root.get("replies") or [])
        _check_root(check, want, group, root)
    expected_fingerprints = sum(len(w.fingerprints) for w in expected.values())
    check.lost += [
        Tally("groups with a record", len(expected), sum(1 for g in groups.values() if g is not None)),
        Tally("alerts (fingerprints) in the group records", expected_fingerprints, fingerprints_found),
        Tally("notifications counted by the groups", sum(w.notifications for w in expected.values()),
              notifications_found),
        Tally("notification records left unapplied", 0, pending_notifications(bench)),
    ]  # fmt: skip
    check.duplicated += _duplicates(bench, keys, expected, groups, roots, notes_found, storm_limit, check)
    return check


def _check_root(check: AlertCheck, want: Expected, group: Group, root: dict[str, Any]) -> None:
    """The root message shows the group as it ended: its title, every notification counted."""
    blocks = json.dumps(root.get("blocks") or [])
    if not str(root.get("text", "")).startswith(f"FIRING: {want.name}"):
        check.problem("lost", f"{want.name}: its root message says {root.get('text')!r}")
    if f"{want.notifications} notification(s)" not in blocks:
        check.problem(
            "lost", f"{want.name}: its root message does not show {want.notifications} notifications"
        )
    notes = len(root.get("replies") or [])
    if notes > want.notes:
        check.problem(
            "duplicate", f"{want.name}: {notes} thread notes for {want.notes} deliveries with new alerts"
        )


def _duplicates(
    bench: BenchRedis,
    keys: Keys,
    expected: Mapping[str, Expected],
    groups: Mapping[str, Group | None],
    roots: list[dict[str, Any]],
    notes_found: int,
    storm_limit: int,
    check: AlertCheck,
) -> list[Tally]:
    root_ts = Counter(g.root_ts for g in groups.values() if g is not None)
    shared = sum(count - 1 for count in root_ts.values())
    runs = [g for g in groups.values() if g is not None and g.run_id]
    check.alert_runs = len(runs)
    pipe = bench.client.pipeline(transaction=False)
    for group in runs:
        pipe.hget(keys.run(group.run_id), "thread_ts")
    in_own_thread = sum(1 for g, ts in zip(runs, pipe.execute(), strict=True) if as_text(ts) == g.root_ts)
    return [
        Tally("group records (one per group key)", len(expected), _count(bench, f"{bench.prefix}alerts:group:*")),
        Tally("root messages in the alert channel (one per group)", len(expected), len(roots)),
        Tally("groups sharing a root message with another", 0, shared),
        Tally("thread notes (one per delivery bringing new alerts)", sum(w.notes for w in expected.values()),
              notes_found, at_most=True),
        Tally("automatic runs (the route's storm limit)", min(storm_limit, len(expected)), len(runs)),
        Tally("distinct runs, each in its group's thread", len(runs),
              min(len({g.run_id for g in runs}), in_own_thread)),
    ]  # fmt: skip


def _count(bench: BenchRedis, pattern: str) -> int:
    return sum(1 for _ in bench.client.scan_iter(match=pattern, count=2000))


def shown_problems(check: AlertCheck) -> str:
    """The first few problems found, for a note (all of them are in the JSON's data)."""
    if not check.problems:
        return "no group differs from what was sent"
    first = "; ".join(f"{kind}: {text}" for kind, text in check.problems[:_SHOWN_PROBLEMS])
    more = len(check.problems) - _SHOWN_PROBLEMS
    return first + (f"; and {more} more" if more > 0 else "")
