"""Past incidents in alert threads, end to end (the real web app, the worker's jobs in process, the
Slack emulator): the first alert's run is remembered; a second alert on the same host gets it in
its run's first model request and a "Similar:" note in its thread."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from agent.scripted import FunctionModel
from agent.types import Request
from bot.memory.similar import IncidentMemory
from bot.memory.store import IncidentStore
from bot.slack.delivery.channel_facts import SlackChannelFacts
from bot.slack.delivery.client import make_client
from tests.bot.alerts.conftest import ALERT_CHANNEL
from tests.bot.alerts.test_alert_runbooks import ROUTES, first_message, send
from tests.bot.alerts.test_alert_text_inert import TOKEN
from tests.support.slack_bot import SlackBot
from tests.support.waiting import wait_for


def test_a_second_alert_on_the_same_host_gets_the_first_as_similar(
    make_bot: Callable[..., SlackBot], tmp_path: Path
) -> None:
    requests: list[Request] = []

    def answer(request: Request) -> str:
        requests.append(request)
        return "The nginx access log filled /var on web-03."

    routes = tmp_path / "alerts.yaml"
    routes.write_text(ROUTES)
    bot = make_bot(
        models=[FunctionModel(answer)],
        tools=[],
        chatops_alerts_file=routes,
        chatops_alerts_token=TOKEN,
        chatops_channels=[],
    )
    store = IncidentStore(bot.redis, bot.keys, retention_days=180)
    bot.memory = IncidentMemory(store)
    bot.channel_facts = SlackChannelFacts(make_client(bot.settings))

    first = send(bot, "HighDiskUsage", "f1")
    wait_for(lambda: (bot.work(), store.listed())[1], what="the first run's incident")
    (remembered,) = store.listed()
    assert remembered.incident is not None and not remembered.incident.private  # a public channel
    assert remembered.incident.alert_name == "HighDiskUsage" and remembered.id == first.run_id

    second = send(bot, "DiskFull", "f2")
    wait_for(lambda: (bot.work(), len(requests) >= 2)[1], what="the second run's first request")
    told = first_message(requests, "DiskFull")
    assert "Similar past incidents" in told and first.run_id in told and "nginx access log" in told
    text = json.dumps(
        [n.get("blocks") or n.get("text") for n in bot.control.thread(ALERT_CHANNEL, second.root_ts)]
    )
    assert "Similar: " in text and "nginx access log filled" in text
