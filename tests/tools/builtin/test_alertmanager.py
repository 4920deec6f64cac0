"""alertmanager_alerts and alertmanager_silence against Debian's real Alertmanager (one per module,
notifying nobody: tests/support/observability.py), alerts fired through its own API.

Each test fires alerts under an alertname of its own, so tests sharing the server never see
each other's alerts. The matcher grammar's hostile inputs are refused before any request.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agent.tooling import ToolCategory
from tests.support.observability import (
    NULL_RECEIVER_CONFIG,
    HostileHandler,
    HostileServer,
    Server,
    Tools,
    build_tools,
    call,
    failure,
    post_alerts,
    start_alertmanager,
)
from tests.support.waiting import wait_for
from tools.builtin.alertmanager_matchers import parse_matcher

APPROVER = "U_ONCALL"


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with start_alertmanager(tmp_path_factory.mktemp("alertmanager"), NULL_RECEIVER_CONFIG) as server:
        yield server


@pytest.fixture(scope="module")
def am(alertmanager: Server) -> Tools:
    return build_tools(alertmanager_url=alertmanager.url)


@pytest.fixture
def alertname() -> str:
    """A name no other test's alerts have: the module's Alertmanager is shared."""
    return f"Test{uuid.uuid4().hex[:10]}"


@pytest.fixture
def hostile() -> Iterator[HostileServer]:
    server = HostileServer()
    yield server
    server.close()


@pytest.fixture
def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fire(alertmanager: Server, alertname: str) -> None:
    post_alerts(
        alertmanager.url,
        [
            {
                "labels": {"alertname": alertname, "severity": "warning", "instance": "db-1:9100"},
                "annotations": {"summary": "Disk almost full"},
            },
            {
                "labels": {"alertname": alertname, "severity": "critical", "instance": "web-03:9100"},
                "annotations": {"summary": "Load is high"},
            },
        ],
    )


def test_posted_alerts_are_listed_most_severe_first(am: Tools, alertmanager: Server, alertname: str) -> None:
    fire(alertmanager, alertname)
    output = call(am["alertmanager_alerts"], filter=[f'alertname="{alertname}"'])
    lines = output.splitlines()
    assert lines[0] == "2 alerts (2 active), most severe first:"
    assert lines[1].startswith(f"[critical] {alertname} active since ")
    assert lines[1].endswith(' ago) {instance="web-03:9100"} summary: "Load is high"')
    assert lines[2].startswith(f"[warning] {alertname} active since ")
    assert ' ago) {instance="db-1:9100"} summary: "Disk almost full"' in lines[2]


def test_alert_filters_match_like_alertmanager(am: Tools, alertmanager: Server, alertname: str) -> None:
    fire(alertmanager, alertname)
    tool = am["alertmanager_alerts"]
    mine = f'alertname="{alertname}"'
    assert "web-03" in call(tool, filter=[mine, 'severity="critical"'])
    assert "db-1" not in call(tool, filter=[mine, 'severity="critical"'])
    assert call(tool, filter=[mine, "instance=~web-.*"]).startswith("1 alert (1 active)")
    assert call(tool, filter=[mine, 'instance!~"web-.*"']).splitlines()[1].startswith("[warning]")
    assert call(tool, filter=[mine, "severity!=critical"]).startswith("1 alert (1 active)")
    assert call(tool, filter=[mine, 'instance="nowhere"']).startswith("no alerts match")
    assert call(tool, filter=[mine], active=False).startswith("no alerts match")


@pytest.mark.parametrize(
    "matcher",
    [
        'alertname="a",severity="b"',  # two matchers in one
        "alertname=a}",
        "alertname==a",
        '"quoted"="name"',
        "alertname=$(rm -rf /)",
        "alertname=a;id",
        'alertname="unterminated',
        'alertname="raw\nnewline"',
        'alertname=~"(("',
        "alertname",
        "",
    ],
)
def test_malformed_matchers_are_refused_before_any_request(am: Tools, matcher: str) -> None:
    output = failure(am["alertmanager_alerts"], filter=[matcher])
    assert output.startswith("Error: invalid arguments for alertmanager_alerts: filter.0: ")


def test_shell_text_in_a_quoted_matcher_is_only_a_value(
    am: Tools, alertmanager: Server, alertname: str
) -> None:
    fire(alertmanager, alertname)
    output = call(
        am["alertmanager_alerts"], filter=[f'alertname="{alertname}"', 'instance="$(rm -rf /); `id`"']
    )
    assert output.startswith("no alerts match")


def test_hostile_alert_labels_stay_on_one_line(am: Tools, alertmanager: Server, alertname: str) -> None:
    post_alerts(
        alertmanager.url,
        [{"labels": {"alertname": alertname, "note": 'a"b\nc\u202e'}, "annotations": {"summary": "x\ny"}}],
    )
    output = call(am["alertmanager_alerts"], filter=[f'alertname="{alertname}"'])
    assert len(output.splitlines()) == 2
    assert r'{note="a\"b\nc\u202e"} summary: "x\ny"' in output


def test_matchers_round_trip_escapes_as_alertmanager_reads_them() -> None:
    assert parse_matcher(r'instance="a\"b\\c\nd"').value == 'a"b\\c\nd'
    assert parse_matcher(r'instance=~"web-\d+"').value == r"web-\d+"  # not an escape: kept
    assert parse_matcher('instance="a\\"b"').text() == 'instance="a\\"b"'
    assert parse_matcher("severity != critical").text() == 'severity!="critical"'


def test_silence_without_an_approver_is_refused(am: Tools, alertmanager: Server, alertname: str) -> None:
    tool = am["alertmanager_silence"]
    assert tool.category is ToolCategory.MUTATING and not tool.parallel
    arguments: dict[str, Any] = {
        "matchers": [f'alertname="{alertname}"'],
        "duration_minutes": 30,
        "comment": alertname,
    }
    output = failure(tool, **arguments)
    assert "runs only after a person approves it" in output
    silences = httpx.get(f"{alertmanager.url}/api/v2/silences", trust_env=False).json()
    assert not [silence for silence in silences if silence["comment"] == alertname]


def test_an_approved_silence_is_real_and_silences_the_alerts(
    am: Tools, alertmanager: Server, alertname: str
) -> None:
    fire(alertmanager, alertname)
    arguments: dict[str, Any] = {
        "matchers": [f'alertname="{alertname}"', "instance=~web-.*"],
        "duration_minutes": 90,
        "comment": "deploying the fix",
        "confirmed_by": APPROVER,
    }
    output = call(am["alertmanager_silence"], **arguments)
    assert output.startswith("silence ") and f" created by {APPROVER} for " in output
    assert "(in 90 min)" in output and output.endswith(f"(approved by {APPROVER})")
    silence_id = output.split('"')[1]
    stored = httpx.get(f"{alertmanager.url}/api/v2/silence/{silence_id}", trust_env=False).json()
    assert stored["createdBy"] == APPROVER and stored["comment"] == "deploying the fix"
    assert stored["status"]["state"] == "active"
    assert {(m["name"], m["value"], m["isRegex"]) for m in stored["matchers"]} == {
        ("alertname", alertname, False),
        ("instance", "web-.*", True),
    }

    def silenced_line() -> str | None:
        listing = call(am["alertmanager_alerts"], filter=[f'alertname="{alertname}"'])
        return next(
            (line for line in listing.splitlines() if "web-03" in line and "suppressed" in line), None
        )

    line = wait_for(silenced_line, timeout=10, what="the alert listed as silenced")
    assert f"suppressed (silenced by {silence_id})" in line
    active = call(am["alertmanager_alerts"], filter=[f'alertname="{alertname}"'], silenced=False)
    assert "web-03" not in active and "db-1" in active


def test_the_card_shows_the_request_and_the_alerts_it_would_silence(
    am: Tools, alertmanager: Server, alertname: str
) -> None:
    fire(alertmanager, alertname)
    arguments: dict[str, Any] = {
        "matchers": [f"alertname={alertname}"],
        "duration_minutes": 45,
        "comment": 'see "INC-42"',
    }
    card = am["alertmanager_silence"].describe(json.dumps(arguments))
    assert card is not None
    lines = card.splitlines()
    assert lines[:5] == [
        f"POST {alertmanager.url}/api/v2/silences",
        f'matchers: alertname="{alertname}"',
        "duration: 45 min from the approval",
        r'comment: "see \"INC-42\""',
        "createdBy: the Slack ID of whoever approves",
    ]
    assert lines[5] == "alerts it would silence now (2):"
    assert lines[6].startswith(f"- [critical] {alertname} active") and "web-03:9100" in lines[6]
    assert lines[7].startswith(f"- [warning] {alertname} active") and "db-1:9100" in lines[7]


def test_the_card_says_when_it_cannot_list_the_alerts(closed_port: int) -> None:
    tools = build_tools(alertmanager_url=f"http://127.0.0.1:{closed_port}")
    arguments: dict[str, Any] = {"matchers": ["alertname=X"], "duration_minutes": 5, "comment": "test"}
    card = tools["alertmanager_silence"].describe(json.dumps(arguments))
    assert card is not None
    assert card.splitlines()[-1].startswith(
        "alerts it would silence now: could not list them (Alertmanager (CHATOPS_ALERTMANAGER_URL) did not answer: cannot connect"
    )


def test_alertmanager_refusals_are_error_results(am: Tools) -> None:
    # Every matcher matches the empty string: Alertmanager refuses such a silence, and says why.
    arguments: dict[str, Any] = {
        "matchers": ['alertname=~".*"'],
        "duration_minutes": 5,
        "comment": "all",
        "confirmed_by": APPROVER,
    }
    output = failure(am["alertmanager_silence"], **arguments)
    assert output.startswith("Error: Alertmanager refused the silence: HTTP 400 Bad Request: silence invalid")


def test_quotes_and_backslashes_in_matchers_reach_alertmanager_intact(
    am: Tools, alertmanager: Server, alertname: str
) -> None:
    tricky = 'a"b\\c, d=e'
    post_alerts(alertmanager.url, [{"labels": {"alertname": alertname, "note": tricky}}])
    matcher = r'note="a\"b\\c, d=e"'
    listing = call(am["alertmanager_alerts"], filter=[f'alertname="{alertname}"', matcher])
    assert listing.startswith("1 alert (1 active)") and r'{note="a\"b\\c, d=e"}' in listing
    arguments: dict[str, Any] = {
        "matchers": [matcher],
        "duration_minutes": 5,
        "comment": "escapes",
        "confirmed_by": APPROVER,
    }
    silence_id = call(am["alertmanager_silence"], **arguments).split('"')[1]
    stored = httpx.get(f"{alertmanager.url}/api/v2/silence/{silence_id}", trust_env=False).json()
    assert stored["matchers"] == [{"name": "note", "value": tricky, "isRegex": False, "isEqual": True}]


def test_a_huge_alert_list_is_cut_at_the_cap_and_still_listed(hostile: HostileServer) -> None:
    def fifty_thousand_alerts(handler: HostileHandler) -> None:
        def body() -> Iterator[bytes]:
            yield b"["
            for n in range(50_000):
                alert = {"labels": {"alertname": "Flood", "n": str(n)}, "status": {"state": "active"}}
                yield (b"," if n else b"") + json.dumps(alert).encode()
            yield b"]"

        handler.stream(200, body())

    hostile.answer = fifty_thousand_alerts
    tools = build_tools(alertmanager_url=hostile.url)
    lines = call(tools["alertmanager_alerts"]).splitlines()
    read = int(lines[0].split()[0])
    assert 1000 < read < 50_000 and lines[0].startswith(f"{read} alerts read before the cut (")
    assert len(lines) <= 40 + 3 and sum(len(line) for line in lines) < 4000
    assert lines[-1].startswith("the answer was larger than 2.0 MiB and was cut there")
    card = tools["alertmanager_silence"].describe(
        '{"matchers": ["alertname=Flood"], "duration_minutes": 5, "comment": "x"}'
    )
    assert card is not None and "alerts it would silence now (" in card and " or more):" in card
    assert len(card.splitlines()) <= 5 + 1 + 10 + 2


def test_a_hostile_answer_is_an_error_not_a_crash(hostile: HostileServer) -> None:
    hostile.answer = lambda handler: handler.reply(200, b"[" * 100_000)
    output = failure(build_tools(alertmanager_url=hostile.url)["alertmanager_alerts"])
    assert output == "Error: Alertmanager's answer is not valid JSON"
