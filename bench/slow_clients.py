"""Slow-loris clients: many connections that send a request a byte at a time, for tests and benchmarks.

``SlowClients(host, port).start(headers=100, body=100)`` opens the connections on an asyncio loop
of its own (one thread, whatever their number): a *headers* client trickles its request head one
byte per ``interval``; a *body* client sends a whole head declaring a body, then trickles the body.
Each stops by itself after ``max_seconds``, when the server closes it (counted, with how long the
connection lived; with ``reconnect`` it connects again, as an attacker would), or at ``stop()``. Nothing here waits on the server beyond a byte's send.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import threading
import time
from dataclasses import dataclass, field

BODY_BYTES = 4096  # the declared body of a body client; it never sends all of it


def slow_head(host: str, port: int, path: str = "/slack/events", body_bytes: int = BODY_BYTES) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"X-Slack-Request-Timestamp: {int(time.time())}\r\nX-Slack-Signature: v0=00\r\n"
        f"Content-Length: {body_bytes}\r\n\r\n"
    ).encode()


@dataclass
class Tally:
    """What the slow connections came to (read under the lock, or after ``stop``)."""

    opened: int = 0
    refused: int = 0  # could not connect
    closed_by_server: list[float] = field(default_factory=list)  # each one's lifetime, seconds
    answered: list[bytes] = field(default_factory=list)  # a status line the server sent instead


class SlowClients:
    def __init__(
        self, host: str, port: int, interval: float = 1.0, max_seconds: float = 60.0, reconnect: bool = False
    ) -> None:
        self.host, self.port = host, port
        self.interval = interval
        self.max_seconds = max_seconds
        self.reconnect = reconnect  # an attacker's way: a connection that is cut is opened again
        self.tally = Tally()
        self.lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="slow-clients", daemon=True)
        self._stopping: asyncio.Event | None = None
        self._tasks: list[asyncio.Future[None]] = []

    def start(self, headers: int, body: int, timeout: float = 30.0) -> SlowClients:
        """Open ``headers`` + ``body`` connections; returns when every one is connected (or refused)."""
        self._thread.start()
        opened = asyncio.run_coroutine_threadsafe(self._open(headers, body), self._loop)
        opened.result(timeout)
        return self

    def open_now(self) -> int:
        """Connections still open (not closed by the server, not refused)."""
        with self.lock:
            return self.tally.opened - len(self.tally.closed_by_server) - len(self.tally.answered)

    def stop(self) -> Tally:
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)
        self._loop.close()
        return self.tally

    def __enter__(self) -> SlowClients:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    async def _open(self, headers: int, body: int) -> None:
        self._stopping = asyncio.Event()
        head = slow_head(self.host, self.port)
        ready: list[asyncio.Future[None]] = []
        for index in range(headers + body):
            connected = self._loop.create_future()
            trickle = head if index < headers else b"{" + b" " * (BODY_BYTES - 1)
            first = b"" if index < headers else head
            self._tasks.append(asyncio.ensure_future(self._client(first, trickle, connected)))
            ready.append(connected)
        await asyncio.gather(*ready)

    async def _client(self, first: bytes, trickle: bytes, connected: asyncio.Future[None]) -> None:
        """One slow client; with ``reconnect`` it opens a new connection each time one is cut."""
        assert self._stopping is not None
        deadline = time.monotonic() + self.max_seconds
        ready: asyncio.Future[None] | None = connected
        while await self._connection(first, trickle, ready, deadline) and self.reconnect:
            if self._stopping.is_set() or time.monotonic() > deadline:
                return
            ready = None

    async def _connection(
        self, first: bytes, trickle: bytes, connected: asyncio.Future[None] | None, deadline: float
    ) -> bool:
        """Trickle one request; True when the server closed the connection (or answered)."""
        assert self._stopping is not None
        born = time.monotonic()  # before the connect: a server's clock for it starts later
        try:
            reader, writer = await asyncio.open_connection(self.host, self.port)
        except OSError:
            with self.lock:
                self.tally.refused += 1
            if connected is not None:
                connected.set_result(None)
            return False
        with self.lock:
            self.tally.opened += 1
        if connected is not None:
            connected.set_result(None)
        outcome = asyncio.ensure_future(reader.read(200))
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            writer.write(first)
            for byte in trickle:
                if time.monotonic() > deadline or self._stopping.is_set():
                    return False
                writer.write(bytes([byte]))
                done, _ = await asyncio.wait(
                    [outcome, stopping], timeout=self.interval, return_when=asyncio.FIRST_COMPLETED
                )
                if outcome in done:
                    answer = b"" if outcome.exception() else outcome.result()
                    with self.lock:
                        if answer:
                            self.tally.answered.append(answer.split(b"\r\n")[0])
                        else:
                            self.tally.closed_by_server.append(time.monotonic() - born)
                    return True
            return False
        except OSError:  # reset by the server: closed too
            with self.lock:
                self.tally.closed_by_server.append(time.monotonic() - born)
            return True
        finally:
            outcome.cancel()
            stopping.cancel()
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.slow_clients --port P [--headers 100 --body 100 --seconds 30 --reconnect]``:
    the clients in a process of their own (a benchmark's generator must not share a GIL with them);
    prints the tally as JSON when done (after ``--seconds``, or at SIGTERM)."""
    parser = argparse.ArgumentParser(prog="python -m bench.slow_clients")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--headers", type=int, default=100)
    parser.add_argument("--body", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--reconnect", action="store_true")
    args = parser.parse_args(argv)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    slow = SlowClients(args.host, args.port, max_seconds=args.seconds, reconnect=args.reconnect)
    slow.start(args.headers, args.body)
    print(json.dumps({"ready": slow.open_now()}), flush=True)
    done.wait(args.seconds)
    open_at_end = slow.open_now()
    tally = slow.stop()
    lifetimes = sorted(tally.closed_by_server)
    print(
        json.dumps(
            {
                "opened": tally.opened,
                "open_at_end": open_at_end,
                "refused": tally.refused,
                "cut_by_server": len(lifetimes),
                "answered": len(tally.answered),
                "median_lifetime_s": round(lifetimes[len(lifetimes) // 2], 2) if lifetimes else None,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
