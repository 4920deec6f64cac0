"""``bot.web.alert_receiver`` behind sentinels: a webhook is acknowledged only once a replica has it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.bot.alerts.test_payloads import GRAFANA_BODY
from tests.bot.alerts.test_web_receivers import ROUTES, TOKEN, post
from tests.support.sentinel_group import MASTER_NAME, SentinelGroup, sentinel_group
from tests.support.slack_bot import SlackBot
from tests.support.slack_workspace import QUIET


@pytest.fixture
def group(tmp_path: Path) -> Iterator[SentinelGroup]:
    yield from sentinel_group(tmp_path / "sentinel")


def test_a_webhook_no_replica_confirmed_gets_a_503_its_sender_retries(
    group: SentinelGroup, make_bot: Callable[..., SlackBot], tmp_path: Path
) -> None:
    routes = tmp_path / "alerts.yaml"
    routes.write_text(ROUTES)
    bot = make_bot(
        tools=[],
        chatops_alerts_file=routes,
        chatops_alerts_token=TOKEN,
        redis_url="redis://127.0.0.1:9/0",  # behind sentinels its host is never used
        redis_sentinels=group.addresses,
        redis_sentinel_master=MASTER_NAME,
        # Generous: the retry must not miss a replica that is busy, not gone.
        tuning=replace(QUIET, replica_wait_ms=2000),
    )
    body = json.dumps(GRAFANA_BODY).encode()
    group.replica.kill()
    group.wait_replicas(group.master, 0)
    refused = post(bot, "/alerts/grafana", body, Authorization=f"Bearer {TOKEN}")
    assert refused.status_code == 503 and "not yet on a replica" in refused.text
    group.replica.start(replica_of=group.master.port)
    group.wait_replicas(group.master, 1)
    answer = post(bot, "/alerts/grafana", body, Authorization=f"Bearer {TOKEN}")  # the sender's retry
    assert answer.status_code == 200, answer.text
