"""``AfterAnswerPools``: the web app's pools for the halves of its listeners that run after the
answer (``bot.slack.handlers.app.build_app``'s ``pools``), which tell when all that work is done.

A test that must show that a request changed nothing in Slack waits for ``idle()`` rather than
sleeping: the work is handed to a pool before the answer, so once every answer is in and the pools
are idle, anything the requests were going to do has been done.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from bot.slack.handlers.app import LAZY_THREADS

P = ParamSpec("P")
T = TypeVar("T")


class _CountingPool(ThreadPoolExecutor):
    def __init__(self, name: str, pools: AfterAnswerPools) -> None:
        super().__init__(LAZY_THREADS, thread_name_prefix=name)
        self._pools = pools

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        future = super().submit(fn, *args, **kwargs)
        self._pools.track(future)
        return future


class AfterAnswerPools:
    """A ``PoolFactory`` whose pools count what was handed to them and is not finished yet."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._unfinished: set[Future[Any]] = set()

    def __call__(self, name: str) -> Executor:
        return _CountingPool(name, self)

    def track(self, future: Future[Any]) -> None:
        with self._lock:
            self._unfinished.add(future)
        future.add_done_callback(self._finished)

    def _finished(self, future: Future[Any]) -> None:
        with self._lock:
            self._unfinished.discard(future)

    def idle(self) -> bool:
        """Nothing handed to these pools is queued or running."""
        with self._lock:
            return not self._unfinished
