"""The alert benchmark's traffic: Alertmanager bodies the bot accepts and routes, a schedule that
behaves like Alertmanager, the expectations the checks hold it to, and two streams at once."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bench import loadgen
from bench.alert_traffic import MIN_INTERVAL, PATH, AlertPlan, expectations, plan
from bench.alerts import ALERTS_TOKEN, CHANNEL, ROUTES, STORM_RUNS
from bot.alerts.auth import bearer_ok
from bot.alerts.payloads import parse_alertmanager
from bot.alerts.routing import load_routes

RATE = 100.0


def split(request: bytes) -> tuple[str, dict[str, str], bytes]:
    head, _, body = request.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return lines[0], headers, body


@pytest.fixture(scope="module")
def storm() -> AlertPlan:
    return plan(8080, ALERTS_TOKEN, 3000, RATE, 200)


def test_every_notification_is_a_routed_authentic_alertmanager_body(storm: AlertPlan, tmp_path: Path) -> None:
    routes_file = tmp_path / "alerts.yaml"
    routes_file.write_text(ROUTES)
    routes = load_routes(routes_file)
    for request, delivery in zip(storm.requests[:300], storm.deliveries, strict=False):
        line, headers, body = split(request)
        assert line == f"POST {PATH} HTTP/1.1" and int(headers["Content-Length"]) == len(body)
        assert bearer_ok(headers["Authorization"], ALERTS_TOKEN)
        notification = parse_alertmanager(body)
        route = routes.route_for(notification)
        assert route is not None and route.channel == CHANNEL and route.investigate == "auto"
        assert route.storm.max_runs == STORM_RUNS
        assert notification.group_key == storm.groups[delivery.group].group_key
        assert tuple(a.fingerprint for a in notification.alerts) == delivery.fingerprints


def test_a_group_is_never_notified_more_often_than_its_interval(storm: AlertPlan) -> None:
    last: dict[int, float] = {}
    for index, delivery in enumerate(storm.deliveries):
        due = index / RATE
        if delivery.group in last:
            assert due - last[delivery.group] >= MIN_INTERVAL - 1e-9
        last[delivery.group] = due
    assert len(storm.groups) == 200  # all of them opened, and well before the end
    first: dict[int, int] = {}
    for index, delivery in enumerate(storm.deliveries):
        first.setdefault(delivery.group, index)
    assert max(first.values()) < 0.9 * len(storm.deliveries)


def test_groups_see_repeats_and_joins_and_keep_every_alert_sent(storm: AlertPlan) -> None:
    kinds: dict[str, int] = defaultdict(int)
    seen: dict[int, tuple[str, ...]] = {}
    for delivery in storm.deliveries:
        before = seen.get(delivery.group)
        if before is None:
            kinds["open"] += 1
        else:
            assert delivery.fingerprints[: len(before)] == before  # alerts join; none leaves
            kinds["join" if len(delivery.fingerprints) > len(before) else "repeat"] += 1
        seen[delivery.group] = delivery.fingerprints
    assert kinds["open"] == 200 and kinds["repeat"] > kinds["join"] > 500


def test_the_same_seed_sends_the_same_traffic() -> None:
    assert plan(1, "t", 500, RATE, 50).requests == plan(1, "t", 500, RATE, 50).requests


def test_expectations_count_only_what_was_accepted(storm: AlertPlan) -> None:
    everything = expectations(storm, set(range(len(storm.deliveries))))
    assert sum(e.notifications for e in everything.values()) == 3000 and len(everything) == 200
    group = storm.groups[storm.deliveries[0].group]
    opened = everything[group.group_key]
    assert set(opened.fingerprints) == {a["fingerprint"] for a in group.alerts}
    # Answered non-2xx, the group's first delivery never happened: the next one opens the group.
    own = [i for i, d in enumerate(storm.deliveries) if d.group == storm.deliveries[0].group]
    without_first = expectations(storm, set(range(len(storm.deliveries))) - {own[0]})
    assert without_first[group.group_key].notifications == opened.notifications - 1
    grew = len(storm.deliveries[own[1]].fingerprints) > len(storm.deliveries[own[0]].fingerprints)
    assert without_first[group.group_key].notes == opened.notes - (1 if grew else 0)
    assert expectations(storm, set()) == {}


class _Answers(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        status = 202 if self.path == "/b" else 200
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def server() -> Iterator[int]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(httpd.server_address[1])
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_two_streams_at_their_own_rates_come_back_apart(server: int) -> None:
    a = [loadgen.post("127.0.0.1", server, "/a", b"x" * n, {}) for n in range(20)]
    b = [loadgen.post("127.0.0.1", server, "/b", b"y", {}) for _ in range(60)]
    first, second = loadgen.run_streams("127.0.0.1", server, [(a, 100.0), (b, 300.0)])
    assert sorted(o.index for o in first) == list(range(20)) and {o.status for o in first} == {200}
    assert sorted(o.index for o in second) == list(range(60)) and {o.status for o in second} == {202}
    due = {o.index: o.due for o in second}
    assert due[59] - due[0] == pytest.approx(59 / 300.0, abs=1e-6)  # each stream keeps its own rate
