"""db-01 is healthy until the alert button starts its incident (``emulator.demo.incident``), and the
demo's Prometheus (``emulator.demo.prometheus``) tells the same story as the host's own commands,
in the real API's shape, read by the real ``prometheus_range`` tool."""

from __future__ import annotations

import json
import math
import re
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emulator.demo.alert import AlertButton
from emulator.demo.env import bot_env, runner_env
from emulator.demo.host import DemoHost, build_host
from emulator.demo.incident import POSTGRES_LOG, Incident, incident_lines, statement_line
from emulator.demo.prometheus import PrometheusAPI
from emulator.demo.system import HostSystem
from tests.emulator.slack.receiver import Receiver
from tests.support.observability import build_tools, call, start_prometheus
from tests.support.waiting import wait_for, wait_until

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def run(host: DemoHost, *argv: str) -> str:
    done = subprocess.run(
        [str(host.bin_dir / argv[0]), *argv[1:]], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def load1(host: DemoHost) -> float:
    return float(re.findall(r"load average: ([0-9.]+),", run(host, "uptime"))[0])


@pytest.fixture
def db(tmp_path: Path) -> DemoHost:
    return build_host(tmp_path / "hosts" / "db-01", tmp_path / "bin" / "db-01", name="db-01")


@pytest.fixture
def incident(db: DemoHost) -> Iterator[Incident]:
    started = Incident(db.root, interval=0.05)
    yield started
    started.stop()


def get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with _OPENER.open(url, timeout=10) as answer:
            return int(answer.status), json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def query_range(url: str, query: str, start: float, end: float, step: str) -> tuple[int, dict[str, Any]]:
    """``/api/v1/query_range`` of the Prometheus at ``url``, as the tool asks it."""
    params = urllib.parse.urlencode(
        {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": step}
    )
    return get(f"{url}/api/v1/query_range?{params}")


def memory_used(host: DemoHost) -> str:
    return str(re.findall(r"Mem: +32G +(\S+)", run(host, "free", "-h"))[0])


# -- the incident ----------------------------------------------------------------------------------


def test_the_incident_lines_come_when_their_time_has_come_once_each() -> None:
    started = 1_000_000.0
    whole = incident_lines(started, started, started + 130)
    pieces = [
        line
        for a, b in [(0, 7), (7, 7.5), (7.5, 61), (61, 130)]
        for line in incident_lines(started, started + a, started + b)
    ]
    assert pieces == whole  # consecutive windows: no line twice, none lost
    assert incident_lines(started, started, started + 0.9) == []  # nothing ahead of its time
    stamps = [line[:19] for line in whole]
    assert stamps == sorted(stamps)
    assert sum("FATAL:  remaining connection slots" in line for line in whole) == 26  # every 5 s from +2.5 s
    assert sum("temporary file" in line for line in whole) == 2  # every minute from +15 s


def test_db_01_is_healthy_until_its_incident_starts_and_a_restart_ends_it(
    db: DemoHost, incident: Incident
) -> None:
    log = db.root / POSTGRES_LOG
    assert "31877" not in run(db, "ps", "--sort=-pcpu") and load1(db) < 1
    assert memory_used(db) == "20G"

    healthy = log.read_text()
    assert incident.start()
    started = HostSystem(db.root).incident_started()
    assert started is not None
    assert log.read_text()[len(healthy) :].splitlines()[0] == statement_line(started)  # appended, at once
    ps = run(db, "ps", "--sort=-pcpu", "--lines=3").splitlines()
    assert "31877 postgres" in ps[1] and "reporting orders" in ps[1] and "SELECT waiting" in ps[2]
    assert load1(db) > 10 and memory_used(db) == "27G"
    assert not incident.start()  # a second press: the same incident, still running

    # Its consequences reach the live log as they happen, never dated after the moment they are read.
    def refused() -> str | None:
        text = log.read_text()
        return text if "FATAL:  remaining connection slots" in text else None

    text = wait_for(refused, 30, "a refused connection in db-01's log")
    newest = text.splitlines()[-1][:19]
    assert newest <= time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())

    # A restart of postgresql ends every backend, the report's too: healthy again, the writer stops.
    time.sleep(1.1)  # systemd's timestamps have seconds: the restart must come after the start's second
    subprocess.run([str(db.bin_dir / "systemctl"), "restart", "postgresql"], check=True)
    assert "31877" not in run(db, "ps", "--sort=-pcpu") and load1(db) < 1
    wait_until(lambda: not incident.writing, 30, "the incident's log writer to stop")
    assert incident.start()  # the button can start a new one


def test_the_alert_button_starts_the_incident_before_it_sends_the_alert(
    db: DemoHost, incident: Incident
) -> None:
    receiver = Receiver()
    seen: list[int] = []

    def start() -> bool:
        seen.append(len(receiver.requests))
        return incident.start()

    try:
        button = AlertButton(receiver.url, "tok3n", start_incident=start)
        said = button.press("U_ALICE")
        assert said.startswith(
            "Incident started on db-01 (its report query): alert #1 (PostgresHighLoad on db-01)"
        )
        assert button.press("U_BOB").startswith("db-01's incident runs: alert #2")
        receiver.wait_for(2)
    finally:
        receiver.close()
    assert seen == [0, 1]  # the fault first, then the alert about it
    assert HostSystem(db.root).busy()


# -- the demo's Prometheus -------------------------------------------------------------------------


@pytest.fixture
def api(db: DemoHost, tmp_path: Path) -> Iterator[PrometheusAPI]:
    web = build_host(tmp_path / "hosts" / "web-03", tmp_path / "bin" / "web-03", name="web-03")
    with PrometheusAPI([web.root, db.root]) as server:
        yield server


def test_query_range_answers_in_prometheus_shape_and_follows_the_incident(
    api: PrometheusAPI, db: DemoHost, incident: Incident
) -> None:
    before = time.time()
    status, body = query_range(api.url, 'node_load1{instance="db-01:9100"}', before - 600, before, "30s")
    assert status == 200 and body["status"] == "success" and body["data"]["resultType"] == "matrix"
    [series] = body["data"]["result"]
    assert series["metric"] == {"__name__": "node_load1", "instance": "db-01:9100", "job": "node"}
    assert len(series["values"]) == 21  # start, every 30 s, and end itself
    assert all(isinstance(t, float) and isinstance(v, str) and float(v) < 1 for t, v in series["values"])
    assert series["values"][-1][0] == round(before, 3)

    incident.start()
    # The query's end as the API reads it (milliseconds, ``query_range``'s format) not before the
    # start: rounded to the nearest, a time taken microseconds after the start could fall before it.
    now = math.ceil(time.time() * 1000) / 1000 + 0.001
    _, body = query_range(api.url, 'node_load1{instance="db-01:9100"}', now - 600, now, "30")
    values = [float(v) for _, v in body["data"]["result"][0]["values"]]
    assert values[-1] > 10 and max(values[:-1]) < 1  # low for ten minutes, high from the start on
    assert abs(values[-1] - load1(db)) < 1.5  # uptime tells the same story (give or take its noise)


def test_selectors_instant_queries_and_posts(api: PrometheusAPI) -> None:
    status, body = get(f"{api.url}/api/v1/query?query=up")
    assert status == 200 and body["data"]["resultType"] == "vector"
    assert [(r["metric"]["instance"], r["value"][1]) for r in body["data"]["result"]] == [
        ("db-01:9100", "1"),
        ("web-03:9100", "1"),
    ]
    _, body = get(
        f"{api.url}/api/v1/query?" + urllib.parse.urlencode({"query": '{__name__=~"node_load1[05]"}'})
    )
    assert sorted(r["metric"]["__name__"] for r in body["data"]["result"]) == ["node_load15"] * 2
    form = urllib.parse.urlencode(
        {"query": "node_load5{job='node', instance!~`db.*`}", "time": "1e9"}
    ).encode()
    with _OPENER.open(urllib.request.Request(f"{api.url}/api/v1/query", data=form), timeout=10) as answer:
        posted = json.loads(answer.read())
    assert posted["data"]["result"] == []  # 2001: the host had not booted, no sample then
    now = time.time()
    form = urllib.parse.urlencode(
        {"query": "node_load5{job='node', instance!~`db.*`}", "time": str(now)}
    ).encode()
    with _OPENER.open(urllib.request.Request(f"{api.url}/api/v1/query", data=form), timeout=10) as answer:
        [web] = json.loads(answer.read())["data"]["result"]
    assert web["metric"]["instance"] == "web-03:9100" and float(web["value"][1]) > 5


@pytest.mark.parametrize(
    ("query", "step", "error"),
    [
        ("rate(node_load1[5m])", "30", "the demo's Prometheus evaluates series selectors only"),
        ("node_load1 > 5", "30", "series selectors only"),
        ('{job=~".*"}', "30", "vector selector must contain at least one non-empty matcher"),
        ('up{job="node" x}', "30", "parse error: unexpected"),
        ('up{job=~"("}', "30", "parse error: invalid regular expression"),
        ("up", "0", "zero or negative query resolution step widths are not accepted"),
        ("up", "1ms", "exceeded maximum resolution of 11,000 points per timeseries"),
        ("up", "soon", 'invalid parameter "step"'),
    ],
)
def test_what_prometheus_would_refuse_is_a_bad_data_error(
    api: PrometheusAPI, query: str, step: str, error: str
) -> None:
    now = time.time()
    status, body = query_range(api.url, query, now - 3600, now, step)
    assert status == 400 and body["status"] == "error" and body["errorType"] == "bad_data"
    assert error in body["error"]


def test_the_real_prometheus_range_tool_reads_the_demos_prometheus(api: PrometheusAPI) -> None:
    tools = build_tools(prometheus_url=api.url)  # an egress policy that allows nothing but that URL
    output = call(tools["prometheus_range"], query='node_load1{instance="db-01:9100"}', minutes=60)
    assert output.startswith("1 series (last 60 min, step 30s; highest last value first):\n")
    # db-01 before its incident: noise around its idle level (0.58, +-6%). Whether an hour of that
    # noise reads "flat" depends on which hour (its first third against its last, by this
    # machine's clock: one run read 0.583 -> 0.577, "falling"), so the level is what is judged:
    # every value in the idle band, far below the incident's 11.6 (trend() has its own tests).
    found = re.search(
        r'node_load1\{instance="db-01:9100", job="node"\}: min (\d+\.\d+) avg \d+\.\d+ max (\d+\.\d+) '
        r"last \d+\.\d+, (?:flat|rising|falling) \(first third",
        output,
    )
    assert found is not None, output
    assert float(found.group(1)) >= 0.5 and float(found.group(2)) <= 0.65, output
    assert "121 points" in output


def test_the_answers_have_the_shape_of_debians_prometheus(api: PrometheusAPI, tmp_path: Path) -> None:
    """The same queries to Debian's Prometheus (skipped where it is not installed): same keys, same
    types, same error kind."""
    with start_prometheus(tmp_path / "prometheus") as real:
        now = time.time()
        answers = [query_range(url, "up", now - 60, now, "15") for url in (real.url, api.url)]
        refusals = [query_range(url, "up", now - 60, now, "0") for url in (real.url, api.url)]
    (real_status, real_body), (own_status, own_body) = answers
    assert real_status == own_status == 200
    assert shape(real_body) == shape(own_body)
    assert [(status, body["status"], body["errorType"]) for status, body in refusals] == [
        (400, "error", "bad_data")
    ] * 2


def shape(value: Any) -> Any:
    """The keys and types of a JSON value (the first item of a list stands for all)."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items() if key != "metric"}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def test_the_bot_gets_the_demos_prometheus_and_the_runners_do_not(db: DemoHost) -> None:
    common = {"PATH": "/usr/bin", "CHATOPS_RUNNER_SECRET": "s"}
    bot = bot_env(
        common,
        bot_token="t",
        signing_secret="s",
        slack_api_url="http://x",
        llm={},
        prometheus_url="http://127.0.0.1:9",
    )
    assert bot["CHATOPS_PROMETHEUS_URL"] == "http://127.0.0.1:9"
    assert "CHATOPS_PROMETHEUS_URL" not in runner_env(common, db)
