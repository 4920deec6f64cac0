"""The alert webhooks on the real web app: PagerDuty's signatures (rotated secrets), Grafana's token,
and a Redis that cannot take the notification (the sender must retry)."""

from __future__ import annotations

import hashlib
import hmac
import json
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import yaml

from bot.alerts.store import AlertStore, group_id
from tests.bot.alerts.conftest import ALERT_CHANNEL
from tests.bot.alerts.test_payloads import GRAFANA_BODY, PAGEY_PING, pd_delivery
from tests.support.slack_bot import SlackBot
from tests.support.slack_http import signed_post
from tests.support.waiting import wait_for

TOKEN = "alert-token-0123456789abcdef"
OLD, NEW = "pd-secret-old-0123456789", "pd-secret-new-9876543210"
ROUTES = f"""
alerts:
  routes:
    - name: pager
      matchers: ['urgency=~"high|low"']
      channel: {ALERT_CHANNEL}
      investigate: button
    - name: grafana
      matchers: ['team="blue"']
      channel: {ALERT_CHANNEL}
      investigate: button
"""


def signed(body: bytes, *secrets: str) -> str:
    return ",".join("v1=" + hmac.new(s.encode(), body, hashlib.sha256).hexdigest() for s in secrets)


@pytest.fixture
def web(make_bot: Callable[..., SlackBot], tmp_path: Path) -> SlackBot:
    routes = tmp_path / "alerts.yaml"
    routes.write_text(ROUTES)
    return make_bot(
        tools=[], chatops_alerts_file=routes, chatops_alerts_token=TOKEN, chatops_pagerduty_secret=[OLD, NEW]
    )


def post(bot: SlackBot, path: str, body: bytes, **headers: str) -> httpx.Response:
    assert bot.server is not None
    return httpx.post(f"{bot.server.url}{path}", content=body, headers=headers, trust_env=False, timeout=10)


@pytest.mark.parametrize("secrets", [(OLD,), (NEW,), ("someone-else", NEW)])
def test_pagerduty_deliveries_signed_with_any_current_secret_are_accepted(
    web: SlackBot, secrets: tuple[str, ...]
) -> None:
    body = pd_delivery("incident.triggered")
    answer = post(web, "/alerts/pagerduty", body, **{"X-PagerDuty-Signature": signed(body, *secrets)})
    assert (answer.status_code, answer.text) == (200, "accepted")
    group = wait_for(
        lambda: (web.work(), AlertStore(web.redis, web.keys).group(group_id("pagerduty", "PGR0VU2")))[1],
        what="the incident's thread",
    )
    assert group.channel == ALERT_CHANNEL and not group.run_id  # investigate: button, not started
    assert group.held == 0 and group.brief.startswith("Alert from PagerDuty")  # the button's run is told it


@pytest.mark.parametrize(
    "signature",
    ["", "v1=" + "0" * 64, "v0=abc", "v1=not-hex", signed(b"another body", NEW)],
)
def test_pagerduty_deliveries_with_a_bad_signature_are_refused_and_store_nothing(
    web: SlackBot, signature: str
) -> None:
    body = pd_delivery("incident.triggered")
    answer = post(web, "/alerts/pagerduty", body, **{"X-PagerDuty-Signature": signature})
    assert answer.status_code == 401
    assert not list(web.redis.scan_iter(match=f"{web.keys.prefix}alerts:*"))


def test_pagerduty_ping_is_acknowledged_and_ignored(web: SlackBot) -> None:
    answer = post(web, "/alerts/pagerduty", PAGEY_PING, **{"X-PagerDuty-Signature": signed(PAGEY_PING, NEW)})
    assert answer.status_code == 200 and answer.text.startswith("ignored")


def test_grafana_uses_the_same_bearer_token(web: SlackBot) -> None:
    body = json.dumps(GRAFANA_BODY).encode()
    assert post(web, "/alerts/grafana", body, Authorization="Bearer wrong").status_code == 401
    answer = post(web, "/alerts/grafana", body, Authorization=f"Bearer {TOKEN}")
    assert (answer.status_code, answer.text) == (200, "accepted")


def test_a_redis_that_cannot_store_the_notification_gets_a_5xx(
    make_bot: Callable[..., SlackBot], tmp_path: Path
) -> None:
    routes = tmp_path / "alerts.yaml"
    routes.write_text(ROUTES)
    bot = make_bot(
        tools=[], chatops_alerts_file=routes, chatops_alerts_token=TOKEN, redis_url="redis://127.0.0.1:1/0"
    )
    answer = post(bot, "/alerts/grafana", json.dumps(GRAFANA_BODY).encode(), Authorization=f"Bearer {TOKEN}")
    assert answer.status_code == 503  # Grafana and Alertmanager retry a 5xx


def test_the_investigate_button_starts_the_run_requested_by_whoever_clicked(web: SlackBot) -> None:
    body = pd_delivery("incident.triggered")
    assert (
        post(web, "/alerts/pagerduty", body, **{"X-PagerDuty-Signature": signed(body, NEW)}).status_code
        == 200
    )
    store = AlertStore(web.redis, web.keys)
    group = wait_for(
        lambda: (web.work(), store.group(group_id("pagerduty", "PGR0VU2")))[1], what="the thread"
    )
    assert not group.run_id  # investigate: button
    clicked = web.control.click(
        group.root_ts, "U_BOB", action_id="chatops_alert_investigate", channel=ALERT_CHANNEL
    )["payload"]
    web.settle()
    started = wait_for(lambda: (g := store.group(group.id)) is not None and g.run_id and g, what="the run")
    record = web.service.get(started.run_id)
    assert record is not None and record.requester == "U_BOB" and record.thread_ts == group.root_ts
    # The web process redrew the root in Slack at once: no button, and who started it.
    root = next(m for m in web.control.messages(ALERT_CHANNEL) if m["ts"] == group.root_ts)
    shown = json.dumps(root.get("blocks") or [])
    assert "Investigation started by <@U_BOB>" in shown and "chatops_alert_investigate" not in shown
    # A second click from a client that still shows the button (two people at once) starts
    # nothing new, and its clicker is told why.
    late = {**clicked, "user": {**clicked["user"], "id": "U_ALICE"}}
    body = urllib.parse.urlencode({"payload": json.dumps(late)}).encode()
    assert signed_post(web.events_url, body, content_type="application/x-www-form-urlencoded").status == 200
    web.settle()
    notes = [c["params"] for c in web.calls("chat.postEphemeral") if c["params"]["user"] == "U_ALICE"]
    assert any("already running" in note["text"] for note in notes), notes
    again = store.group(group.id)
    assert again is not None and again.run_id == started.run_id
    assert web.service.active_run(ALERT_CHANNEL, group.root_ts) == started.run_id


DOC = Path(__file__).resolve().parents[3] / "docs" / "ALERTS.md"


def doc_block(marker: str, language: str) -> str:
    """The fenced block after ``<!-- marker -->`` in docs/ALERTS.md: the docs are what is tested."""
    text = DOC.read_text()
    after = text[text.index(f"<!-- {marker} -->") :]
    start = after.index(f"```{language}\n") + len(f"```{language}\n")
    return after[start : after.index("```", start)]


def test_grafana_configured_as_the_docs_show_is_accepted(web: SlackBot) -> None:
    (receiver,) = yaml.safe_load(doc_block("grafana-contact-point", "yaml"))["contactPoints"][0]["receivers"]
    settings = receiver["settings"]
    assert receiver["type"] == "webhook" and settings["httpMethod"] == "POST"
    path = httpx.URL(settings["url"]).path
    header = f"{settings['authorization_scheme']} {settings['authorization_credentials']}"
    body = json.dumps(GRAFANA_BODY).encode()
    assert post(web, path, body, Authorization=header).status_code == 401  # the placeholder is no token
    header = header.replace("CHATOPS_ALERTS_TOKEN_VALUE", TOKEN)
    assert post(web, path, body, Authorization=header).text == "accepted"


def test_pagerduty_subscribed_as_the_docs_show_has_every_event_applied(web: SlackBot) -> None:
    subscription = json.loads(doc_block("pagerduty-subscription", "json"))["webhook_subscription"]
    path = httpx.URL(subscription["delivery_method"]["url"]).path
    store = AlertStore(web.redis, web.keys)
    statuses = []
    for event_type in subscription["events"]:
        body = pd_delivery(event_type)
        answer = post(web, path, body, **{"X-PagerDuty-Signature": signed(body, NEW)})
        assert (answer.status_code, answer.text) == (200, "accepted"), event_type
        web.work()
        group = store.group(group_id("pagerduty", "PGR0VU2"))
        assert group is not None
        statuses.append((event_type, group.status, group.notifications))
    assert statuses == [
        ("incident.triggered", "firing", 1),
        ("incident.acknowledged", "firing", 2),
        ("incident.resolved", "resolved", 3),
    ]
