"""The jobs a runner refused, kept until a worker puts them into the audit stream.

A runner's Redis user reaches only its own target's keys (``bot.fleet.runner_acl``), never the
shared audit stream: a compromised host could otherwise write entries about anyone. So a runner
records each job it refused (unsigned, altered, expired, for another target) in a stream of its own
target, ``fleet:exec:{target}:refusals`` (bounded), and the workers' maintenance moves each entry
into the audit stream as ``runner_refused``, naming the target whose runner reported it. What the
entry says came from whoever wrote the job: it is cut here and redacted by the audit, and a runner
can write only about its own target.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import redis

from agent.redis_util import as_text_dict
from bot.keys import Keys

log = logging.getLogger(__name__)
_KEPT = 1000  # per target: a flood of forged jobs cannot grow Redis without bound
_FIELD_CHARS = 200
_BATCH = 100


@dataclass(frozen=True)
class Refusal:
    target: str
    fields: dict[str, str]


def record_refusal(client: redis.Redis, keys: Keys, target: str, **fields: object) -> None:
    """Keep one refused job (best effort: the runner's log has it too)."""
    entry = {name: str(value)[:_FIELD_CHARS] for name, value in fields.items() if value is not None}
    try:
        client.xadd(keys.runner_refusals(target), entry, maxlen=_KEPT, approximate=True)  # type: ignore[arg-type]
    except redis.RedisError:
        log.exception("could not record the refusal in Redis (it is in this log)")


def drain_refusals(client: redis.Redis, keys: Keys, targets: list[str]) -> Iterator[Refusal]:
    """Each refusal recorded for ``targets``, once: an entry is yielded only by the worker whose
    ``XDEL`` removed it, so two workers draining at once never report one twice."""
    for target in targets:
        key = keys.runner_refusals(target)
        for entry_id, raw in client.xrange(key, count=_BATCH) or []:
            if entry_id is not None and client.xdel(key, entry_id) == 1:
                yield Refusal(target, as_text_dict(raw))
