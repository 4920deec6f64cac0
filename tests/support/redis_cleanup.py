"""What a test leaves in the shared Redis: the keys under its prefix and RQ's keys of its queues.

The tests share one Redis (the machine's, or an embedded one) with each other, with ``pytest -n``'s
other workers and with whatever else runs on the machine, so nothing here scans for "keys that look
like a test's": only what this process handed out (``ISSUED``: the ``key_prefix`` and ``queue_name``
fixtures record theirs, a test with a prefix or queue of its own calls ``ISSUED.add``) is ever
deleted or reported.

RQ names a queue's keys after the queue (``rq:queue:Q``, ``rq:wip:Q``, ``rq:workers:Q``,
``rq:scheduler-lock:Q``...), but a job's after its id (``rq:job:ID``, ``rq:results:ID``,
``rq:executions:ID``, ``rq:execution:ID:...``) and a worker's or scheduler's after its name, and
it keeps two shared sets (``rq:queues``, ``rq:workers``) that list them. A test's queue names start
with its ``queue_name`` (``test-<hex>``, ``test-<hex>.alerts``, ``test-<hex>.target.web-03``; a
runner's job ids and worker names spell it too), so a key is the test's when its name contains
one of them, or when it is a job, worker or scheduler record whose ``origin`` / ``queues`` field
names one, or a key of such a job or worker.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import redis

_GLOB = re.compile(rb"([*?\[\]\\])")
# ``PYTEST_CHATOPS_ISSUED=file``: every prefix and queue handed out is appended to ``file`` as it is,
# so that what a run left in a Redis other processes share can be told from what they left.
RECORD = "PYTEST_CHATOPS_ISSUED"
_SCAN_COUNT = 1000
_JOB_FAMILIES = (b"results", b"executions", b"execution")


@dataclass
class Issued:
    """The key prefixes and RQ queue bases this process's tests were given."""

    prefixes: set[str] = field(default_factory=set)
    queues: set[str] = field(default_factory=set)

    def add(self, *, prefix: str | None = None, queue: str | None = None) -> None:
        if prefix:
            self.prefixes.add(prefix)
        if queue:
            self.queues.add(queue)
        record = os.environ.get(RECORD)
        if record:
            with open(record, "a", encoding="utf-8") as lines:
                lines.writelines(
                    f"{kind}\t{name}\n" for kind, name in (("prefix", prefix), ("queue", queue)) if name
                )


ISSUED = Issued()


@dataclass
class Leftovers:
    """Keys to delete, and members of RQ's shared sets (``rq:queues``, ``rq:workers``) to remove."""

    keys: set[bytes] = field(default_factory=set)
    members: set[tuple[bytes, bytes]] = field(default_factory=set)

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


def rq_leftovers(client: redis.Redis, queues: Iterable[str]) -> Leftovers:
    """RQ's keys of the queues whose names start with one of ``queues``, and their shared-set members."""
    bases = [q.encode() for q in queues]
    found = Leftovers()
    if not bases:
        return found
    rq_keys = list(_scan(client, b"rq:*"))
    found.keys.update(k for k in rq_keys if any(b in k for b in bases))
    owners = _records_of(client, rq_keys, bases)
    for key in rq_keys:
        parts = key.split(b":")
        if len(parts) >= 3 and parts[2] in owners.get(parts[1], set()):
            found.keys.add(key)  # rq:job:ID, rq:job:ID:dependents, rq:worker:NAME:executions...
        elif len(parts) >= 3 and parts[1] in _JOB_FAMILIES and parts[2] in owners[b"job"]:
            found.keys.add(key)  # rq:results:ID, rq:executions:ID, rq:execution:ID:...
    for shared in (b"rq:queues", b"rq:workers"):
        for member in client.smembers(shared):
            if any(b in member for b in bases) or _names_owned(member, owners):
                found.members.add((shared, member))
    return found


def _records_of(client: redis.Redis, rq_keys: list[bytes], bases: list[bytes]) -> dict[bytes, set[bytes]]:
    """``{b"job": ids, b"worker": names, b"scheduler": names}`` whose record names one of ``bases``'
    queues (a job's ``origin``, a worker's or scheduler's comma-separated ``queues``)."""
    records = [
        k for k in rq_keys if k.count(b":") == 2 and k.split(b":")[1] in (b"job", b"worker", b"scheduler")
    ]
    pipe = client.pipeline(transaction=False)
    for key in records:
        pipe.type(key)
        pipe.hmget(key, ["origin", "queues"])
    answers = pipe.execute(raise_on_error=False)
    owners: dict[bytes, set[bytes]] = {b"job": set(), b"worker": set(), b"scheduler": set()}
    for index, key in enumerate(records):
        kind, fields = answers[2 * index], answers[2 * index + 1]
        if kind != b"hash" or not isinstance(fields, list):
            continue
        named = b",".join(f for f in fields if f)
        if any(queue.startswith(b) for queue in named.split(b",") for b in bases):
            _, family, name = key.split(b":")
            owners[family].add(name)
    return owners


def _names_owned(member: bytes, owners: dict[bytes, set[bytes]]) -> bool:
    """``rq:workers`` lists ``rq:worker:NAME`` keys."""
    parts = member.split(b":")
    return len(parts) == 3 and parts[2] in owners.get(parts[1], set())


def leftovers_of(client: redis.Redis, *, prefix: str | None = None, queue: str | None = None) -> Leftovers:
    """What one test (its ``prefix``, its ``queue``) left in ``client``'s Redis."""
    found = rq_leftovers(client, [queue] if queue else [])
    if prefix:
        found.keys |= prefix_keys(client, prefix)
    return found


def session_leftovers(client: redis.Redis, issued: Issued) -> Leftovers:
    """What any of ``issued``'s prefixes and queues still has in ``client``'s Redis: one scan of all keys."""
    found = rq_leftovers(client, issued.queues)
    if issued.prefixes:
        for key in _scan(client, b"*"):
            ends = [i for i, c in enumerate(key) if c == ord(":")]
            if any(key[: i + 1].decode(errors="replace") in issued.prefixes for i in ends):
                found.keys.add(key)
    return found
