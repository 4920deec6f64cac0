"""Slow-loris against the real ``chatops web``: slow clients hold sockets, never the app's threads.

Every test starts ``chatops web`` as deployed (a subprocess, its own port on 127.0.0.1) and talks
to it over real sockets. With 200 slow connections open (half trickling a request head a byte a
second, half trickling a declared body) ``/healthz`` answers and a mention the Slack emulator
delivers is acknowledged at its first delivery (not retried) and stored. The emulator waits 20 s for
the acknowledgement here, not Slack's 3 s: an app whose threads the slow clients held could answer
only once their 30 s deadlines freed them, and a slow machine is not mistaken for that. A connection that stalls
mid-head or mid-body is closed after its timeout and nothing of it is stored; one that trickles
without ever stalling is cut by the same deadline (an inactivity timer never would cut it).
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from agent.redis_util import as_text
from bench.slow_clients import SlowClients
from bot.keys import Keys
from emulator.slack import SlackEmulator, SlackEmulatorClient, signature
from tests.bot.slack.web_process import Served, chatops_processes
from tests.support.slack_http import event_envelope, http
from tests.support.slack_workspace import BOT_USER, CHANNEL, SECRET, suite_workspace
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

Record = Callable[[str, object], None]  # pytest's ``record_property``: figures in --junitxml
SLOW = 200
# For the 200 slow clients: deadlines long enough that every one is still open while the real
# event arrives (what is shown is that they hold sockets, not threads); the stall tests use 1 s.
PATIENT = {"WEB_HEADER_TIMEOUT_SECONDS": "30", "WEB_BODY_TIMEOUT_SECONDS": "30"}
STRICT = {"WEB_HEADER_TIMEOUT_SECONDS": "1", "WEB_BODY_TIMEOUT_SECONDS": "1"}
ACK_SECONDS = 20.0  # the emulator's wait for an acknowledgement: less than PATIENT's deadlines


@pytest.fixture
def emulator() -> Iterator[SlackEmulator]:
    with SlackEmulator(suite_workspace(event_timeout=ACK_SECONDS)) as slack:
        yield slack


@pytest.fixture
def start_web(
    emulator: SlackEmulator, redis_url: str, key_prefix: str, queue_name: str, tmp_path: Path
) -> Iterator[Callable[..., Served]]:
    """``start_web(**env)``: ``chatops web`` alone (one worker process with two app threads: 200 slow
    clients are a hundred times its threads), stopped at the end; it must exit 0 on SIGTERM."""
    started: list[Served] = []
    with contextlib.ExitStack() as stack:

        def start(**env: str) -> Served:
            served = stack.enter_context(
                chatops_processes(
                    emulator,
                    redis_url,
                    key_prefix,
                    queue_name,
                    tmp_path,
                    names=("web",),
                    **{"WEB_WORKERS": "1", "WEB_THREADS": "2", **env},
                )
            )
            started.append(served)
            return served

        yield start
    for served in started:
        assert served.exit_codes.get("web") == 0, served.log("web")[-2000:]


def keys_of(served: Served) -> Keys:
    return Keys(served.env["CHATOPS_REDIS_PREFIX"])


def report(record: Record, name: str, **figures: Any) -> None:
    record(name, json.dumps(figures))
    print(f"\nRELIABILITY {name}: {json.dumps(figures)}")


def mention_body(ts: str, event_id: str) -> bytes:
    event = {
        "type": "app_mention",
        "user": "U_ALICE",
        "text": f"<@{BOT_USER}> is web-03 up?",
        "ts": ts,
        "channel": CHANNEL,
    }
    return json.dumps(event_envelope(event, event_id)).encode()


def signed_head(port: int, body: bytes) -> bytes:
    stamp = str(int(time.time()))
    return (
        f"POST /slack/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"X-Slack-Request-Timestamp: {stamp}\r\nX-Slack-Signature: {signature(SECRET, stamp, body)}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()


def delivered(control: SlackEmulatorClient, event_ids: list[str]) -> list[dict[str, Any]]:
    """The emulator's delivery attempts of these events, once each has been answered (or given up)."""

    def done() -> list[dict[str, Any]] | None:
        attempts = [d for d in control.deliveries(kind="event") if d["event_id"] in event_ids]
        return attempts if {d["event_id"] for d in attempts} == set(event_ids) else None

    return wait_for(done, timeout=60, what="the deliveries")


def closed_after(port: int, sent: bytes, wait: float = 60.0) -> tuple[bytes, float]:
    """Send ``sent`` and stall; returns what the server sent before closing (b"" for nothing) and when."""
    started = time.monotonic()  # before the connect: the server's clock for it starts later
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        sock.sendall(sent)
        received = b""
        while chunk := sock.recv(4096):  # b"" is the server's close; a socket timeout fails the test
            received += chunk
        return received, time.monotonic() - started


def test_two_hundred_slow_clients_do_not_starve_a_real_event(
    start_web: Callable[..., Served],
    control: SlackEmulatorClient,
    redis_client: redis.Redis,
    record_property: Record,
) -> None:
    served = start_web(**PATIENT)
    with SlowClients("127.0.0.1", served.port, interval=1.0, max_seconds=60) as slow:
        slow.start(headers=SLOW // 2, body=SLOW // 2)
        assert slow.open_now() == SLOW and slow.tally.refused == 0

        started = time.monotonic()
        assert http(f"{served.url}/healthz").status == 200
        health_ms = (time.monotonic() - started) * 1000

        posted = control.post_message(CHANNEL, "U_ALICE", f"<@{BOT_USER}> is web-03 up?")
        ts = str(posted["ts"])
        keys = keys_of(served)
        run_id = wait_for(
            lambda: as_text(redis_client.get(keys.slack("thread_last_run", CHANNEL, ts))),
            timeout=30,
            what="the mention's run",
        )
        assert redis_client.exists(keys.run(run_id))
        deliveries = delivered(control, posted["event_ids"])
        still_open = slow.open_now()
    # Acknowledged before the slow clients' deadlines could free a thread: every attempt a 200, none retried.
    assert [d["status"] for d in deliveries] == [200] * len(deliveries)
    assert all(d["retry_num"] == 0 for d in deliveries)
    assert still_open == SLOW  # the slow clients were all there the whole time
    report(
        record_property,
        "slow_clients",
        slow_connections=SLOW,
        app_threads=2,
        healthz_ms=round(health_ms, 1),
        event_ack_ms=[round(d["duration"] * 1000, 1) for d in deliveries],
        slow_still_open=still_open,
    )


def test_a_connection_stalled_mid_head_is_closed_after_the_header_timeout(
    start_web: Callable[..., Served], record_property: Record
) -> None:
    served = start_web(**STRICT)
    received, after = closed_after(served.port, b"POST /slack/events HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Sla")
    assert received == b"" and after >= 1.0
    nothing, idle_after = closed_after(served.port, b"")  # a connection that never sends a byte
    assert nothing == b"" and idle_after >= 1.0
    report(
        record_property,
        "stalled_head",
        closed_after_s=round(after, 2),
        silent_closed_after_s=round(idle_after, 2),
    )


def test_a_connection_stalled_mid_body_is_closed_after_the_body_timeout_and_stores_nothing(
    start_web: Callable[..., Served], redis_client: redis.Redis, record_property: Record
) -> None:
    served = start_web(**STRICT)
    ts, event_id = f"{time.time():.6f}", "EvStalledBody"
    body = mention_body(ts, event_id)
    received, after = closed_after(served.port, signed_head(served.port, body) + body[: len(body) // 2])
    assert received == b"" and after >= 1.0
    keys = keys_of(served)
    assert not redis_client.exists(keys.seen_event(event_id), keys.seen_message(CHANNEL, ts))
    assert redis_client.zcard(keys.active_runs()) == 0
    # The same request sent whole is taken: the half one was never handed to the app.
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        sock.sendall(signed_head(served.port, body) + body)
        assert sock.recv(4096).startswith(b"HTTP/1.1 200 ")
    assert redis_client.zcard(keys.active_runs()) == 1
    report(record_property, "stalled_body", closed_after_s=round(after, 2))


def test_a_client_trickling_its_head_without_stalling_is_cut_by_the_header_deadline(
    start_web: Callable[..., Served], record_property: Record
) -> None:
    served = start_web(**STRICT)
    with SlowClients("127.0.0.1", served.port, interval=0.1, max_seconds=15) as slow:
        slow.start(headers=5, body=5)  # a byte every 0.1 s: never idle, never complete within 1 s
        wait_for(lambda: len(slow.tally.closed_by_server) == 10 or None, timeout=60, what="the cuts")
    assert all(lifetime >= 1.0 for lifetime in slow.tally.closed_by_server)
    assert slow.tally.answered == []
    lifetimes = sorted(slow.tally.closed_by_server)
    report(record_property, "trickling", cut_after_s=[round(lifetimes[0], 2), round(lifetimes[-1], 2)])


def test_at_the_connection_limit_slow_clients_are_evicted_for_real_requests(
    start_web: Callable[..., Served], control: SlackEmulatorClient, redis_client: redis.Redis
) -> None:
    served = start_web(WEB_MAX_CONNECTIONS="50", **PATIENT)
    with SlowClients("127.0.0.1", served.port, interval=1.0, max_seconds=60) as slow:
        slow.start(headers=50, body=50)
        assert http(f"{served.url}/healthz").status == 200
        posted = control.post_message(CHANNEL, "U_ALICE", f"<@{BOT_USER}> is web-03 up?")
        keys = keys_of(served)
        wait_for(
            lambda: redis_client.get(keys.slack("thread_last_run", CHANNEL, str(posted["ts"]))),
            timeout=30,
            what="the run",
        )
        deliveries = delivered(control, posted["event_ids"])
        evicted = len(slow.tally.closed_by_server)
    assert [d["status"] for d in deliveries] == [200] * len(deliveries)
    assert all(d["retry_num"] == 0 for d in deliveries)
    assert evicted >= 50  # the slow ones made room; none of them was answered
    assert slow.tally.answered == []


def test_the_real_server_refuses_oversized_bodies_and_heads_before_reading_them(
    start_web: Callable[..., Served], redis_client: redis.Redis
) -> None:
    served = start_web()
    big = (
        f"POST /slack/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {50 * 1024 * 1024}\r\n\r\n{{"
    ).encode()
    received, _ = closed_after(served.port, big)
    assert received.startswith(b"HTTP/1.1 413 "), received[:100]
    huge_head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 40_000 + b"\r\n\r\n"
    received, _ = closed_after(served.port, huge_head)
    assert received.startswith(b"HTTP/1.1 431 "), received[:100]
    assert redis_client.zcard(keys_of(served).active_runs()) == 0
