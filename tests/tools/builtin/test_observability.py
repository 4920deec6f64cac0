"""prometheus_query and prometheus_range against Debian's real Prometheus (one per module, scraping
itself every second: tests/support/observability.py), and what every observability tool shares:
the configured URLs as the only reachable endpoints, settings, secrets, hostile servers.

The tools are built with an egress policy that allows nothing: the configured URL is reachable
anyway, and nothing else is. Hostile servers (one that hangs, one that answers 100,000 series,
one that echoes the token, one that redirects) are small local sockets.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs

import pytest

from bot.settings import Settings
from tests.support.observability import (
    HostileHandler,
    HostileServer,
    Server,
    Tools,
    build_tools,
    call,
    failure,
    start_prometheus,
)
from tests.support.waiting import wait_for
from tools.builtin import builtin_tools
from tools.builtin.observability import observability_endpoints, secret_values
from tools.config import ToolsConfig
from tools.egress import EgressPolicy
from tools.errors import EgressRefusedError, ToolConfigError
from tools.safety import OutputFilter

OBSERVABILITY_TOOLS = {"prometheus_query", "prometheus_range", "alertmanager_alerts", "alertmanager_silence"}


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with start_prometheus(tmp_path_factory.mktemp("prometheus")) as server:
        yield server


@pytest.fixture(scope="module")
def prom(prometheus: Server) -> Tools:
    return build_tools(prometheus_url=prometheus.url)


@pytest.fixture
def hostile() -> Iterator[HostileServer]:
    server = HostileServer()
    yield server
    server.close()


@pytest.fixture
def listening_port() -> Iterator[int]:
    """A port that accepts connections and never answers (a hung server)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


# -- Prometheus -------------------------------------------------------------------------------------


def test_query_up_returns_real_series_named_by_their_labels(prom: Tools, prometheus: Server) -> None:
    output = call(prom["prometheus_query"], query="up")
    assert output.startswith("1 series (highest value first):\n")
    assert f'up{{instance="{prometheus.address}", job="prometheus"}} 1' in output.splitlines()


def test_query_results_are_sorted_and_the_order_can_change(prom: Tools) -> None:
    query = 'label_replace(vector(1), "n", "a", "", "") or label_replace(vector(3), "n", "b", "", "")'
    assert call(prom["prometheus_query"], query=query).splitlines()[1:] == ['{n="b"} 3', '{n="a"} 1']
    lowest = call(prom["prometheus_query"], query=query, sort="lowest")
    assert lowest.splitlines()[1:] == ['{n="a"} 1', '{n="b"} 3']


def test_scalar_string_and_evaluation_time(prom: Tools, prometheus: Server) -> None:
    assert call(prom["prometheus_query"], query="1 + 1") == "scalar: 2"
    assert call(prom["prometheus_query"], query='"hello"') == 'string: "hello"'
    # Prometheus did not run in 2001: no series then.
    past = call(prom["prometheus_query"], query="up", time="2001-09-09T01:46:40Z")
    assert past.startswith("no series match")


def test_bad_promql_is_an_error_with_prometheus_message(prom: Tools) -> None:
    output = failure(prom["prometheus_query"], query="sum(rate(up[5m])")
    assert output.startswith("Error: Prometheus refused the query (bad_data): ")
    assert "parse error" in output


def test_series_are_capped_and_the_rest_counted(prom: Tools) -> None:
    output = call(prom["prometheus_query"], query='{__name__=~".+"}', sort="labels")
    lines = output.splitlines()
    total = int(lines[0].split()[0])
    assert total > 60  # Prometheus's own metrics
    assert 1 < len(lines) - 2 <= 50
    assert lines[-1].startswith(f"... and {total - (len(lines) - 2)} more series (narrow the query")


def test_hostile_label_values_stay_on_their_line(prom: Tools) -> None:
    query = r'label_replace(vector(1), "evil", "a\"b\nc} 99\nup{x=\"y", "", "")'
    output = call(prom["prometheus_query"], query=query)
    assert output.splitlines()[1:] == [r'{evil="a\"b\nc} 99\nup{x=\"y"} 1']


def test_range_summarises_each_series_with_a_trend(prom: Tools, prometheus: Server) -> None:
    up = call(prom["prometheus_range"], query="up", minutes=1)
    assert up.startswith("1 series (last 1 min, step 1s; highest last value first):\n")
    assert f'up{{instance="{prometheus.address}", job="prometheus"}}: min 1 avg 1 max 1 last 1, ' in up
    counter = "prometheus_tsdb_head_samples_appended_total"

    def rising() -> str | None:
        output = call(prom["prometheus_range"], query=f"sum({counter})", minutes=1)
        return output if ", rising (first third avg " in output else None

    output = wait_for(rising, timeout=20, what="a few seconds of a growing counter")
    assert " points" in output and "[" not in output  # a summary, never raw points


def test_range_carries_the_samples_of_the_series_it_lists(prom: Tools, prometheus: Server) -> None:
    result = prom["prometheus_range"].execute(json.dumps({"query": "up", "minutes": 1}), timeout=15)
    assert not result.is_error and result.series is not None
    assert (result.series.query, result.series.window) == ("up", "last 1 min, step 1s")
    [series] = result.series.series
    assert series.name == f'up{{instance="{prometheus.address}", job="prometheus"}}'
    assert series.points and all(value == 1.0 for _, value in series.points)
    times = [when for when, _ in series.points]
    assert times == sorted(times) and len(times) <= 61


def test_range_step_keeps_a_week_under_200_points(prom: Tools) -> None:
    output = call(prom["prometheus_range"], query="up", minutes=7 * 24 * 60)
    assert "(last 10080 min, step 3600s;" in output
    assert failure(prom["prometheus_range"], query="up", minutes=10081).count("minutes") == 1


SNEAKY_QUERY = "up # &query=vector(666)&time=0 /../../api/v1/admin @evil.example:80/\n# Host: evil.example"


def test_a_query_is_a_parameter_never_part_of_the_url(prom: Tools, prometheus: Server) -> None:
    # '#' starts a PromQL comment: Prometheus evaluates `up`, whatever follows.
    output = call(prom["prometheus_query"], query=SNEAKY_QUERY)
    assert f'up{{instance="{prometheus.address}", job="prometheus"}} 1' in output


def test_the_request_carries_the_query_as_one_encoded_parameter(hostile: HostileServer) -> None:
    seen: list[str] = []

    def record(handler: HostileHandler) -> None:
        seen.append(handler.path)
        handler.reply(200, b'{"status":"success","data":{"resultType":"vector","result":[]}}')

    hostile.answer = record
    call(build_tools(prometheus_url=f"{hostile.url}/prefix/")["prometheus_query"], query=SNEAKY_QUERY)
    path, _, query = seen[0].partition("?")
    assert path == "/prefix/api/v1/query"
    parameters = parse_qs(query)
    assert parameters.keys() == {"query", "timeout"} and parameters["query"] == [SNEAKY_QUERY]
    assert 0 < int(parameters["timeout"][0].removesuffix("s")) <= 15  # the tool's time left, for Prometheus


def test_query_arguments_are_validated_before_any_request(prom: Tools) -> None:
    too_long = failure(prom["prometheus_query"], query="up or " * 400)
    assert "query: String should have at most 2000 characters" in too_long
    assert "time: String should match pattern" in failure(
        prom["prometheus_query"], query="up", time="now; id"
    )
    assert "url: unknown argument" in failure(prom["prometheus_query"], query="up", url="http://evil.example")


# -- egress, configuration, secrets -------------------------------------------------------------------


def test_the_tools_reach_their_configured_endpoint_only(prometheus: Server) -> None:
    prometheus_endpoint, _ = observability_endpoints(
        prometheus_url=prometheus.url,
        prometheus_headers={},
        alertmanager_url="",
        alertmanager_headers={},
        env={},
        egress=EgressPolicy.parse(["127.0.0.0/8", "*.example"]),  # what other network tools may reach
    )
    assert prometheus_endpoint is not None
    assert prometheus_endpoint.egress.vet("127.0.0.1", prometheus.port, 1) == ["127.0.0.1"]
    for host, port in [("127.0.0.1", prometheus.port + 1), ("127.0.0.2", prometheus.port), ("a.example", 80)]:
        with pytest.raises(EgressRefusedError):
            prometheus_endpoint.egress.vet(host, port, 1)


def test_no_tool_takes_a_url_or_host() -> None:
    tools = build_tools(prometheus_url="http://127.0.0.1:9", alertmanager_url="http://127.0.0.1:9")
    assert set(tools) == OBSERVABILITY_TOOLS
    assert sorted(tools) == [
        "alertmanager_alerts",
        "alertmanager_silence",
        "prometheus_query",
        "prometheus_range",
    ]
    for tool in tools.values():
        properties = set(tool.definition.parameters["properties"])
        assert properties <= {
            "query",
            "time",
            "sort",
            "minutes",
            "filter",
            "active",
            "silenced",
            "inhibited",
        } | {
            "matchers",
            "duration_minutes",
            "comment",
        }


def test_a_redirect_elsewhere_is_not_followed(hostile: HostileServer) -> None:
    hostile.answer = lambda handler: handler.reply(302, b"", location="http://evil.example/api/v1/query")
    output = failure(build_tools(prometheus_url=hostile.url)["prometheus_query"], query="up")
    assert "HTTP 302" in output and hostile.requests == 1


def test_with_the_urls_unset_the_tools_are_absent(tmp_path: Path) -> None:
    names = {tool.definition.name for tool in builtin_tools(ToolsConfig(log_dirs=(tmp_path,)))}
    assert not names & {"prometheus_query", "prometheus_range", "alertmanager_alerts", "alertmanager_silence"}
    only = ToolsConfig(log_dirs=(tmp_path,), prometheus_url="http://prometheus.corp:9090")
    names = {tool.definition.name for tool in builtin_tools(only)}
    assert {"prometheus_query", "prometheus_range"} <= names and "alertmanager_alerts" not in names


def test_settings_reach_the_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATOPS_ALERTMANAGER_URL", "https://am.corp/alertmanager/")
    monkeypatch.setenv("CHATOPS_ALERTMANAGER_HEADERS", '{"Authorization": "Bearer ${AM_TOKEN}"}')
    monkeypatch.setenv(
        "CHATOPS_PROMETHEUS_HEADERS",
        '{"X-Scope-OrgID": "tenant-secret-1", "Authorization": "Bearer literal-77"}',
    )
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    config = ToolsConfig.from_settings(settings, env={"AM_TOKEN": "am-token-value"})
    assert config.alertmanager_url == "https://am.corp/alertmanager/"
    assert config.alertmanager_headers == {"Authorization": "Bearer ${AM_TOKEN}"}
    # The variable a header names is a secret like LLM_API_KEY; a value written out is one of the bot's own.
    assert "AM_TOKEN" in settings.chatops_redact_env
    assert {"tenant-secret-1", "Bearer literal-77", "literal-77"} <= set(settings.secret_values())
    output_filter = OutputFilter.from_settings(settings, env={"AM_TOKEN": "am-token-value"})
    assert output_filter("am-token-value tenant-secret-1") == "[REDACTED] [REDACTED]"
    assert "AM_TOKEN" not in ToolsConfig.from_settings(settings, env={"AM_TOKEN": "x"}).command_env()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://prometheus.corp", "must be an http:// or https:// URL with a host"),
        ("prometheus.corp:9090", "must be an http:// or https:// URL with a host"),
        ("http://user:pass@prometheus.corp", "put credentials in CHATOPS_PROMETHEUS_HEADERS"),
        ("http://prometheus.corp/?tenant=a", "without a query or fragment"),
        ("http://prometheus.corp/#x", "without a query or fragment"),
        ("http://{host}/", "must be an http:// or https:// URL with a host"),
        ("http://bad_host!/", "is not a host name"),
    ],
)
def test_bad_urls_stop_start_up(url: str, message: str) -> None:
    with pytest.raises(ToolConfigError, match="CHATOPS_PROMETHEUS_URL") as raised:
        build_tools(prometheus_url=url)
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({"Authorization": "Bearer ${UNSET_TOKEN}"}, "uses ${UNSET_TOKEN}, which is not set"),
        ({"Bad Name": "x"}, "'Bad Name' is not a valid header name"),
        ({"X-Evil": "a\r\nHost: evil.example"}, "holds a line break or NUL"),
        ({"X-Evil": "${WITH_NEWLINE}"}, "holds a line break or NUL"),
        (
            {"Authorization": "Bearer "},
            "header Authorization has no value",
        ),  # .env read an unset ${NAME} as ""
        ({"X-Scope-OrgID": "${EMPTY}"}, "header X-Scope-OrgID has no value"),
    ],
)
def test_bad_headers_stop_start_up_without_showing_values(headers: dict[str, str], message: str) -> None:
    with pytest.raises(ToolConfigError) as raised:
        build_tools(
            prometheus_url="http://prometheus.corp",
            headers=headers,
            env={"WITH_NEWLINE": "tok\nen", "EMPTY": ""},
        )
    assert message in str(raised.value) and "tok" not in str(raised.value)


def test_header_secrets_are_sent_and_never_shown(hostile: HostileServer) -> None:
    token = "s3cr3t-token-4242"

    def echo_the_token(handler: HostileHandler) -> None:
        sent = handler.headers["Authorization"]
        message = f"you sent {sent!r}, token {sent.split()[-1]}"
        handler.reply(
            400, json.dumps({"status": "error", "errorType": "bad_data", "error": message}).encode()
        )

    hostile.answer = echo_the_token
    tools = build_tools(
        prometheus_url=hostile.url,
        alertmanager_url=hostile.url,
        headers={"Authorization": "Bearer ${PROM_TOKEN}"},
        env={"PROM_TOKEN": token},
    )
    silence = {"matchers": ["a=b"], "duration_minutes": 1, "comment": "c"}
    outputs = [
        failure(tools["prometheus_query"], query="up"),  # an error result
        failure(tools["alertmanager_alerts"]),  # a raised error
        tools["alertmanager_silence"].describe(json.dumps(silence)) or "",  # the card, and its listing
    ]
    assert hostile.requests == 3
    for output in outputs:
        assert "you sent" in output and token not in output and "[REDACTED]" in output
    assert "headers: Authorization (values not shown)" in outputs[2]
    endpoints = observability_endpoints(
        prometheus_url=hostile.url,
        prometheus_headers={"Authorization": "Bearer ${PROM_TOKEN}"},
        alertmanager_url="",
        alertmanager_headers={},
        env={"PROM_TOKEN": token},
        egress=EgressPolicy(),
    )
    assert secret_values(*endpoints) == [f"Bearer {token}", token]


# -- hostile servers ----------------------------------------------------------------------------------


def test_a_prometheus_that_hangs_ends_at_the_tools_timeout(listening_port: int) -> None:
    tools = build_tools(prometheus_url=f"http://127.0.0.1:{listening_port}")
    output = failure(tools["prometheus_query"], timeout=0.5, query="up")
    assert output == "Error: Prometheus (CHATOPS_PROMETHEUS_URL) did not answer: no answer within 0.5 s"


def test_a_huge_answer_is_cut_at_the_cap_and_still_summarised(hostile: HostileServer) -> None:
    def hundred_thousand_series(handler: HostileHandler) -> None:
        def body() -> Iterator[bytes]:
            yield b'{"status":"success","data":{"resultType":"vector","result":['
            for n in range(100_000):
                item = {"metric": {"__name__": "up", "instance": f"host-{n}:9100"}, "value": [1, str(n)]}
                yield (b"," if n else b"") + json.dumps(item).encode()
            yield b"]}}"

        handler.stream(200, body())

    hostile.answer = hundred_thousand_series
    output = call(build_tools(prometheus_url=hostile.url)["prometheus_query"], query="up")
    lines = output.splitlines()
    read = int(lines[0].split()[0])
    assert 10_000 < read < 100_000 and lines[0].startswith(f"{read} series read before the cut")
    assert lines[1] == f'up{{instance="host-{read - 1}:9100"}} {read - 1}'  # the highest of those read
    assert lines[-2].startswith(f"... and {read - (len(lines) - 3)} more series")
    assert lines[-1].startswith("the answer was larger than 2.0 MiB and was cut there: narrow the query")


def test_a_non_json_answer_is_an_error(hostile: HostileServer) -> None:
    hostile.answer = lambda handler: handler.reply(502, b"<html>Bad gateway</html>")
    tools = build_tools(prometheus_url=hostile.url, alertmanager_url=hostile.url)
    assert "HTTP 502 Bad Gateway: <html>Bad gateway</html>" in failure(tools["prometheus_query"], query="up")
    assert "HTTP 502 Bad Gateway" in failure(tools["alertmanager_alerts"])
