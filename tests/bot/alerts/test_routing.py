"""Alert routes: the file loads or names every mistake; first match wins; labels map to targets."""

from __future__ import annotations

import json
import os
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.alerts.pagerduty import parse_pagerduty
from bot.alerts.payloads import Alert, Notification, parse_alertmanager
from bot.alerts.routing import AlertRoutes, Route, StormLimit, host_of, load_routes
from bot.errors import AlertConfigError, BotConfigurationError

# The format exactly as the issue publishes it.
ISSUE_EXAMPLE = """\
alerts:
  routes:
    - name: sre
      matchers: ['team="sre"', 'severity=~"critical|warning"']
      channel: C0ALERTS            # Slack channel id (validated: C/G + uppercase alnum)
      investigate: auto            # auto | button
      target_label: instance
      storm: {max_runs: 5, window_seconds: 900}   # default max_runs 5, window 900
"""

THREE_ROUTES = """\
alerts:
  routes:
    - name: db-critical
      matchers: ['team="db"', 'severity="critical"']
      channel: C0DBPAGE
      investigate: auto
      target_label: instance
    - name: db
      matchers: ['{team="db"}']
      channel: C0DBTEAM
    - name: everything-else
      matchers: []
      channel: G0CATCHALL
      storm: {max_runs: 2}
"""


def write(tmp_path: Path, text: str, name: str = "alerts.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def problems_of(path: Path) -> str:
    with pytest.raises(AlertConfigError) as caught:
        load_routes(path)
    assert isinstance(caught.value, BotConfigurationError)
    assert all(line.startswith(f"  - {path}: ") for line in str(caught.value).splitlines()[1:])
    return str(caught.value)


def alert(labels: dict[str, str]) -> Alert:
    return Alert("fp", "firing", labels, {}, datetime(2024, 5, 1, tzinfo=UTC), None, "")


def notification(common: dict[str, str], group: dict[str, str] | None = None, *alerts: Alert) -> Notification:
    return Notification(
        source="alertmanager",
        group_key="{}:{}",
        status="firing",
        receiver="chatops",
        group_labels=group or {},
        common_labels=common,
        common_annotations={},
        external_url="",
        truncated_alerts=0,
        alerts=alerts or (alert(common),),
    )


# --- loading ---


def test_the_issue_example_loads(tmp_path: Path) -> None:
    path = write(tmp_path, ISSUE_EXAMPLE)
    routes = load_routes(path)

    assert routes.path == path
    (route,) = routes.routes
    assert (route.name, route.channel, route.investigate, route.target_label) == (
        "sre",
        "C0ALERTS",
        "auto",
        "instance",
    )
    assert [str(matcher) for matcher in route.matchers] == ['team="sre"', 'severity=~"critical|warning"']
    assert route.storm == StormLimit(max_runs=5, window_seconds=900)


def test_defaults_a_route_may_leave_out(tmp_path: Path) -> None:
    route = load_routes(write(tmp_path, THREE_ROUTES)).get("db")

    assert route is not None
    assert route.investigate == "button"  # a person decides unless the route says auto
    assert route.target_label is None and route.storm == StormLimit(max_runs=5, window_seconds=900)
    assert load_routes(write(tmp_path, THREE_ROUTES)).routes[2].storm == StormLimit(
        max_runs=2, window_seconds=900
    )


def test_no_file_means_no_routes() -> None:
    routes = load_routes(None)

    assert routes.routes == () and routes.route_for(notification({"team": "sre"})) is None


# --- which route ---


def test_the_first_matching_route_wins(tmp_path: Path) -> None:
    routes = load_routes(write(tmp_path, THREE_ROUTES))

    assert name_of(routes, {"team": "db", "severity": "critical"}) == "db-critical"
    assert name_of(routes, {"team": "db", "severity": "warning"}) == "db"
    assert name_of(routes, {"team": "web"}) == "everything-else"  # matchers: [] catches the rest


def name_of(routes: AlertRoutes, common: dict[str, str]) -> str | None:
    route = routes.route_for(notification(common))
    return route.name if route else None


def test_no_matching_route_is_none(tmp_path: Path) -> None:
    routes = load_routes(write(tmp_path, ISSUE_EXAMPLE))

    assert name_of(routes, {"team": "sre", "severity": "info"}) is None
    assert name_of(routes, {"team": "web", "severity": "critical"}) is None


def test_common_labels_decide_and_a_label_not_shared_by_the_group_is_missing(tmp_path: Path) -> None:
    routes = load_routes(write(tmp_path, ISSUE_EXAMPLE))
    mixed = notification(
        {"team": "sre"},  # severity differs between the alerts: not common
        {"alertname": "DiskFull"},
        alert({"team": "sre", "severity": "critical"}),
        alert({"team": "sre", "severity": "info"}),
    )

    assert routes.route_for(mixed) is None


def test_common_labels_win_over_group_labels_and_both_count(tmp_path: Path) -> None:
    routes = load_routes(write(tmp_path, ISSUE_EXAMPLE))

    # Grafana sends {"alertname": ""} as group labels next to the real common alertname.
    assert routes.route_for(notification({"severity": "critical"}, {"team": "sre"})) is not None
    assert routes.route_for(notification({"team": "sre", "severity": "critical"}, {"team": ""})) is not None


def test_without_common_or_group_labels_the_first_alert_decides(tmp_path: Path) -> None:
    routes = load_routes(write(tmp_path, ISSUE_EXAMPLE))
    first = alert({"team": "sre", "severity": "warning"})
    second = alert({"team": "web", "severity": "warning"})

    assert routes.route_for(notification({}, {}, first, second)) is not None
    assert routes.route_for(notification({}, {}, second, first)) is None


def test_a_real_alertmanager_body_routes_on_its_labels(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        alerts:
          routes:
            - name: probes
              matchers: ['job="http_checks"', 'severity=~"critical|warning"', 'monitor!~"staging.*"']
              channel: C0PROBES
        """,
    )
    body = {
        "version": "4",
        "groupKey": "{}:{}",
        "status": "firing",
        "receiver": "chatops",
        "commonLabels": {
            "alertname": "ProbeFailure",
            "job": "http_checks",
            "severity": "critical",
            "monitor": "master",
        },
        "alerts": [
            {
                "status": "firing",
                "labels": {"alertname": "ProbeFailure"},
                "startsAt": "2023-02-06T13:08:45.828Z",
            }
        ],
    }

    route = load_routes(path).route_for(parse_alertmanager(json.dumps(body).encode()))

    assert route is not None and route.name == "probes"


def test_a_pagerduty_incident_routes_on_its_service_and_urgency(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        alerts:
          routes:
            - name: api-pages
              matchers: ['service="API Service"', 'urgency="high"']
              channel: C0APIPAGE
        """,
    )
    incident = {"id": "PGR0VU2", "type": "incident", "title": "Down", "status": "triggered", "urgency": "high",
                "service": {"id": "PF9KMXH", "summary": "API Service"}}  # fmt: skip
    event = {
        "id": "e1",
        "event_type": "incident.triggered",
        "occurred_at": "2020-10-02T18:45:22.169Z",
        "data": incident,
    }

    route = load_routes(path).route_for(parse_pagerduty(json.dumps({"event": event}).encode()))

    assert route is not None and route.name == "api-pages"


# --- which target ---

INVENTORY = ["web-03", "db-01", "10.0.0.5", "edge.corp", "10"]


def target(value: str, names: list[str] = INVENTORY, label: str = "instance") -> str | None:
    route = Route(name="r", matchers=(), channel="C0ALERTS", target_label=label)
    return route.target_for(alert({"instance": value, "host": value}), names)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("web-03:9100", "web-03"),  # the host part, before the port
        ("web-03", "web-03"),
        ("WEB-03:9100", "web-03"),  # case-insensitive
        ("web-03.corp:9100", "web-03"),  # no exact web-03.corp: its first DNS label
        ("web-03.corp.example.com.", "web-03"),  # a trailing root dot too
        ("edge.corp:443", "edge.corp"),  # the exact host first
        ("edge.corp.example.com", None),  # its first label "edge" is not in the inventory
        ("https://web-03.corp:8443/health?x=1", "web-03"),  # blackbox: a URL's host
        ("10.0.0.5:9100", "10.0.0.5"),
        ("10.0.0.6:9100", None),  # never a part of an IP address ("10")
        ("[::1]:9100", None),
        ("web-04:9100", None),
        ("", None),
        (":9100", None),
        ("web-03:9100:extra", None),  # not host:port
        ("../../web-03", None),
        ("web-03\n:9100", None),
        ("web-03; rm -rf /", None),
        ("http://[::1", None),  # an unparsable URL
    ],
)
def test_the_target_label_maps_to_an_inventory_name(value: str, expected: str | None) -> None:
    assert target(value) == expected


def test_no_target_label_or_a_missing_label_means_no_target() -> None:
    route = Route(name="r", matchers=(), channel="C0ALERTS")

    assert route.target_for(alert({"instance": "web-03:9100"}), INVENTORY) is None
    assert target("web-03", label="hostname") is None  # the alert has no such label
    assert target("web-03:9100", names=[]) is None


def test_only_names_from_the_inventory_are_ever_returned() -> None:
    assert target("Web-03.Corp:9100", names=["Web-03"]) == "Web-03"  # as the inventory spells it


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("web-03:9100", "web-03"),
        ("[2001:db8::1]:9100", "2001:db8::1"),
        ("2001:db8::1", "2001:db8::1"),
        (" Host ", "host"),
    ],
)
def test_host_of(value: str, expected: str) -> None:
    assert host_of(value) == expected


# --- mistakes in the file ---


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    assert "cannot read the file" in problems_of(tmp_path / "nope.yaml")


def test_a_directory_fifo_or_huge_file_is_refused(tmp_path: Path) -> None:
    assert "is not a regular file" in problems_of(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert "is not a regular file" in problems_of(fifo)  # and does not block
    huge = tmp_path / "huge.yaml"
    huge.write_bytes(b"#" * (1024 * 1024 + 1))
    assert "is larger than 1024 KiB" in problems_of(huge)


def test_a_file_that_is_not_utf8_or_yaml_is_named(tmp_path: Path) -> None:
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"alerts:\n  routes: \xff\n")
    assert "is not UTF-8 text (byte 18)" in problems_of(binary)
    unclosed = problems_of(write(tmp_path, "alerts:\n  routes:\n    - [name: x\n"))
    assert "invalid YAML at line 4, column 1: expected ',' or ']'" in unclosed
    assert "(in what opens at line 3)" in unclosed
    assert "nested too deeply" in problems_of(write(tmp_path, "[" * 5000))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "the file is empty"),
        ("- a\n- b\n", "the top level must be a top-level 'alerts:' mapping"),
        ("alert:\n  routes: []\n", "'alert': unknown top-level key (did you mean 'alerts'?)"),
        ("alerts: [x]\n", "alerts: must be a mapping with a 'routes:' list"),
        ("alerts:\n  route: []\n", "alerts.route: unknown key (did you mean 'routes'?)"),
        ("alerts:\n  routes: []\n", "alerts.routes: must be a list of at least one route"),
        ("alerts:\n  routes: {sre: x}\n", "alerts.routes: must be a list of at least one route"),
        ("alerts:\n  routes: [just-a-string]\n", "route routes[0] (line 2): must be a mapping"),
    ],
)
def test_the_shape_of_the_file_is_checked(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in problems_of(write(tmp_path, text))


def route_problems(tmp_path: Path, route: str) -> str:
    text = "alerts:\n  routes:\n" + textwrap.indent(textwrap.dedent(route), "    ")
    return problems_of(write(tmp_path, text))


GOOD = "- name: sre\n  matchers: ['team=\"sre\"']\n  channel: C0ALERTS\n"


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("  chanel: C0OTHER\n", "route 'sre' (line 3): chanel: unknown key (did you mean 'channel'?)"),
        (
            "  investigate: automatic\n",
            "route 'sre' (line 3): investigate: Input should be 'auto' or 'button' (did you mean 'auto'?)",
        ),
        ("  investigate: yes\n", "route 'sre' (line 3): investigate: Input should be 'auto' or 'button'"),
        ("  target_label: 'in stance'\n", "target_label: 'in stance' is not a label name"),
        ("  storm: {max_run: 3}\n", "storm.max_run: unknown key (did you mean 'max_runs'?)"),
        ("  storm: {max_runs: 0}\n", "storm.max_runs: Input should be greater than or equal to 1"),
        ("  storm: {max_runs: '5'}\n", "storm.max_runs: Input should be a valid integer"),
        ("  storm: {max_runs: true}\n", "storm.max_runs: Input should be a valid integer"),
        (
            "  storm: {window_seconds: 99999999}\n",
            "storm.window_seconds: Input should be less than or equal to 604800",
        ),
        ("  storm: 5\n", "storm: Input should be a valid dictionary"),
    ],
)
def test_every_field_mistake_names_the_route_and_field(tmp_path: Path, extra: str, expected: str) -> None:
    assert expected in route_problems(tmp_path, GOOD + extra)


@pytest.mark.parametrize(
    ("channel", "expected"),
    [
        ("'#alerts'", "channel: '#alerts' is not a Slack channel id"),
        ("c0alerts", "channel: 'c0alerts' is not a Slack channel id"),
        ("D0DIRECT1", "is not a Slack channel id"),  # a DM, not a channel
        ("C0", "is not a Slack channel id"),
        ("'C0ALERTS; rm -rf /'", "is not a Slack channel id"),
        ("12345678", "channel: Input should be a valid string"),
    ],
)
def test_the_channel_must_be_a_slack_channel_id(tmp_path: Path, channel: str, expected: str) -> None:
    route = f"- name: sre\n  matchers: []\n  channel: {channel}\n"
    assert expected in route_problems(tmp_path, route)


@pytest.mark.parametrize(
    ("matchers", "expected"),
    [
        ("['severity=~\"critical|(\"']", "matchers: [0] bad regex 'critical|(': missing ): "),
        (
            "['team=\"sre\"', 'sev=\"x']",
            "matchers: [1] matcher value contains unescaped double quote: 'sev=\"x'",
        ),
        ("['team-name=sre']", "matchers: [0] bad matcher format: 'team-name=sre'"),
        ("[{team: sre}]", "matchers: [0] must be a matcher text such as 'team=\"sre\"' (quote it in YAML)"),
        ("'team=\"sre\"'", "matchers: must be a list of matcher texts"),
        ("", "matchers: must be a list of matcher texts"),  # `matchers:` with nothing: null, not []
        (
            "['(a+)+$=x', 'b=~\"(?=x)\"']",
            "matchers: [0] bad matcher format: '(a+)+$=x' (matchers are written",
        ),
        ("['b=~\"(?=x)\"']", "matchers: [0] bad regex '(?=x)': invalid perl operator"),
    ],
)
def test_a_bad_matcher_is_named_by_its_text(tmp_path: Path, matchers: str, expected: str) -> None:
    route = f"- name: sre\n  matchers: {matchers}\n  channel: C0ALERTS\n"
    assert f"route 'sre' (line 3): {expected}" in route_problems(tmp_path, route)


def test_every_bad_matcher_of_a_route_is_named_in_one_line(tmp_path: Path) -> None:
    route = "- name: sre\n  matchers: ['x=~\"(\"', 'ok=\"1\"', 'y=~\"(?=x)\"']\n  channel: C0ALERTS\n"

    problems = route_problems(tmp_path, route)

    assert "matchers: [0] bad regex '('" in problems and "; [2] bad regex '(?=x)'" in problems
    assert "(1 problem)" in problems


def test_required_keys_and_bad_names_are_named(tmp_path: Path) -> None:
    problems = route_problems(
        tmp_path, "- channel: C0ALERTS\n- name: 'sre team'\n  matchers: []\n  channel: C0ALERTS\n"
    )

    assert "route routes[0] (line 3): name: required key is missing" in problems
    assert "route routes[0] (line 3): matchers: required key is missing" in problems
    assert "route 'sre team' (line 4): name: 'sre team' must be 1-63 letters, digits" in problems


def test_two_routes_with_one_name_are_refused(tmp_path: Path) -> None:
    assert "route 'sre': name: used by more than one route" in route_problems(tmp_path, GOOD + GOOD)


def test_every_problem_of_the_file_is_reported_at_once(tmp_path: Path) -> None:
    text = GOOD + "  chanel: x\n" + "- name: db\n  matchers: ['x=~\"(\"']\n  channel: '#db'\n" + "- nope\n"

    message = route_problems(tmp_path, text)

    assert message.splitlines()[0].endswith("is invalid (4 problems):")
    assert "chanel" in message and "bad regex" in message and "'#db'" in message and "routes[2]" in message


def test_a_hostile_value_is_cut_short_in_messages(tmp_path: Path) -> None:
    message = route_problems(tmp_path, f"- name: sre\n  matchers: []\n  channel: '{'X' * 5000}'\n")

    assert len(message) < 1000


def test_routes_built_in_code_are_checked_too() -> None:
    with pytest.raises(ValueError, match="Slack channel id"):
        Route(name="r", matchers=(), channel="#general")
    assert load_routes(None).get("missing") is None
