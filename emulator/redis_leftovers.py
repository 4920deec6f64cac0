"""What a run of the bot left in a Redis it shares: the keys under its prefix, and RQ's keys of its queues.

The tests (``tests/support/redis_cleanup.py``) and the benchmarks (``bench.common.bench_redis``)
share a Redis with whatever else runs on the machine, so only what they name is ever deleted: a
key prefix, and a queue name that every queue of theirs starts with.

RQ names a queue's keys after the queue (``rq:queue:Q``, ``rq:wip:Q``, ``rq:workers:Q``,
``rq:scheduler-lock:Q``...), but a job's after its id (``rq:job:ID``, ``rq:results:ID``,
``rq:executions:ID``, ``rq:execution:ID:...``) and a worker's or scheduler's after its name, and
it keeps two shared sets (``rq:queues``, ``rq:workers``) that list them. The queues of one run are
named after one base (``test-<hex>``, ``test-<hex>.alerts``, ``test-<hex>.target.web-03``; a
runner's job ids and worker names spell it too), so a key is the run's when its name contains the
base, or when it is a job, worker or scheduler record whose ``origin`` / ``queues`` field names one
of its queues, or a key of such a job or worker.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import redis

_GLOB = re.compile(rb"([*?\[\]\\])")
_SCAN_COUNT = 1000
_JOB_FAMILIES = (b"results", b"executions", b"execution")
_REGISTRIES = (b"wip", b"finished", b"failed", b"deferred", b"scheduled", b"canceled")


@dataclass
class Leftovers:
    """Keys to delete, and members of RQ's shared sets (``rq:queues``, ``rq:workers``) to remove."""

    keys: set[bytes] = field(default_factory=set)
    members: set[tuple[bytes, bytes]] = field(default_factory=set)
    # A job's or worker's keys are named after its id, not its queue: the queue its record names,
    # so that a report can say whose they were.
    queue_of: dict[bytes, bytes] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.keys or self.members)

    def names(self) -> list[str]:
        named = [k.decode(errors="replace") for k in self.keys]
        named += [f"{s.decode()} member {m.decode(errors='replace')}" for s, m in self.members]
        return sorted(named)

    def remove(self, client: redis.Redis) -> None:
        ordered = sorted(self.keys)
        for start in range(0, len(ordered), 500):
            client.delete(*ordered[start : start + 500])
        for shared, member in self.members:
            client.srem(shared, member)


def _scan(client: redis.Redis, pattern: bytes) -> Iterator[bytes]:
    yield from client.scan_iter(match=pattern, count=_SCAN_COUNT)


def _glob(text: str) -> bytes:
    return _GLOB.sub(rb"\\\1", text.encode())


def prefix_keys(client: redis.Redis, prefix: str) -> set[bytes]:
    """Every key under ``prefix``."""
    return set(_scan(client, _glob(prefix) + b"*"))


def rq_named(client: redis.Redis, queues: Iterable[str]) -> Leftovers:
    """The quick look (a test's end, a benchmark's, the demo's), without reading every job of a
    shared Redis: the keys named after ``queues``, the jobs their lists and registries hold (with
    their results and executions), the workers their sets list, and the shared-set members.
    A job no list or registry holds any more is ``rq_leftovers``' to find (the session's check)."""
    bases = [q.encode() for q in queues]
    found = Leftovers()
    for base in bases:
        found.keys.update(_scan(client, b"rq:*" + _glob(base.decode()) + b"*"))
    holders = [k for k in found.keys if k.split(b":")[1] in (b"queue", *_REGISTRIES, b"workers")]
    pipe = client.pipeline(transaction=False)
    for key in holders:
        family = key.split(b":")[1]
        if family == b"queue":
            pipe.lrange(key, 0, -1)
        elif family == b"workers":
            pipe.smembers(key)
        else:
            pipe.zrange(key, 0, -1)
    jobs: set[bytes] = set()
    workers: set[bytes] = set()
    for key, members in zip(holders, pipe.execute(raise_on_error=False), strict=True):
        if isinstance(members, (list, set)):
            (workers if key.split(b":")[1] == b"workers" else jobs).update(members)
    # A stopped worker has left the sets but its record stays a while: read the workers' and
    # schedulers' records (a few, unlike the jobs) for the queues they name.
    records = [*_scan(client, b"rq:worker:*"), *_scan(client, b"rq:scheduler:*")]
    owners = _records_of(client, records, bases)
    workers |= {b"rq:worker:" + name for name in owners[b"worker"]}
    schedulers = [b"rq:scheduler:" + name for name in owners[b"scheduler"]]
    worker_keys = [k for w in workers for k in (w, w + b":executions")]
    found.keys |= _existing(client, _job_keys(client, jobs) + worker_keys + schedulers)
    for shared in (b"rq:queues", b"rq:workers"):
        for raw in client.smembers(shared):
            member = raw if isinstance(raw, bytes) else str(raw).encode()
            if any(b in member for b in bases) or member in workers:
                found.members.add((shared, member))
    return found


def _job_keys(client: redis.Redis, jobs: set[bytes]) -> list[bytes]:
    """A job's hash, its dependents, its results, its executions (and each execution's record)."""
    ordered = sorted(jobs)
    pipe = client.pipeline(transaction=False)
    for job in ordered:
        pipe.zrange(b"rq:executions:" + job, 0, -1)
    keys: list[bytes] = []
    for job, executions in zip(ordered, pipe.execute(raise_on_error=False), strict=True):
        keys += [b"rq:job:" + job, b"rq:job:" + job + b":dependents", b"rq:results:" + job]
        keys += [b"rq:executions:" + job]
        if isinstance(executions, list):
            keys += [b"rq:execution:" + job + b":" + e for e in executions]
    return keys


def _existing(client: redis.Redis, keys: list[bytes]) -> set[bytes]:
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.exists(key)
    return {key for key, there in zip(keys, pipe.execute(), strict=True) if there}


def rq_leftovers(client: redis.Redis, queues: Iterable[str]) -> Leftovers:
    """RQ's keys of the queues whose names start with one of ``queues``, and their shared-set members:
    the thorough look, reading every job, worker and scheduler record of the Redis."""
    bases = [q.encode() for q in queues]
    found = Leftovers()
    if not bases:
        return found
    rq_keys = list(_scan(client, b"rq:*"))
    found.keys.update(k for k in rq_keys if any(b in k for b in bases))
    owners = _records_of(client, rq_keys, bases)
    for key in rq_keys:
        queue = _owning_queue(key, owners)
        if queue is not None:
            found.keys.add(key)
            found.queue_of[key] = queue
    for shared in (b"rq:queues", b"rq:workers"):
        for raw in client.smembers(shared):
            member = raw if isinstance(raw, bytes) else raw.encode()  # a client decoding replies gives str
            if any(b in member for b in bases) or _names_owned(member, owners):
                found.members.add((shared, member))
    return found


def _owning_queue(key: bytes, owners: dict[bytes, dict[bytes, bytes]]) -> bytes | None:
    """The base whose record ``key`` belongs to: rq:job:ID, rq:job:ID:dependents and
    rq:worker:NAME:executions by their family; rq:results:ID, rq:executions:ID and
    rq:execution:ID:... by their job."""
    parts = key.split(b":")
    if len(parts) < 3:
        return None
    family = b"job" if parts[1] in _JOB_FAMILIES else parts[1]
    return owners.get(family, {}).get(parts[2])


def _records_of(
    client: redis.Redis, rq_keys: list[bytes], bases: list[bytes]
) -> dict[bytes, dict[bytes, bytes]]:
    """``{b"job": {id: base}, b"worker": {name: base}, b"scheduler": {name: base}}`` for the records
    that name one of ``bases``' queues (a job's ``origin``, a worker's or scheduler's
    comma-separated ``queues``), each with the base it names."""
    records = [
        k for k in rq_keys if k.count(b":") == 2 and k.split(b":")[1] in (b"job", b"worker", b"scheduler")
    ]
    pipe = client.pipeline(transaction=False)
    for key in records:
        pipe.type(key)
        pipe.hmget(key, ["origin", "queues"])
    answers = pipe.execute(raise_on_error=False)
    owners: dict[bytes, dict[bytes, bytes]] = {b"job": {}, b"worker": {}, b"scheduler": {}}
    for index, key in enumerate(records):
        kind, fields = answers[2 * index], answers[2 * index + 1]
        if kind != b"hash" or not isinstance(fields, list):
            continue
        named = b",".join(f for f in fields if f)
        base = next((b for queue in named.split(b",") for b in bases if queue.startswith(b)), None)
        if base is not None:
            _, family, name = key.split(b":")
            owners[family][name] = base
    return owners


def _names_owned(member: bytes, owners: dict[bytes, dict[bytes, bytes]]) -> bool:
    """``rq:workers`` lists ``rq:worker:NAME`` keys."""
    parts = member.split(b":")
    return len(parts) == 3 and parts[2] in owners.get(parts[1], {})


def leftovers_of(
    client: redis.Redis, *, prefix: str | None = None, queue: str | None = None, thorough: bool = False
) -> Leftovers:
    """What one test or run (its ``prefix``, its ``queue`` base) left in ``client``'s Redis
    (``thorough``: every job record of the Redis read, see ``rq_leftovers``)."""
    look = rq_leftovers if thorough else rq_named
    found = look(client, [queue] if queue else [])
    if prefix:
        found.keys |= prefix_keys(client, prefix)
    return found
