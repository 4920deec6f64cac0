"""``SlackBot``: the bot under test end to end: its settings, its web app on a port (0), the Slack
emulator, and an in-process RQ worker run in bursts with the Slack presenter talking to the emulator.

``PreviewedFileTool`` is the destructive tool the end-to-end bot has besides the file tools.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from agent.chat import ChatModel
from agent.redis_util import as_text
from agent.tooling import Tool, ToolCategory, ToolResult
from agent.types import RunStatus
from bot.alerts.jobs import AlertJobs
from bot.changes.reader import ChangeReader
from bot.keys import Keys
from bot.memory.similar import IncidentMemory
from bot.ops.compose_web import web_app, web_runtime
from bot.runs.incident_capture import ChannelFacts
from bot.runs.queueing import worker_queue_names
from bot.runs.runtime import Runtime
from bot.runs.service import RunOptions, RunService
from bot.runs.worker import ChatopsSimpleWorker
from bot.settings import Settings
from bot.slack.delivery.alert_presenter import SlackAlertPresenter
from bot.slack.delivery.client import make_client
from bot.slack.delivery.presenter import SlackPresenter
from bot.slack.delivery.sender import process_sender
from bot.slack.handlers.runtime import WebRuntime, WebTuning
from bot.slack.policy_identity import worker_policy
from emulator.slack import SlackEmulator, SlackEmulatorClient
from tests.bot.runtimes import FileTool, executions
from tests.support.after_answer import AfterAnswerPools
from tests.support.slack_workspace import BOT_USER, CHANNEL, QUIET, buttons
from tests.support.waiting import wait_for, wait_until
from tests.support.web_server import WebServer
from tools.runbooks import RunbookLibrary

SETTLE_TIMEOUT = 30.0


def drain_sender(run_ids: Sequence[str]) -> None:
    """Until the process's Slack sender holds no delivery of ``run_ids`` (queued, retried, in flight)."""
    sender = process_sender()
    for run_id in run_ids:
        wait_until(
            lambda run_id=run_id: not sender.pending(run_id), SETTLE_TIMEOUT, f"run {run_id}'s deliveries"
        )


def stored_run_ids(client: redis.Redis, keys: Keys) -> list[str]:
    """Every run stored under ``keys``' prefix (``{prefix}run:<id>``, not the keys under a run)."""
    pattern = f"{keys.prefix}run:*"
    skip = len(keys.prefix) + len("run:")
    names = (as_text(key) or "" for key in client.scan_iter(match=pattern, count=1000))
    return [name[skip:] for name in names if ":" not in name[skip:]]


class PreviewedFileTool(FileTool):
    """A destructive ``FileTool`` with a dry run, as destructive tools have."""

    def __init__(self, name: str, directory: Path) -> None:
        super().__init__(name, ToolCategory.DESTRUCTIVE, directory)

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        return ToolResult(f"would delete 3 files ({arguments})")


@dataclass
class SlackBot:
    """The bot under test: settings, its web app on a port, the emulator, a worker on demand."""

    settings: Settings
    emulator: SlackEmulator
    control: SlackEmulatorClient
    redis: redis.Redis
    directory: Path
    models: Sequence[ChatModel]
    tools: Sequence[Tool]
    server: WebServer | None = None
    runtime: WebRuntime | None = None
    presenters: list[SlackPresenter] = field(default_factory=list)
    pools: AfterAnswerPools = field(default_factory=AfterAnswerPools)
    clock: Callable[[], float] = time.time  # the web process's clock (``WebRuntime.clock``)
    # The web process's timings (``WebRuntime.tuning``); the worker's approver cache is its too.
    tuning: WebTuning = QUIET
    # The worker's redactor (``Runtime.redact`` and the presenter's), as ``bot.ops.compose`` gives both.
    redact: Callable[[str], str] | None = None
    # The worker's runbooks (``Runtime.runbooks``: what an alert's run is told; their tools go in ``tools``).
    runbooks: RunbookLibrary | None = None
    # The worker's incident memory (``Runtime.memory``) and what it knows of channels.
    memory: IncidentMemory | None = None
    channel_facts: ChannelFacts | None = None
    # The worker's change journal readers (``Runtime.changes``: recent_changes, alert runs' changes).
    changes: ChangeReader | None = None

    @property
    def keys(self) -> Keys:
        return Keys(self.settings.chatops_redis_prefix)

    @property
    def service(self) -> RunService:
        return RunService(self.redis, self.keys, RunOptions.from_settings(self.settings))

    @property
    def events_url(self) -> str:
        assert self.server is not None
        return f"{self.server.url}/slack/events"

    def serve(self) -> SlackBot:
        self.runtime = web_runtime(self.settings, clock=self.clock, tuning=self.tuning)
        self.server = WebServer(web_app(self.runtime, pools=self.pools))
        self.emulator.set_events_url(self.events_url)
        return self

    def worker_runtime(self) -> Runtime:
        presenter = SlackPresenter(
            make_client(self.settings),
            self.redis,
            self.keys,
            streaming=self.settings.chatops_slack_streaming == "auto",
            redact=self.redact,
        )
        self.presenters.append(presenter)
        return Runtime(
            self.redis,
            self.keys,
            RunOptions.from_settings(self.settings),
            self.models,
            self.tools,
            presenter,
            redact=self.redact,
            alerts=AlertJobs(SlackAlertPresenter(make_client(self.settings))),
            runbooks=self.runbooks,
            memory=self.memory,
            channel_facts=self.channel_facts,
            changes=self.changes,
            policy=worker_policy(  # CHATOPS_POLICY_FILE
                self.settings, self.redis, self.keys, cache_seconds=self.tuning.approver_cache_seconds
            ),
        )

    def work(self) -> None:
        """Run every due job in this process (RQ SimpleWorker, burst) until the queue is empty.

        It settles first: a mention posted just before is still being delivered to the web
        process on a loaded machine, and a worker that looked then would find the queue empty."""
        self.settle()
        worker = ChatopsSimpleWorker(
            worker_queue_names(self.settings.chatops_queue),
            connection=self.redis,
            runtime_factory=self.worker_runtime,
        )
        worker.work(burst=True, with_scheduler=True)

    def settle(self) -> None:
        """Wait until Slack has delivered every event it will (its retries too) and the web app has
        done everything its answers handed on (reactions, notices, redraws, ephemeral notes).

        What a request would wrongly do in Slack is done by then: it is handed to a pool before the
        answer, and the answer comes before the delivery ends. The last look at the deliveries
        covers the events of the bot's own posts, which hand nothing on."""
        deliveries = self.emulator.core.deliverer
        assert deliveries.wait_idle(SETTLE_TIMEOUT), "Slack is still delivering events"
        wait_until(self.pools.idle, SETTLE_TIMEOUT, "the web app's work after its answers")
        assert deliveries.wait_idle(SETTLE_TIMEOUT), "Slack is still delivering events"

    # -- acting as people -----------------------------------------------------------------------

    def say(self, text: str, user: str = "U_ALICE", thread_ts: str | None = None) -> str:
        """Post as ``user`` in the incident channel; returns the message ts."""
        posted = self.control.post_message(CHANNEL, user, text, thread_ts=thread_ts)
        return str(posted["ts"])

    def mention(self, text: str, user: str = "U_ALICE", thread_ts: str | None = None) -> str:
        return self.say(f"<@{BOT_USER}> {text}", user, thread_ts)

    # -- reading --------------------------------------------------------------------------------

    def thread(self, ts: str) -> list[dict[str, Any]]:
        return self.control.thread(CHANNEL, ts)

    def bot_replies(self, ts: str) -> list[dict[str, Any]]:
        return [m for m in self.thread(ts)[1:] if m.get("user") == BOT_USER]

    def message(self, thread_ts: str, ts: str) -> dict[str, Any]:
        return next(m for m in self.thread(thread_ts) if m["ts"] == ts)

    def redrawn(self, thread_ts: str, ts: str) -> dict[str, Any]:
        """The message at ``ts`` once its buttons are gone (an approval card after the decision)."""

        def probe() -> dict[str, Any] | None:
            message = self.message(thread_ts, ts)
            return None if buttons(message) else message

        return wait_for(probe, what=f"message {ts} without buttons")

    def run_id(self, thread_ts: str) -> str:
        def probe() -> str | None:
            return as_text(self.redis.get(self.keys.slack("thread_last_run", CHANNEL, thread_ts)))

        return wait_for(probe, what=f"a run in thread {thread_ts}")

    def status(self, run_id: str) -> RunStatus:
        record = self.service.get(run_id)
        assert record is not None
        return record.status

    def executions(self, name: str) -> list[dict[str, Any]]:
        return executions(self.directory / f"{name}.log")

    def calls(self, method: str) -> list[dict[str, Any]]:
        return self.control.calls(method)

    def close(self) -> None:
        """Stop serving once nothing of this bot still talks to Slack: the web app's work after its
        answers and the process's sender's deliveries of its runs. A Slack error is counted under the
        test's prefix, which is deleted when the test ends: nothing may write there afterwards."""
        try:
            wait_until(self.pools.idle, SETTLE_TIMEOUT, "the web app's work after its answers")
            drain_sender(self.run_ids())
        finally:
            if self.server is not None:
                self.server.close()

    def run_ids(self) -> list[str]:
        return stored_run_ids(self.redis, self.keys)
