"""A TCP proxy between a client and a real server that can drop or hold the server's answers.

``drop_next_answer()`` makes the proxy close the client's connection as soon as the server starts
answering, after the request has reached the server: the request is applied, its answer is lost,
exactly as when a connection breaks at the wrong moment.

``hold_answer_to(marker)`` lets the first request that contains ``marker`` reach the server, then
holds every answer on that connection until ``release()``: the request has been applied, and the
client waits, as a process descheduled right after its command would. A test makes another
client act in that gap, so a race that needs a busy machine happens every time.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress


class TcpProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._drop = threading.Event()
        self.dropped = threading.Event()
        self._hold_marker: bytes | None = None
        self._holding: socket.socket | None = None  # the client whose answers are held
        self._released = threading.Event()
        self.held = threading.Event()
        self._closed = False
        threading.Thread(target=self._accept, name="tcp-proxy", daemon=True).start()

    def drop_next_answer(self) -> None:
        self.dropped.clear()
        self._drop.set()

    def hold_answer_to(self, marker: bytes) -> None:
        self._holding = None  # an earlier hold's connection answers freely again
        self.held.clear()
        self._released.clear()
        self._hold_marker = marker

    def release(self) -> None:
        self._hold_marker = None
        self._released.set()

    def close(self) -> None:
        self._closed = True
        self._released.set()
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._upstream)
            threading.Thread(target=self._pipe, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, True), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, answers: bool) -> None:
        try:
            while data := source.recv(65536):
                if answers and self._drop.is_set():
                    self._drop.clear()
                    self.dropped.set()
                    break
                if not answers and self._hold_marker is not None and self._hold_marker in data:
                    self._hold_marker = None
                    self._holding = source  # set before the request goes on: its answer comes after
                    self.held.set()
                if answers and sink is self._holding:
                    self._released.wait()
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@contextmanager
def tcp_proxy(host: str, port: int) -> Iterator[TcpProxy]:
    proxy = TcpProxy(host, port)
    try:
        yield proxy
    finally:
        proxy.close()
