"""An alert sender's words are inert in every field Slack renders, the ``text`` fallback included.

The notification ``text`` of a message is parsed by Slack like its blocks (a ``<!channel>`` there
pings the channel, a ``<url|label>`` is a disguised link): a sender who names its alert
``<!channel>`` must not reach anyone through the root or the thread's notes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.alerts.store import AlertStore, group_id
from emulator.slack.live import live_in_message
from tests.bot.alerts.conftest import ALERT_CHANNEL
from tests.support.slack_bot import SlackBot
from tests.support.waiting import wait_for

TOKEN = "alert-token-0123456789abcdef"
ROUTES = f"""
alerts:
  routes:
    - name: sre
      matchers: ['team="sre"']
      channel: {ALERT_CHANNEL}
      investigate: button
"""
HOSTILE_NAME = "<!channel> DiskFull <https://evil.example|grafana> @here"
GROUP_KEY = '{}:{alertname="DiskFull"}'


def alert(fingerprint: str, status: str) -> dict[str, Any]:
    return {
        "status": status,
        "labels": {"alertname": HOSTILE_NAME, "team": "sre", "instance": "web-03:9100"},
        "annotations": {"summary": "disk full <@U0BOSS>"},
        "startsAt": "2026-12-01T10:00:00Z",
        "endsAt": "0001-01-01T00:00:00Z" if status == "firing" else "2026-12-01T10:05:00Z",
        "generatorURL": "http://prometheus.example/graph?g0.expr=up",
        "fingerprint": fingerprint,
    }


def notification(status: str, *alerts: dict[str, Any]) -> bytes:
    return json.dumps(
        {
            "version": "4",
            "groupKey": GROUP_KEY,
            "truncatedAlerts": 0,
            "status": status,
            "receiver": "chatops",
            "groupLabels": {},
            "commonLabels": {"team": "sre"},
            "commonAnnotations": {},
            "externalURL": "http://alertmanager.example",
            "alerts": list(alerts),
        }
    ).encode()


@pytest.fixture
def web(make_bot: Callable[..., SlackBot], tmp_path: Path) -> SlackBot:
    routes = tmp_path / "alerts.yaml"
    routes.write_text(ROUTES)
    return make_bot(tools=[], chatops_alerts_file=routes, chatops_alerts_token=TOKEN)


def send(bot: SlackBot, body: bytes) -> None:
    assert bot.server is not None
    response = httpx.post(
        f"{bot.server.url}/alerts/alertmanager",
        content=body,
        headers={"Authorization": f"Bearer {TOKEN}"},
        trust_env=False,
        timeout=10,
    )
    assert response.status_code == 200, response.text


def test_a_senders_mentions_and_disguised_links_are_inert_in_every_text_field(web: SlackBot) -> None:
    store = AlertStore(web.redis, web.keys)
    gid = group_id("alertmanager", GROUP_KEY)
    send(web, notification("firing", alert("f1", "firing"), alert("f2", "firing")))
    group = wait_for(lambda: (web.work(), store.group(gid))[1], what="the alert thread")
    # One alert of the group ends while the other still fires: the job posts a note in the thread.
    send(web, notification("firing", alert("f1", "resolved"), alert("f2", "firing")))
    wait_for(
        lambda: (web.work(), len(web.control.thread(ALERT_CHANNEL, group.root_ts)) > 1)[1], what="a note"
    )
    send(web, notification("resolved", alert("f1", "resolved"), alert("f2", "resolved")))
    wait_for(
        lambda: (web.work(), (g := store.group(gid)) is not None and g.status == "resolved")[1],
        what="the resolved group",
    )
    web.settle()
    posted = web.control.thread(ALERT_CHANNEL, group.root_ts)
    updates = [c["params"] for c in web.calls("chat.update") if c["params"].get("ts") == group.root_ts]
    sent = [m for m in posted if m.get("user") != "U_ALERTS"] + updates
    assert len(posted) >= 2 and updates, (posted, updates)
    for message in sent:
        blocks = message.get("blocks")
        shown = {
            "text": message.get("text"),
            "blocks": json.loads(blocks) if isinstance(blocks, str) else blocks,
        }
        live = live_in_message(shown)
        assert [item for item in live if item.kind != "link"] == [], (shown, live)
        assert not [item for item in live if item.disguised], (shown, live)
        assert "DiskFull" in str(shown["text"])  # the fallback still says what fired
