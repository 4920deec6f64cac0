"""Degenerate-stream detection: a model stuck emitting the same short pattern forever.

The last ``window`` bytes of the streamed text are checked: when a pattern of 1..``max_period``
bytes repeats across the whole window, the stream is degenerate and the loop cancels it.
"""

from __future__ import annotations


class RepetitionDetector:
    def __init__(self, window: int = 256, max_period: int = 20) -> None:
        self._window = window
        self._max_period = max_period
        self._tail = b""

    def feed(self, text: str) -> bool:
        """Add streamed text; True once the last ``window`` bytes are one repeated pattern."""
        self._tail = (self._tail + text.encode())[-self._window :]
        if len(self._tail) < self._window:
            return False
        return any(self._has_period(period) for period in range(1, self._max_period + 1))

    def _has_period(self, period: int) -> bool:
        tail = self._tail
        # The window is periodic with ``period`` when it equals itself shifted by ``period``.
        return tail[period:] == tail[:-period]
