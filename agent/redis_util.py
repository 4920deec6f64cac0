"""Generic Redis helpers, for any record's owner: they know no key and no field of chatops."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import redis


def as_text(value: bytes | str | None) -> str | None:
    """A Redis reply as ``str`` whatever ``decode_responses`` the client was built with."""
    if value is None or isinstance(value, str):
        return value
    return value.decode()


def as_text_dict(raw: Mapping[bytes | str, bytes | str] | None) -> dict[str, str]:
    """A hash reply (``HGETALL``, a stream entry) with text keys and values."""
    return {as_text(k) or "": as_text(v) or "" for k, v in (raw or {}).items()}


_HSET_IF_EXISTS = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
"""


def hset_if_exists(client: redis.Redis, key: str, fields: dict[str, str]) -> bool:
    """HSET on a hash that still exists (atomically): an expired record must not come back as a stray."""
    flat = [item for pair in fields.items() for item in pair]
    return bool(client.register_script(_HSET_IF_EXISTS)(keys=[key], args=flat))


# -- Redis's clock: what every host judges deadlines, expiries and heartbeats by ---------------------

# A Lua function ``now()``, Redis's time in seconds, to prepend to a script that judges time.
NOW_LUA = """
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end
"""


def time_reply(reply: Sequence[int]) -> float:
    """A ``TIME`` reply (seconds, microseconds), as from a pipeline, in seconds."""
    seconds, micros = reply
    return float(seconds) + micros / 1e6


def redis_now(client: redis.Redis) -> float:
    """Redis's time now, in seconds (one round trip)."""
    return time_reply(client.time())


def redis_clock(client: redis.Redis) -> Callable[[], float]:
    """A clock reading Redis's time: one clock for every host, whatever their own say."""
    return lambda: redis_now(client)
