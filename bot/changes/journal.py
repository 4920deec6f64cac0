"""The change journal, and the only code that knows its keys: ``fleet:changes:{target}``.

One sorted set per target, each member one sealed change scored by when it happened. A member is
``{"c": <the change's JSON>, "s": <seal>}`` where the seal is an HMAC of the change under its
target's key (``bot.fleet.target_keys``, in a domain of its own): the runner of web-03 holds only
web-03's key, so it can write web-03's journal and no other, and whoever can write to Redis cannot
slip a change ("nothing changed", "deploy by alice") past a reader, which drops every member whose
seal does not match. The member's bytes are a function of the change alone, so a change seen by
two scans, or a webhook delivered twice, is stored once (``ZADD NX``).

Bounded: entries older than the retention (``CHATOPS_CHANGES_DAYS``) are removed at every write,
the key expires with it when nobody writes, and a target keeps at most ``PER_TARGET`` changes (the
newest). The key sits under the fleet's, beside the target's executions, so a runner's Redis ACL
user reaches its own target's journal only (``bot.fleet.runner_acl``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Callable, Sequence

import redis
from redis.client import Pipeline

from agent.redis_util import redis_clock
from bot.keys import Keys
from tools.changes.record import Change
from tools.errors import MalformedChange

log = logging.getLogger(__name__)

DAY = 86_400
PER_TARGET = 5_000  # a busy host's month of changes; older ones go first
_DOMAIN = b"chatops change v1\n"
_PER_TARGET_COMMANDS = 4  # in ``append``: ZADD (its answer: how many were new), and the bounds


class ChangeJournal:
    """``key_of(target)``: the target's key (``target_key(secret, target)``); a runner's raises
    for any other target. ``clock``: Redis's, so every host agrees on what retention means."""

    def __init__(
        self,
        connection: redis.Redis,
        keys: Keys,
        key_of: Callable[[str], bytes],
        *,
        days: int = 30,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._redis = connection
        self._keys = keys
        self._key_of = key_of
        self._retention = days * DAY
        self._clock = clock or redis_clock(connection)

    def append(self, changes: Sequence[Change], *, then: Callable[[Pipeline], None] | None = None) -> int:
        """Store ``changes`` (bounded first); how many were new. One transaction, with whatever
        ``then`` adds to it (a webhook delivery's claim marked done: ``bot.web.change_receiver``)."""
        by_target: dict[str, dict[str, float]] = {}
        for change in changes:
            change = change.bounded()
            by_target.setdefault(change.target, {})[self._member(change)] = change.at
        oldest = self._clock() - self._retention
        pipe = self._redis.pipeline(transaction=True)
        for target, members in by_target.items():
            key = self._keys.changes(target)
            pipe.zadd(key, members, nx=True)
            pipe.zremrangebyscore(key, "-inf", f"({oldest}")
            pipe.zremrangebyrank(key, 0, -PER_TARGET - 1)
            pipe.expire(key, self._retention)
        if then is not None:
            then(pipe)
        if not len(pipe):
            return 0
        results = pipe.execute()
        return sum(int(results[index * _PER_TARGET_COMMANDS]) for index in range(len(by_target)))

    def between(self, target: str, since: float, until: float, *, limit: int = 200) -> list[Change]:
        """The newest ``limit`` changes of ``target`` in [since, until], oldest first; a member
        that is not sealed by the target's key, or not a change of this target, is skipped."""
        raw: list[bytes] = self._redis.zrevrangebyscore(  # type: ignore[assignment]
            self._keys.changes(target), until, since, start=0, num=limit
        )
        key = self._key_of(target)  # derived once per read, not per member
        changes = [change for member in raw if (change := self._opened(target, key, member)) is not None]
        return sorted(changes, key=lambda change: change.at)

    def _member(self, change: Change) -> str:
        return sealed_member(self._key_of(change.target), change)

    def _opened(self, target: str, key: bytes, member: bytes | str) -> Change | None:
        try:
            sealed = json.loads(member)
            body, seal = sealed["c"], sealed["s"]
            if not isinstance(body, str) or not isinstance(seal, str):
                raise TypeError("not a sealed change")
            if not hmac.compare_digest(seal, _seal(key, body)):
                raise MalformedChange("its seal does not match (not written by a holder of the target's key)")
            change = Change.from_json(body)
            if change.target != target:
                raise MalformedChange(f"a change of {change.target!r} in {target!r}'s journal")
        except (ValueError, TypeError, KeyError) as error:  # MalformedChange is a ValueError
            log.warning("skipped a change in %s's journal that chatops did not write: %s", target, error)
            return None
        return change


def sealed_member(key: bytes, change: Change) -> str:
    """The journal's member for ``change`` under its target's ``key``: a function of both alone."""
    body = change.to_json()
    return json.dumps({"c": body, "s": _seal(key, body)}, separators=(",", ":"))


def _seal(key: bytes, body: str) -> str:
    return hmac.new(key, _DOMAIN + body.encode(), hashlib.sha256).hexdigest()
