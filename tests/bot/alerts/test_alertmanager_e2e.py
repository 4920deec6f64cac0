"""Debian's real Alertmanager sends its own webhooks to the bot's web app; runs start in the alert's thread.

Alertmanager is configured exactly as docs/ALERTS.md shows (a webhook receiver with a bearer
token); alerts are fired through its API, as Prometheus fires them, and in one test by a real
Prometheus rule on its scrape of the bot's own ``/metrics``; in another, what Alertmanager sent is
recorded on its way and replayed. The bot is the real web app on a port
with the Slack emulator, and an in-process worker.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent.scripted import FunctionModel, last_tool_output, tool_call
from agent.types import Request
from bot.alerts.store import AlertStore, Group, group_id
from bot.observability.metrics import WEBHOOK_REPLAYS, MetricsStore
from tests.support.observability import Server, build_tools, post_alerts, start_alertmanager, start_prometheus
from tests.support.slack_bot import SlackBot
from tests.support.waiting import wait_for

TOKEN = "alert-token-0123456789abcdef"
CHANNEL = "C0ALERTS"
DOC = Path(__file__).resolve().parents[3] / "docs" / "ALERTS.md"


def doc_block(marker: str) -> str:
    """The fenced block after ``<!-- marker -->`` in docs/ALERTS.md: the docs are what is tested."""
    text = DOC.read_text()
    after = text[text.index(f"<!-- {marker} -->") :]
    start = after.index("```yaml\n") + len("```yaml\n")
    return after[start : after.index("```", start)]


ROUTES = doc_block("alerts-routes")


def alertmanager_config(url: str) -> str:
    """docs/ALERTS.md's receiver, pointed at this bot, with this test's token and short timers."""
    config = doc_block("alertmanager-config")
    config = config.replace("https://chatops.example.com", url).replace("CHATOPS_ALERTS_TOKEN_VALUE", TOKEN)
    for name, value in (("group_wait", "1s"), ("group_interval", "1s")):
        config = re.sub(rf"{name}: \S+", f"{name}: {value}", config)
    return config


def fired(name: str, instance: str, *, ended: bool = False) -> dict[str, Any]:
    alert: dict[str, Any] = {
        "labels": {"alertname": name, "team": "sre", "severity": "critical", "instance": instance},
        "annotations": {"summary": f"{name} on {instance}"},
        "generatorURL": "http://prometheus.example/graph?g0.expr=up",
    }
    if ended:
        alert["endsAt"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 1))
    return alert


def queries_prometheus(query: str) -> Callable[[Request], Any]:
    """The investigation: one ``prometheus_query``, then an answer quoting what it returned."""

    def investigate(request: Request) -> Any:
        if not any(m.role == "tool" for m in request.messages):
            return tool_call("prometheus_query", "q1", query=query)
        return f"Prometheus says: {last_tool_output(request.messages)}"

    return investigate


@pytest.fixture
def alert_bot(make_bot: Callable[..., SlackBot], tmp_path: Path) -> Iterator[tuple[SlackBot, Server]]:
    routes = tmp_path / "alerts.yaml"
    routes.write_text(ROUTES)
    model = FunctionModel(lambda request: "The load comes from the api's retry loop.", model="answers")
    bot = make_bot(
        models=[model], tools=[], chatops_alerts_file=routes, chatops_alerts_token=TOKEN, chatops_channels=[]
    )
    assert bot.server is not None
    with start_alertmanager(tmp_path / "am", alertmanager_config(bot.server.url)) as alertmanager:
        yield bot, alertmanager


def root_text(bot: SlackBot, ts: str) -> str:
    root = next(m for m in bot.control.messages(CHANNEL) if m["ts"] == ts)
    return json.dumps(root.get("blocks") or [])


def group_of(bot: SlackBot, name: str) -> Group | None:
    bot.work()
    store = AlertStore(bot.redis, bot.keys)
    return store.group(group_id("alertmanager", f'{{}}:{{alertname="{name}"}}'))


def test_alertmanager_opens_a_thread_starts_one_run_and_resolving_updates_it(
    alert_bot: tuple[SlackBot, Server],
) -> None:
    bot, alertmanager = alert_bot
    post_alerts(alertmanager.url, [fired("HighLoad", "web-03:9100")])
    group = wait_for(lambda: group_of(bot, "HighLoad"), timeout=30, what="Alertmanager's webhook")
    assert group.channel == CHANNEL and group.run_id
    record = wait_for(lambda: bot.service.get(group.run_id), what="the run")
    assert record.thread_ts == group.root_ts and record.requester == "Alertmanager"
    first = bot.service.history(group.run_id)[1].content or ""
    assert first.startswith("Alert from Alertmanager (firing): HighLoad") and "instance=web-03:9100" in first
    root = next(m for m in bot.control.messages(CHANNEL) if m["ts"] == group.root_ts)
    assert "FIRING" in root["text"] and "HighLoad" in root["text"]
    # The investigation's answer, in the thread and, short, on the root message.
    found = wait_for(
        lambda: root_text(bot, group.root_ts) if "retry loop" in root_text(bot, group.root_ts) else None
    )
    assert "What the investigation found" in found
    # The run card and the answer link back to what fired.
    thread = bot.control.thread(CHANNEL, group.root_ts)
    linked = [m for m in thread if "prometheus.example/graph" in json.dumps(m)]
    assert len(linked) >= 2, thread  # the run card and the answer

    # A new alert of the same group: posted in the thread, no second run.
    post_alerts(alertmanager.url, [fired("HighLoad", "web-03:9100"), fired("HighLoad", "web-04:9100")])
    joined = wait_for(
        lambda: (g := group_of(bot, "HighLoad")) is not None and len(g.fingerprints) == 2 and g,
        timeout=30,
        what="the second notification",
    )
    assert joined.run_id == group.run_id and joined.root_ts == group.root_ts
    assert len([m for m in bot.control.messages(CHANNEL) if "FIRING" in (m.get("text") or "")]) == 1

    # web-03's alert ends while web-04's still fires: Alertmanager lists it resolved in a firing
    # notification; the thread is told and the root counts it.
    post_alerts(
        alertmanager.url, [fired("HighLoad", "web-03:9100", ended=True), fired("HighLoad", "web-04:9100")]
    )
    partly = wait_for(
        lambda: (g := group_of(bot, "HighLoad")) is not None and g.resolved_fingerprints and g,
        timeout=30,
        what="the notification with one alert resolved",
    )
    assert partly.status == "firing" and len(partly.resolved_fingerprints) == 1
    assert "2 (1 resolved)" in root_text(bot, group.root_ts)
    notes = [m.get("text") or "" for m in bot.control.thread(CHANNEL, group.root_ts)]
    assert any("1 alert(s) of this group resolved at" in text and "web-03" in text for text in notes)

    # Resolved: Alertmanager sends it, the root message says so.
    post_alerts(
        alertmanager.url,
        [fired("HighLoad", "web-03:9100", ended=True), fired("HighLoad", "web-04:9100", ended=True)],
    )
    resolved = wait_for(
        lambda: (g := group_of(bot, "HighLoad")) is not None and g.status == "resolved" and g,
        timeout=30,
        what="the resolved notification",
    )
    assert resolved.root_ts == group.root_ts
    root = next(m for m in bot.control.messages(CHANNEL) if m["ts"] == group.root_ts)
    assert root["text"].startswith("RESOLVED")


def test_a_webhook_with_a_wrong_token_is_refused(alert_bot: tuple[SlackBot, Server], tmp_path: Path) -> None:
    import httpx

    bot, _ = alert_bot
    assert bot.server is not None
    body = b'{"version": "4"}'
    url = f"{bot.server.url}/alerts/alertmanager"
    refused = httpx.post(url, content=body, headers={"Authorization": "Bearer nope"}, trust_env=False)
    assert refused.status_code == 401
    malformed = httpx.post(url, content=body, headers={"Authorization": f"Bearer {TOKEN}"}, trust_env=False)
    assert malformed.status_code == 400 and malformed.text


def test_the_investigation_queries_the_real_prometheus_the_alert_came_from(
    make_bot: Callable[..., SlackBot], tmp_path: Path
) -> None:
    investigate = queries_prometheus('up{job="prometheus"}')
    routes = tmp_path / "alerts.yaml"
    routes.write_text(ROUTES)
    with start_prometheus(tmp_path / "prom") as prometheus:
        tools = list(build_tools(prometheus_url=prometheus.url).values())
        bot = make_bot(
            models=[FunctionModel(investigate, model="investigates")],
            tools=tools,
            chatops_alerts_file=routes,
            chatops_alerts_token=TOKEN,
        )
        assert bot.server is not None
        with start_alertmanager(tmp_path / "am", alertmanager_config(bot.server.url)) as alertmanager:
            post_alerts(alertmanager.url, [fired("PrometheusDown", prometheus.address)])
            group = wait_for(lambda: group_of(bot, "PrometheusDown"), timeout=30, what="the webhook")
            answer = wait_for(
                lambda: next(
                    (
                        m.content
                        for m in bot.service.history(group.run_id)
                        if m.role == "assistant" and m.content
                    ),
                    None,
                ),
                what="the investigation's answer",
            )
    # Real data of that Prometheus: its own ``up`` series, with the labels that name the target.
    assert 'up{instance="' in answer and 'job="prometheus"} 1' in answer, answer


def test_a_prometheus_rule_on_a_scraped_target_fires_through_alertmanager_into_a_run(
    make_bot: Callable[..., SlackBot], tmp_path: Path
) -> None:
    """The whole chain with nothing posted by hand: Prometheus scrapes the bot's own ``/metrics``
    (a real target), a rule on that scrape fires, Prometheus hands the alert to Alertmanager,
    Alertmanager's webhook reaches the bot, and the run queries the same Prometheus."""
    investigate = queries_prometheus('up{job="targets"}')
    routes = tmp_path / "alerts.yaml"
    routes.write_text(ROUTES)
    rules = tmp_path / "rules.yml"
    rules.write_text(
        "groups:\n"
        "  - name: chatops\n"
        "    rules:\n"
        "      - alert: ChatopsScraped\n"
        '        expr: up{job="targets"} == 1\n'
        "        labels: {team: sre, severity: warning}\n"
        "        annotations: {summary: 'the bot answers its scrape'}\n"
    )
    bot = make_bot(
        models=[FunctionModel(investigate, model="investigates")],
        tools=[],
        chatops_alerts_file=routes,
        chatops_alerts_token=TOKEN,
    )
    assert bot.server is not None
    web = bot.server.url.split("://", 1)[1]
    with (
        start_alertmanager(tmp_path / "am", alertmanager_config(bot.server.url)) as alertmanager,
        start_prometheus(
            tmp_path / "prom", scrape_targets=[web], rule_files=[rules], alertmanager_url=alertmanager.url
        ) as prometheus,
    ):
        bot.tools = list(build_tools(prometheus_url=prometheus.url).values())
        group = wait_for(lambda: group_of(bot, "ChatopsScraped"), timeout=60, what="the rule's alert")
        assert group.run_id
        first = bot.service.history(group.run_id)[1].content or ""
        assert first.startswith("Alert from Alertmanager (firing): ChatopsScraped")
        assert f"instance={web}" in first and "the bot answers its scrape" in first
        answer = wait_for(
            lambda: next(
                (m.content for m in bot.service.history(group.run_id) if m.role == "assistant" and m.content),
                None,
            ),
            what="the investigation's answer",
        )
    assert f'instance="{web}"' in answer and 'job="targets"} 1' in answer, answer


def test_a_storm_of_200_alerts_in_10_groups_through_alertmanager_starts_only_the_storm_limits_runs(
    alert_bot: tuple[SlackBot, Server],
) -> None:
    bot, alertmanager = alert_bot
    names = [f"DiskFull{n}" for n in range(10)]
    post_alerts(
        alertmanager.url,
        [fired(name, f"web-{index:02d}:9100") for name in names for index in range(20)],
    )

    def all_groups() -> list[Group] | None:
        groups = [group_of(bot, name) for name in names]
        complete = [g for g in groups if g is not None and len(g.fingerprints) == 20]
        return complete if len(complete) == len(names) else None

    groups = wait_for(all_groups, timeout=60, what="10 groups of 20 alerts from Alertmanager")
    investigated = [g for g in groups if g.run_id]
    assert len(investigated) == 5  # docs/ALERTS.md's route: storm: {max_runs: 5, window_seconds: 900}
    assert len({g.root_ts for g in groups}) == 10  # one thread per group, however many notifications
    roots = {m["ts"]: json.dumps(m.get("blocks") or []) for m in bot.control.messages(CHANNEL)}
    held = [g for g in groups if not g.run_id]
    assert sorted(g.held for g in held) == [1, 2, 3, 4, 5]
    assert all(f"storm limit ({g.held} group(s) held in its window)" in roots[g.root_ts] for g in held)
    assert all('"Investigate"' in roots[g.root_ts] for g in held)
    records = [bot.service.get(g.run_id) for g in investigated]
    assert {r.thread_ts for r in records if r is not None} == {g.root_ts for g in investigated}


class Recorder:
    """Between Alertmanager and the bot: forwards each webhook and keeps what Alertmanager sent."""

    def __init__(self, upstream: str) -> None:
        self.deliveries: list[tuple[str, bytes]] = []  # (Authorization, body) as sent
        recorder = self

        class Forward(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                headers = {"Authorization": self.headers["Authorization"], "Content-Type": "application/json"}
                answer = httpx.post(upstream + self.path, content=body, headers=headers, trust_env=False)
                recorder.deliveries.append((self.headers["Authorization"], body))
                self.send_response(answer.status_code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def test_a_notification_alertmanager_sent_replayed_after_the_group_resolved_changes_nothing(
    make_bot: Callable[..., SlackBot], tmp_path: Path
) -> None:
    """The exact request Debian's Alertmanager sent (its body, its bearer token), sent again once
    the group resolved: 200 without effect, counted; the thread stays resolved with its one run."""
    routes = tmp_path / "alerts.yaml"
    routes.write_text(ROUTES)
    model = FunctionModel(lambda request: "The load comes from the api's retry loop.", model="answers")
    bot = make_bot(
        models=[model], tools=[], chatops_alerts_file=routes, chatops_alerts_token=TOKEN, chatops_channels=[]
    )
    assert bot.server is not None
    recorder = Recorder(bot.server.url)
    try:
        with start_alertmanager(tmp_path / "am", alertmanager_config(recorder.url)) as alertmanager:
            post_alerts(alertmanager.url, [fired("HighLoad", "web-03:9100")])
            group = wait_for(
                lambda: (g := group_of(bot, "HighLoad")) is not None and g.run_id and g, timeout=30
            )
            wait_for(lambda: (r := bot.service.get(group.run_id)) is not None and r.status.terminal)
            post_alerts(alertmanager.url, [fired("HighLoad", "web-03:9100", ended=True)])
            resolved = wait_for(
                lambda: (g := group_of(bot, "HighLoad")) is not None and g.status == "resolved" and g,
                timeout=30,
                what="the resolved notification",
            )
    finally:
        recorder.close()
    (token, firing), *_ = [(a, b) for a, b in recorder.deliveries if json.loads(b)["status"] == "firing"]
    url = f"{bot.server.url}/alerts/alertmanager"
    replay = httpx.post(url, content=firing, headers={"Authorization": token}, trust_env=False)
    assert (replay.status_code, replay.text) == (200, "already received: ignored")
    again = group_of(bot, "HighLoad")
    assert again is not None and again.status == "resolved"
    assert (again.run_id, again.notifications) == (resolved.run_id, resolved.notifications)
    assert [m["ts"] for m in bot.control.messages(CHANNEL)] == [group.root_ts]  # no second thread
    counted = MetricsStore(bot.redis, bot.keys).read().get(WEBHOOK_REPLAYS, {})
    assert {tuple(json.loads(k)): float(v) for k, v in counted.items()} == {("alertmanager", "ignored"): 1.0}
