"""Reading the change journal (issue 33): ``recent_changes`` and an alert's window, and what a
change costs in Redis.

One target's journal is filled to its cap (``PER_TARGET``, 5,000 changes over 30 days: package
upgrades, file edits with a diff of about 600 characters, restarts, deploys), sealed as a runner
and the deploy webhooks write them. Then, one by one, ``QUERIES`` answers of ``recent_changes``
as the worker computes them (``ChangeReader.answer``: the sorted-set range read, every seal
checked, the text built) for the default window (6 h), a day and a week; and the alert window
(``ChangeReader.before``: the 2 hours before a ``startsAt``, at most 20 changes) an alert's first
message reads. The tool runs in the worker, which reads the journal from Redis (docs/CHANGES.md
says why): there is no runner on this path. The footprint is ``MEMORY USAGE`` of the journal's
key over the changes it holds.

Target: p99 <= 50 ms for a week's window of a full journal.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from functools import partial

from bench.common import Result, bench_redis, parse_options, percentile, settle
from bot.changes.journal import PER_TARGET, ChangeJournal
from bot.changes.reader import ChangeReader
from bot.fleet.target_keys import target_key
from bot.keys import Keys
from tools.changes.record import DEPLOY, FILE, PACKAGE, RESTART, Change
from tools.inventory import Target

NAME = "changes_read"
QUERIES, QUICK_QUERIES = 300, 30
SECRET = b"bench-changes-secret"
TARGET = "web-03"
DAYS = 30
TARGET_P99_MS = 50.0
WINDOWS = (
    ("6h", "recent_changes, default window (6 h)"),
    ("1d", "recent_changes, a day"),
    ("7d", "recent_changes, a week"),
)


def change(number: int, now: float, rng: random.Random) -> Change:
    at = now - rng.uniform(0, DAYS * 86_400 - 3600)
    kind = rng.choice((PACKAGE, FILE, FILE, RESTART, DEPLOY))
    if kind == FILE:
        before, after = rng.randint(1, 64), rng.randint(1, 64)
        body = "\n".join(f" line {n} of the context around it" for n in range(12))
        diff = f"--- a/etc/app/{number}.conf\n+++ b/etc/app/{number}.conf\n@@ -1,14 +1,14 @@\n-size {before}m;\n+size {after}m;\n{body}"
        return Change(
            TARGET, kind, at, f"edited /etc/app/{number}.conf", diff=diff, source="runner", seen=True
        )
    what = {
        PACKAGE: f"upgrade libfoo{number} 1.{number}.0-1 -> 1.{number}.0-2 (apt-get -y upgrade)",
        RESTART: f"restart of svc{number % 40}.service",
        DEPLOY: f"deploy api 1.{number}.0",
    }[kind]
    return Change(TARGET, kind, at, what, who="deploy" if kind != RESTART else "", source="runner")


def main(argv: Sequence[str] | None = None) -> int:
    options, _ = parse_options(__doc__ or NAME, argv)
    count = QUICK_QUERIES if options.quick else QUERIES
    load = settle(options.settle)
    result = Result(NAME, "Change journal: recent_changes and an alert's window", options.quick, load)
    with bench_redis(NAME) as bench:
        keys = Keys(bench.prefix)
        now = time.time()
        journal = ChangeJournal(bench.client, keys, partial(target_key, SECRET), days=DAYS, clock=lambda: now)
        rng = random.Random(33)
        for first in range(0, PER_TARGET, 500):  # as scans and webhooks write them: batches
            journal.append([change(n, now, rng) for n in range(first, first + 500)])
        stored = int(bench.client.zcard(keys.changes(TARGET)))
        footprint = int(bench.client.memory_usage(keys.changes(TARGET), samples=0) or 0)
        targets = (Target(name=TARGET, via="runner"),)
        reader = ChangeReader(journal, lambda _channel: (targets, TARGET), days=DAYS, clock=lambda: now)
        rows, data = [], {}
        for since, label in WINDOWS:
            reader.answer(TARGET, since, None)  # warm the connection
            times = [_timed(lambda since=since: reader.answer(TARGET, since, None)) for _ in range(count)]
            rows.append([label, percentile(times, 50), percentile(times, 99)])
            data[since] = times
        starts = [now - rng.uniform(3600, DAYS * 86_400) for _ in range(count)]
        alert_times = [_timed(lambda at=at: reader.before("C1", TARGET, at, 7200, limit=20)) for at in starts]
        rows.append(
            [
                "an alert's window (2 h before startsAt, at most 20)",
                percentile(alert_times, 50),
                percentile(alert_times, 99),
            ]
        )
        data["alert"] = alert_times
    result.add_table(
        f"one target's journal at its cap: {stored:,} changes over {DAYS} days ({footprint / stored:.0f} Redis bytes each); {count} reads each",
        ["read", "p50 ms", "p99 ms"],
        rows,
    )
    week = rows[2]
    result.target(
        f"recent_changes p99 <= {TARGET_P99_MS:g} ms for a week of a full journal",
        f"{week[2]:.2f} ms",
        week[2] <= TARGET_P99_MS,
    )
    result.data = {"stored": stored, "bytes_per_change": footprint / stored, "times_ms": data}
    result.save(options)
    return 0


def _timed(read: object) -> float:
    assert callable(read)
    started = time.perf_counter()
    read()
    return (time.perf_counter() - started) * 1000


if __name__ == "__main__":
    raise SystemExit(main())
