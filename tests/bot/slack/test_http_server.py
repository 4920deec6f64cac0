"""``bot.web.http_server``: HTTP/1.1 as clients speak it, on a real socket, with a small WSGI app.

The server runs on an event loop in a thread of the test (the real-process tests are
``test_web_process.py`` and ``tests/reliability/test_slow_clients.py``); the app echoes what it
was given, so each test reads back exactly what a WSGI app would see.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from bot.web import prefork
from bot.web.http_server import HttpServer, Limits

App = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def echo(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    if environ["PATH_INFO"] == "/fail":
        raise RuntimeError("the app broke")
    if environ["PATH_INFO"] == "/wait":
        release.wait(10)
    body = environ["wsgi.input"].read()
    seen = {
        "method": environ["REQUEST_METHOD"],
        "path": environ["PATH_INFO"],
        "query": environ["QUERY_STRING"],
        "length": environ["CONTENT_LENGTH"],
        "body": body.decode(),
        "headers": sorted(k for k in environ if k.startswith("HTTP_X_")),
    }
    answer = json.dumps(seen).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "999")])
    return [answer]


release = threading.Event()


@contextmanager
def serving(app: App = echo, **limits: Any) -> Iterator[tuple[int, Callable[[], None]]]:
    """The server on 127.0.0.1 (port 0); yields its port and a function that starts its drain."""
    sock = prefork.listen("127.0.0.1", 0)
    loop = asyncio.new_event_loop()
    stopping = asyncio.Event()
    server = HttpServer(app, Limits(**{"graceful_timeout": 5.0, **limits}), threads=2)
    thread = threading.Thread(target=loop.run_until_complete, args=(server.serve(sock, stopping),))
    thread.start()

    def stop() -> None:
        loop.call_soon_threadsafe(stopping.set)

    try:
        yield sock.getsockname()[1], stop
    finally:
        stop()
        release.set()
        thread.join(30)
        loop.close()
        sock.close()


def exchange(port: int, data: bytes, answers: int = 1) -> list[tuple[str, dict[str, str], bytes]]:
    """Send ``data`` on one connection; read ``answers`` responses (status line, headers, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        reader = sock.makefile("rb")
        found = []
        for _ in range(answers):
            status = reader.readline().decode().strip()
            headers: dict[str, str] = {}
            while (line := reader.readline().decode().strip()) != "":
                name, _, value = line.partition(":")
                headers[name.lower()] = value.strip()
            found.append((status, headers, reader.read(int(headers.get("content-length", "0")))))
        return found


def test_keep_alive_and_pipelining_answer_each_request_in_order_with_the_servers_own_length() -> None:
    with serving() as (port, _):
        one = b"GET /a?x=1 HTTP/1.1\r\nHost: h\r\n\r\n"
        two = b"POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"
        answers = exchange(port, one + two, answers=2)
    assert [a[0] for a in answers] == ["HTTP/1.1 200 OK"] * 2
    first, second = (json.loads(a[2]) for a in answers)
    assert (first["path"], first["query"], second["body"], second["length"]) == ("/a", "x=1", "hello", "5")
    assert answers[1][1]["content-length"] == str(len(answers[1][2]))  # not the app's wrong 999


def test_a_chunked_body_reaches_the_app_whole_with_its_length() -> None:
    with serving() as (port, _):
        request = b"POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
        [(status, _, body)] = exchange(port, request)
    assert status == "HTTP/1.1 200 OK" and json.loads(body)["body"] == "abcde"
    assert json.loads(body)["length"] == "5"


def test_a_chunked_body_over_the_limit_is_refused_with_413() -> None:
    with serving(max_body_bytes=10) as (port, _):
        request = (
            b"POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nb\r\nabcdefghijk\r\n0\r\n\r\n"
        )
        [(status, headers, _)] = exchange(port, request)
    assert status.startswith("HTTP/1.1 413 ") and headers["connection"] == "close"


def test_expect_100_continue_is_answered_before_the_body_and_refused_when_too_big() -> None:
    with serving(max_body_bytes=10) as (port, _):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"POST /e HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
            assert sock.recv(100).startswith(b"HTTP/1.1 100 ")
            sock.sendall(b"data")
            assert b'"body": "data"' in sock.recv(4096)
        too_big = b"POST /e HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\nExpect: 100-continue\r\n\r\n"
        [(status, _, _)] = exchange(port, too_big)
    assert status.startswith("HTTP/1.1 413 ")


def test_head_gets_headers_only_and_http_1_0_is_closed_after_its_answer() -> None:
    with serving() as (port, _), socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"HEAD /h HTTP/1.1\r\nHost: h\r\n\r\nGET /g HTTP/1.0\r\n\r\n")
        received = b""
        while chunk := sock.recv(4096):  # the server closes after the HTTP/1.0 answer
            received += chunk
    head, _, rest = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and rest.startswith(b"HTTP/1.1 200 ")  # no body after HEAD
    assert b'"path": "/g"' in rest


def test_a_header_with_an_underscore_is_dropped_so_it_cannot_shadow_another() -> None:
    with serving() as (port, _):
        request = b"GET / HTTP/1.1\r\nHost: h\r\nX-Slack-Signature: real\r\nX-Slack_Signature: forged\r\n\r\n"
        [(_, _, body)] = exchange(port, request)
    assert json.loads(body)["headers"] == ["HTTP_X_SLACK_SIGNATURE"]


def test_garbage_gets_400_and_an_app_failure_gets_500_and_the_server_serves_on() -> None:
    with serving() as (port, _):
        [(garbage, _, _)] = exchange(port, b"NOT HTTP AT ALL\r\n\r\n")
        [(failed, _, _)] = exchange(port, b"GET /fail HTTP/1.1\r\nHost: h\r\n\r\n")
        [(ok, _, _)] = exchange(port, b"GET /ok HTTP/1.1\r\nHost: h\r\n\r\n")
    assert (
        garbage.startswith("HTTP/1.1 400 ") and failed.startswith("HTTP/1.1 500 ") and ok.endswith("200 OK")
    )


def test_a_request_in_the_app_when_the_drain_starts_is_answered_then_closed() -> None:
    release.clear()
    with serving() as (port, stop), socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /wait HTTP/1.1\r\nHost: h\r\n\r\n")
        with socket.create_connection(("127.0.0.1", port), timeout=10) as idle:
            idle.sendall(b"GET /first HTTP/1.1\r\nHost: h\r\n\r\n")
            assert idle.recv(4096).startswith(b"HTTP/1.1 200 ")  # now idle, kept alive
            stop()
            assert idle.recv(10) == b""  # an idle connection is closed at once by the drain
        release.set()
        received = b""
        while chunk := sock.recv(4096):
            received += chunk
    assert received.startswith(b"HTTP/1.1 200 ") and b"connection: close" in received.lower()
