"""What a test leaves in the shared Redis: the keys under its prefix and RQ's keys of its queues.

The tests share one Redis (the machine's, or an embedded one) with each other, with ``pytest -n``'s
other workers and with whatever else runs on the machine, so nothing here scans for "keys that look
like a test's": only what this process handed out (``ISSUED``: the ``key_prefix`` and ``queue_name``
fixtures record theirs, a test with a prefix or queue of its own calls ``ISSUED.add``) is ever
deleted or reported.

What belongs to a prefix or a queue is ``emulator.redis_leftovers``' to tell (RQ's keys included).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import redis
from rq.group import Group

from emulator.redis_leftovers import Leftovers, leftovers_of, rq_leftovers

__all__ = [
    "ISSUED",
    "RECORD",
    "Issued",
    "Leftovers",
    "forget_rq_cleaning_lock",
    "leftovers_of",
    "session_leftovers",
]

# ``PYTEST_CHATOPS_ISSUED=file``: every prefix and queue handed out is appended to ``file`` as it is,
# so that what a run left in a Redis other processes share can be told from what they left.
RECORD = "PYTEST_CHATOPS_ISSUED"


@dataclass
class Issued:
    """The key prefixes and RQ queue bases this process's tests were given."""

    prefixes: set[str] = field(default_factory=set)
    queues: set[str] = field(default_factory=set)
    owners: dict[str, str] = field(default_factory=dict)  # prefix or queue -> the test given it

    def add(self, *, prefix: str | None = None, queue: str | None = None, owner: str = "") -> None:
        if prefix:
            self.prefixes.add(prefix)
        if queue:
            self.queues.add(queue)
        for name in (prefix, queue):
            if name and owner:
                self.owners[name] = owner
        record = os.environ.get(RECORD)
        if record:
            with open(record, "a", encoding="utf-8") as lines:
                lines.writelines(
                    f"{kind}\t{name}\t{owner}\n"
                    for kind, name in (("prefix", prefix), ("queue", queue))
                    if name
                )

    def owner_of(self, key: str, found: Leftovers | None = None) -> str:
        """The test whose prefix or queue ``key`` (as ``Leftovers.names`` shows it) belongs to, if known
        (a job's or worker's key by the queue its record names, which ``found`` holds)."""
        queue = found.queue_of.get(key.encode(), b"").decode() if found else ""
        return next((owner for name, owner in self.owners.items() if name in key or name == queue), "")


ISSUED = Issued()


def session_leftovers(client: redis.Redis, issued: Issued) -> Leftovers:
    """What any of ``issued``'s prefixes and queues still has in ``client``'s Redis: one scan of all keys."""
    found = rq_leftovers(client, issued.queues)
    if issued.prefixes:
        for key in client.scan_iter(match=b"*", count=1000):
            ends = [i for i, c in enumerate(key) if c == ord(":")]
            if any(key[: i + 1].decode(errors="replace") in issued.prefixes for i in ends):
                found.keys.add(key)
    return found


def forget_rq_cleaning_lock(client: redis.Redis) -> None:
    """RQ's one key outside any queue: every worker's registry clean-up takes ``rq:clean_groups``
    (SET NX with a TTL of minutes) so that groups are swept by one worker at a time. The tests'
    workers take it like any; it would outlive the session by minutes. It is the one exception to
    "only what was handed out": deleting it costs whoever else uses RQ here one early sweep, nothing
    more."""
    client.delete(Group.REDIS_GROUP_CLEANING_KEY)
