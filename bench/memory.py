"""Incident memory (issue 32): ``similar_incidents`` latency at 1,000 / 10,000 / 100,000 stored
incidents, and the Redis bytes each incident costs.

Incidents are generated (seeded): 50 alert names, 8 services, 300 targets, 20 channels of which a
quarter are private, a question, an answer and one supported hypothesis with a quote each (about
1 KB of JSON, like a real one). They are written with the store's ``import_new`` (what ``save`` writes, pipelined
by the thousand), grown from one size to the next. At each size ``QUERIES`` queries (seeded: an alert
name and its labels, a target, a few words, asked from a random channel) are timed one by one
through ``IncidentMemory.similar``, the tool's whole path except formatting. The footprint is the
sum of ``MEMORY USAGE`` over every ``memory:*`` key, divided by the incidents stored.

Target: p99 <= 50 ms at 100,000 incidents.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence

from bench.common import OPS_WORDS, Result, bench_redis, parse_options, percentile, settle
from bot.keys import Keys
from bot.memory.incident import Action, Incident, Supported
from bot.memory.similar import IncidentMemory
from bot.memory.store import IncidentStore

NAME = "memory"
SIZES, QUICK_SIZES = (1_000, 10_000, 100_000), (200, 1_000)
QUERIES, QUICK_QUERIES = 500, 30
TARGET_P99_MS = 50.0
ALERTS = [f"Alert{n:02d}" for n in range(50)]
SERVICES = ("api", "web", "db", "cache", "queue", "auth", "search", "billing")
TARGETS = [f"host-{n:03d}" for n in range(300)]
CHANNELS = [f"C{n:04d}" for n in range(20)]
WORDS = OPS_WORDS[:25]  # the incidents' words, as generated since this benchmark began
NOW = time.time()


def incident(number: int, rng: random.Random) -> Incident:
    alert = rng.choice(ALERTS)
    service = rng.choice(SERVICES)
    target = rng.choice(TARGETS)
    channel = rng.choice(CHANNELS)
    words = " ".join(rng.choices(WORDS, k=12))
    return Incident(
        id=f"run-{number:07d}-{rng.getrandbits(32):08x}",
        channel=channel,
        private=int(channel[1:]) % 4 == 0,
        thread_ts=f"{1_700_000_000 + number}.000100",
        link=f"https://example.slack.com/archives/{channel}/p{1_700_000_000 + number}000100",
        at=NOW - rng.uniform(0, 170 * 86_400),
        requester="U012345",
        question=f"{alert} firing on {target}: {words}",
        alert_name=alert,
        labels={"alertname": alert, "service": service, "severity": rng.choice(("page", "ticket"))},
        fingerprints=(f"{rng.getrandbits(64):016x}",),
        targets=(target,),
        status="completed",
        conclusion="root_cause_found",
        answer=f"The {service} on {target} ran out of {rng.choice(WORDS)}: "
        + " ".join(rng.choices(WORDS, k=40)),
        supported=(
            Supported(
                f"{rng.choice(WORDS)} exhausted on {target}", (f"{target}: 100% {rng.choice(WORDS)} used",)
            ),
        ),
        actions=(Action("service_restart", target, "U0APPROVER", '{"service":"nginx"}'),),
    )


def query(memory: IncidentMemory, rng: random.Random) -> float:
    alert = rng.choice(ALERTS)
    started = time.perf_counter()
    memory.similar(
        rng.choice(CHANNELS),
        query=" ".join(rng.choices(WORDS, k=3)),
        alert_name=alert,
        labels={"alertname": alert, "service": rng.choice(SERVICES)},
        targets=(rng.choice(TARGETS),),
    )
    return (time.perf_counter() - started) * 1000


def footprint(client: object, prefix: str) -> int:
    import redis

    assert isinstance(client, redis.Redis)
    total, batch = 0, []
    for key in client.scan_iter(match=f"{prefix}memory:*", count=5000):
        batch.append(key)
        if len(batch) >= 2000:
            total += _usage(client, batch)
            batch = []
    return total + (_usage(client, batch) if batch else 0)


def _usage(client: object, keys: list[bytes]) -> int:
    pipe = client.pipeline(transaction=False)  # type: ignore[attr-defined]
    for key in keys:
        pipe.memory_usage(key, samples=0)
    return sum(int(n or 0) for n in pipe.execute())


def main(argv: Sequence[str] | None = None) -> int:
    options, _ = parse_options(__doc__ or NAME, argv)
    sizes = QUICK_SIZES if options.quick else SIZES
    count = QUICK_QUERIES if options.quick else QUERIES
    load = settle(options.settle)
    result = Result(NAME, "Incident memory: similar_incidents and footprint", options.quick, load)
    rows, data = [], []
    with bench_redis(NAME) as bench:
        store = IncidentStore(bench.client, Keys(bench.prefix), retention_days=180)
        memory = IncidentMemory(store)
        rng, stored = random.Random(32), 0
        for size in sizes:
            started = time.perf_counter()
            while stored < size:  # pipelined batches: 100,000 single saves would take minutes
                batch = [incident(n, rng) for n in range(stored, min(size, stored + 1000))]
                store.import_new(batch)
                stored += len(batch)
            load_s = time.perf_counter() - started
            asking = random.Random(size)
            query(memory, asking)  # warm the connection
            times = [query(memory, asking) for _ in range(count)]
            per_incident = footprint(bench.client, bench.prefix) / size
            p50, p99 = percentile(times, 50), percentile(times, 99)
            rows.append([size, p50, p99, per_incident, load_s])
            data.append(
                {
                    "incidents": size,
                    "p50_ms": p50,
                    "p99_ms": p99,
                    "bytes_per_incident": per_incident,
                    "load_s": load_s,
                }
            )
            print(
                f"{size} incidents: p50 {p50:.2f} ms, p99 {p99:.2f} ms, {per_incident:.0f} B each (loaded in {load_s:.1f} s)",
                flush=True,
            )
    result.add_table(
        f"similar_incidents ({count} queries each: alert name and labels, a target, three words, from a random channel)",
        ["incidents", "p50 ms", "p99 ms", "Redis bytes / incident", "load s"],
        rows,
    )
    largest = rows[-1]
    result.target(
        f"p99 <= {TARGET_P99_MS:g} ms at {SIZES[-1]:,} incidents",
        f"{largest[2]:.2f} ms at {largest[0]:,}",
        largest[2] <= TARGET_P99_MS,
    )
    result.data = {"sizes": data}
    result.save(options)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
