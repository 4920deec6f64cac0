"""A lean open-loop HTTP/1.1 load generator: pre-built requests, keep-alive connections, one asyncio loop.

Request ``i`` is due at ``start + i / rate`` whatever happened to earlier ones (open loop), and its
latency is counted from that due time to the last byte of the answer, so a slow server cannot hide
its queueing by slowing the generator down (no coordinated omission). Idle keep-alive connections
are reused; a new one is opened (up to ``max_connections``) when all are busy.

``run_streams`` sends several such streams at once on the same connections (an alert webhook
stream and a Slack event stream, each at its own rate): they are merged by due time into one
schedule, and the outcomes are handed back per stream.

The generator's own garbage collector is held off while it sends (``_no_collector_pauses``): its
heap (every request built beforehand, every outcome so far) grows through the run, and Python's
full collections of it paused the loop for 100-150 ms, every request due meanwhile going out late
and counted as the server's latency (seen in ``bench.alerts``, 2026-12-01). Like ``timeit``, the
measuring side does not collect while it measures; the server does, as in production.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Outcome:
    index: int  # the request's position in the list sent
    due: float  # seconds after the start
    latency: float  # seconds from due time to the whole answer
    status: int  # HTTP status, 0 for a transport error
    error: str = ""
    retried: bool = False  # sent again after a stale keep-alive connection failed


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.used = False

    async def exchange(self, request: bytes) -> tuple[int, bool]:
        """Send one request, read its answer; returns the status and whether to keep the connection."""
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length = 0
        keep = True
        chunked = False
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value.strip())
            elif name == "connection" and value.strip().lower() == "close":
                keep = False
            elif name == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
        if chunked:
            await self._read_chunks()
        elif length:
            await self.reader.readexactly(length)
        return status, keep

    async def _read_chunks(self) -> None:
        """A ``Transfer-Encoding: chunked`` body, to its last (empty) chunk and trailer."""
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (await self.reader.readuntil(b"\r\n")) != b"\r\n":
                    pass  # trailer fields, up to the empty line
                return
            await self.reader.readexactly(size + 2)  # the chunk and its CRLF

    def close(self) -> None:
        self.writer.close()


async def _run(
    host: str,
    port: int,
    requests: Sequence[bytes],
    offsets: Sequence[float],
    max_connections: int,
    timeout: float,
) -> list[Outcome]:
    """Send ``requests[i]`` at ``offsets[i]`` seconds after the start (``offsets`` ascending)."""
    idle: asyncio.LifoQueue[_Connection] = asyncio.LifoQueue()
    opened = 0
    outcomes: list[Outcome] = []
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.05

    async def acquire(fresh: bool = False) -> _Connection:
        nonlocal opened
        if not idle.empty() and not fresh:
            return idle.get_nowait()
        if opened < max_connections or fresh:
            opened += 1
            try:
                reader, writer = await asyncio.open_connection(host, port)
            except OSError:
                opened -= 1
                raise
            return _Connection(reader, writer)
        return await idle.get()  # every connection is busy: wait for one

    async def one(index: int, request: bytes, due: float) -> None:
        nonlocal opened
        retried = False
        while True:
            connection: _Connection | None = None
            reused = False
            try:
                connection = await acquire(fresh=retried)
                reused, connection.used = connection.used, True
                status, keep = await asyncio.wait_for(connection.exchange(request), timeout)
                outcomes.append(Outcome(index, due - start, loop.time() - due, status, retried=retried))
                if keep:
                    idle.put_nowait(connection)
                else:
                    connection.close()
                    opened -= 1
                return
            except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError) as error:
                if connection is not None:
                    connection.close()
                    opened -= 1
                stale = reused and isinstance(error, ConnectionError | asyncio.IncompleteReadError)
                if stale and not retried:
                    # The server closed an idle keep-alive connection as we reused it: like any HTTP
                    # client, send again on a new one (Slack would retry the event anyway).
                    retried = True
                    continue
                outcomes.append(
                    Outcome(index, due - start, loop.time() - due, 0, type(error).__name__, retried)
                )
                return

    tasks = []
    for index, request in enumerate(requests):
        due = start + offsets[index]
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(index, request, due)))
    await asyncio.gather(*tasks)
    while not idle.empty():
        idle.get_nowait().close()
    return outcomes


@contextlib.contextmanager
def _no_collector_pauses() -> Iterator[None]:
    """Collect once, freeze what is there (never scanned again), and collect nothing while sending."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()


def run(
    host: str,
    port: int,
    requests: Sequence[bytes],
    rate: float,
    *,
    max_connections: int = 64,
    timeout: float = 10.0,
) -> list[Outcome]:
    """Send ``requests`` at ``rate`` per second; one ``Outcome`` per request (in completion order)."""
    offsets = [index / rate for index in range(len(requests))]
    with _no_collector_pauses():
        return asyncio.run(_run(host, port, requests, offsets, max_connections, timeout))


def run_streams(
    host: str,
    port: int,
    streams: Sequence[tuple[Sequence[bytes], float]],
    *,
    max_connections: int = 64,
    timeout: float = 10.0,
) -> list[list[Outcome]]:
    """Send each ``(requests, rate)`` stream at its own rate, all at once; per stream, one
    ``Outcome`` per request, its ``index`` the request's position in that stream."""
    schedule = sorted(
        (index / rate, number, index)
        for number, (requests, rate) in enumerate(streams)
        for index in range(len(requests))
    )
    merged = [streams[number][0][index] for _, number, index in schedule]
    offsets = [offset for offset, _, _ in schedule]
    with _no_collector_pauses():
        outcomes = asyncio.run(_run(host, port, merged, offsets, max_connections, timeout))
    split: list[list[Outcome]] = [[] for _ in streams]
    for outcome in outcomes:
        _, number, index = schedule[outcome.index]
        split[number].append(replace(outcome, index=index))
    return split


def post(host: str, port: int, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    """One HTTP/1.1 POST request with keep-alive, as bytes."""
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def now() -> float:
    return time.time()
