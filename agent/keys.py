"""The Redis keys of a run's memory (``agent.redis_memory``), built from one configurable prefix.

Per run (``run_id`` is the caller's, for chatops a uuid hex):

* ``{p}run:{id}``            hash: the run's ``RunState`` (``RedisMemory`` writes only its own fields
  there; an application may keep its own record of the run in the same hash)
* ``{p}run:{id}:messages``   list: the history, one JSON ``Message`` per item, append-only
* ``{p}run:{id}:inbox``      list: messages waiting to be injected, moved to the history by ``RedisMemory``
* ``{p}run:{id}:lease``      string: the fencing token of the one writer allowed (``RedisMemory`` checks it)

These are all the keys the agent knows. An application extends ``MemoryKeys`` with its own
(chatops: ``bot.keys.Keys``), so one prefix separates deployments and tests sharing one Redis.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.errors import ConfigurationError

DEFAULT_PREFIX = "chatops:"
_SPACE = re.compile(r"\s")


def key_part(value: str, what: str) -> str:
    """A key component: non-empty and free of whitespace (Slack ids and our uuids always are)."""
    if not value or _SPACE.search(value):
        raise ConfigurationError(f"invalid {what} for a Redis key: {value!r}")
    return value


@dataclass(frozen=True)
class MemoryKeys:
    """Key builder of a run's memory. ``prefix`` separates deployments (and tests) sharing one Redis."""

    prefix: str = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        if not self.prefix:
            raise ConfigurationError("the Redis key prefix must not be empty")

    def run(self, run_id: str) -> str:
        return f"{self.prefix}run:{key_part(run_id, 'run id')}"

    def messages(self, run_id: str) -> str:
        return f"{self.run(run_id)}:messages"

    def inbox(self, run_id: str) -> str:
        return f"{self.run(run_id)}:inbox"

    def lease(self, run_id: str) -> str:
        return f"{self.run(run_id)}:lease"
