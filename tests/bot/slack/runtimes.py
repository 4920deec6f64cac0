"""The worker runtime of the ``chatops worker`` subprocess in the web-process test.

``CHATOPS_RUNTIME=tests.bot.slack.runtimes:slack_runtime``: the plan model and file tools of
``tests.bot.runtimes`` (executions logged under ``CHATOPS_TEST_DIR``), shown in Slack by the real
``SlackPresenter`` (which talks to the emulator at ``SLACK_API_URL``).
"""

from __future__ import annotations

import os
from pathlib import Path

import redis

from bot.keys import Keys
from bot.runs.runtime import Runtime
from bot.runs.service import RunOptions
from bot.settings import Settings
from bot.slack.delivery.client import make_client
from bot.slack.delivery.presenter import SlackPresenter
from tests.bot.runtimes import file_tools, plan_model


def slack_runtime(settings: Settings) -> Runtime:
    client = redis.Redis.from_url(settings.redis_url)
    keys = Keys(settings.chatops_redis_prefix)
    return Runtime(
        redis=client,
        keys=keys,
        options=RunOptions.from_settings(settings),
        models=[plan_model()],
        tools=file_tools(Path(os.environ["CHATOPS_TEST_DIR"])),
        presenter=SlackPresenter(make_client(settings), client, keys),
        owns_connection=True,
    )
