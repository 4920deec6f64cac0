"""Identifiers in Slack's shapes: message timestamps, event IDs, trigger IDs, view IDs."""

from __future__ import annotations

import secrets
import string
import threading
import time

_ALNUM = string.ascii_uppercase + string.digits


def random_id(prefix: str, length: int = 10) -> str:
    """An ID like Slack's (``Ev0ABC123XYZ``, ``V0ABC123XYZ``): a type prefix and uppercase alphanumerics."""
    return prefix + "".join(secrets.choice(_ALNUM) for _ in range(length))


class TsClock:
    """Message timestamps: ``"1700000000.000100"`` strings, unique and strictly increasing.

    Slack's ``ts`` is the post time in microseconds and doubles as the message ID, so two
    messages posted in the same microsecond still must not share one.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0

    def next(self) -> str:
        """The next timestamp: now, or one microsecond after the previous one if now is not later."""
        with self._lock:
            now = time.time_ns() // 1000
            self._last = max(now, self._last + 1)
            return format_ts(self._last)


def format_ts(micros: int) -> str:
    """Microseconds since the epoch as Slack's ``seconds.micros`` string."""
    return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"


def ts_key(ts: str) -> int:
    """A ``ts`` string as an integer for ordering; raises ValueError when it is not ``digits.digits``."""
    seconds, _, micros = ts.partition(".")
    if not seconds.isdigit() or not micros.isdigit() or len(micros) != 6:
        raise ValueError(f"not a Slack ts: {ts!r}")
    return int(seconds) * 1_000_000 + int(micros)


def new_trigger_id() -> str:
    """A trigger ID in Slack's ``digits.digits.hex`` form (e.g. ``12345.98765.abcd2358fdea``)."""
    return f"{time.time_ns() // 1000}.{secrets.randbelow(10**10):010d}.{secrets.token_hex(16)}"


def is_trigger_id(value: str) -> bool:
    """True when ``value`` has a trigger ID's form, whether or not we issued it."""
    parts = value.split(".")
    return len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit() and bool(parts[2])
