"""Generic Redis helpers, for any record's owner: they know no key and no field of chatops."""

from __future__ import annotations

from collections.abc import Mapping

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
