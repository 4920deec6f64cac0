"""A reply in an alert's thread continues its investigation (issue 27): the worker's presenter
remembers the alert run as the thread's last run when it posts the run's card, so the thread goes
on as a mentioned one does (``bot.slack.continuation``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from agent.redis_util import as_text
from agent.types import RunStatus
from bot.alerts.store import AlertStore, group_id
from bot.slack.continuation import last_run_key
from emulator.models.openai_server import OpenAIServer, Reply
from tests.bot.alerts.conftest import ALERT_CHANNEL as ALERTS
from tests.bot.slack.test_thread_continues import DISK, DiskTool, check_then_answer, client, llm, request_text
from tests.support.slack_bot import SlackBot
from tests.support.slack_http import http
from tests.support.waiting import wait_for

__all__ = ["llm"]


def last_run_in(bot: SlackBot, channel: str, thread_ts: str) -> str | None:
    return as_text(bot.redis.get(last_run_key(bot.keys, channel, thread_ts)))


ALERT_TOKEN = "alert-token-0123456789abcdef"
GROUP_KEY = '{}:{alertname="DiskFull"}'
# Every alert to the alerts channel, its investigation started at once.
AUTO_ROUTES = f"alerts:\n  routes:\n    - name: all\n      matchers: []\n      channel: {ALERTS}\n      investigate: auto\n"
ALERT = {
    "receiver": "chatops",
    "status": "firing",
    "alerts": [
        {
            "status": "firing",
            "labels": {"alertname": "DiskFull", "instance": "web-03:9100", "severity": "critical"},
            "annotations": {"summary": "disk full on web-03"},
            "startsAt": "2026-12-01T17:12:41Z",
            "endsAt": "0001-01-01T00:00:00Z",
        }
    ],
    "groupLabels": {"alertname": "DiskFull"},
    "commonLabels": {"alertname": "DiskFull", "instance": "web-03:9100", "severity": "critical"},
    "commonAnnotations": {"summary": "disk full on web-03"},
    "externalURL": "http://alertmanager.example",
    "version": "4",
    "groupKey": GROUP_KEY,
}


def test_a_reply_in_an_alert_thread_continues_its_investigation(
    llm: OpenAIServer, make_bot: Callable[..., SlackBot], tmp_path: Path
) -> None:
    routes = tmp_path / "alerts.yaml"
    routes.write_text(AUTO_ROUTES)
    llm.enqueue(
        *check_then_answer("web-03's /var is 97% full: old logs."), Reply(text="Cleaning plan ready.")
    )
    bot = make_bot(
        models=[client(llm)],
        tools=[DiskTool(DISK)],
        chatops_alerts_file=routes,
        chatops_alerts_token=ALERT_TOKEN,
    )
    assert bot.server is not None
    posted = http(
        f"{bot.server.url}/alerts/alertmanager",
        json.dumps(ALERT).encode(),
        {"Authorization": f"Bearer {ALERT_TOKEN}", "Content-Type": "application/json"},
    )
    assert posted.status == 200, posted.body
    bot.work()
    store = AlertStore(bot.redis, bot.keys)
    group = wait_for(lambda: store.group(group_id("alertmanager", GROUP_KEY)), what="the alert's thread")
    assert group.run_id and bot.status(group.run_id) is RunStatus.COMPLETED

    bot.control.post_message(ALERTS, "U_BOB", "clean the old logs on web-03", thread_ts=group.root_ts)
    bot.settle()
    earlier = group.run_id

    def new_run() -> str | None:
        run_id = last_run_in(bot, ALERTS, group.root_ts)
        return run_id if run_id != earlier else None

    follow_up = wait_for(new_run, what="a follow-up run")
    bot.work()
    record = bot.service.get(follow_up)
    assert record is not None and record.follows == group.run_id and record.requester == "U_BOB"
    told = request_text(llm.requests[2])
    assert "DiskFull" in told and DISK in told and "old logs." in told
