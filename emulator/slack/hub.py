"""Fan-out of change notices to server-sent-event subscribers (the web page)."""

from __future__ import annotations

import queue
import threading
from typing import Any

Notice = dict[str, Any]


class Hub:
    """Each subscriber gets its own queue; ``None`` in a queue means the server is closing."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: list[queue.Queue[Notice | None]] = []
        self._closed = False

    def publish(self, notice: Notice) -> None:
        """Send ``notice`` to every subscriber; never blocks."""
        with self._lock:
            for q in self._queues:
                q.put_nowait(notice)

    def subscribe(self) -> queue.Queue[Notice | None]:
        """A new subscriber's queue (already closed if the hub is)."""
        q: queue.Queue[Notice | None] = queue.Queue()
        with self._lock:
            if self._closed:
                q.put_nowait(None)
            else:
                self._queues.append(q)
        return q

    def unsubscribe(self, q: queue.Queue[Notice | None]) -> None:
        """Forget a subscriber."""
        with self._lock:
            if q in self._queues:
                self._queues.remove(q)

    def close(self) -> None:
        """Wake every subscriber so its stream can end."""
        with self._lock:
            self._closed = True
            for q in self._queues:
                q.put_nowait(None)
            self._queues.clear()
