"""The one bridge between the synchronous runtime and the asynchronous MCP SDK.

The agent loop, the tools and the worker are synchronous; the SDK is ``async``. Rather than an
event loop per call (a stdio server's session must outlive a call, and its anyio task groups must
be entered and left by the same task), one ``Bridge`` owns one event loop on one daemon thread,
and every coroutine of the MCP package runs there. Sync callers hand it a coroutine with a
timeout (``run``): on timeout the coroutine's task is cancelled (the SDK then tells the server
the request is cancelled) and ``TimeoutError`` is raised. Long-lived coroutines (a server's
session owner) are started with ``spawn``.

Nothing else in the project calls ``asyncio.run`` or ``run_coroutine_threadsafe`` for MCP.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from tools.mcp.spawning import SpawnGuardedLoop

T = TypeVar("T")


class Bridge:
    """An event loop on a daemon thread, started on first use; ``close`` stops it."""

    def __init__(self, name: str = "chatops-mcp") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        """The coroutine's result; ``TimeoutError`` (after cancelling it) past ``timeout`` seconds."""
        future = asyncio.run_coroutine_threadsafe(coro, self._running_loop())
        try:
            return future.result(timeout=max(0.0, timeout))
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer within {timeout:.1f} s") from None

    def spawn(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start a long-lived coroutine on the loop; its future says when and how it ended."""
        return asyncio.run_coroutine_threadsafe(coro, self._running_loop())

    def loop_call(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` on the loop's thread soon (to touch loop-bound objects such as events)."""
        self._running_loop().call_soon_threadsafe(callback)

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = SpawnGuardedLoop()  # a fork cannot stall its process starts (see spawning)
                ready = threading.Event()
                thread = threading.Thread(
                    target=self._serve, args=(loop, ready), name=self._name, daemon=True
                )
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
            return self._loop

    @staticmethod
    def _serve(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        try:
            loop.run_forever()
        finally:
            loop.close()

    def close(self, timeout: float = 5.0) -> None:
        """Cancel what still runs on the loop, stop it and wait for its thread."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return

        async def cancel_all() -> None:
            tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks, timeout=timeout) if tasks else None

        # A task that ignores cancellation must not keep the process from closing.
        with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
            asyncio.run_coroutine_threadsafe(cancel_all(), loop).result(timeout=timeout + 1)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
