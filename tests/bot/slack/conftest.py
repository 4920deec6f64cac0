"""End-to-end fixtures: the Slack emulator, the bot's web app on a real port, a real RQ worker.

Every test gets its own emulator, web server (port 0), Redis key prefix and RQ queue, so tests
run in parallel. The worker is RQ's in-process ``SimpleWorker`` run in bursts (``SlackBot.work``)
with the Slack presenter talking to the emulator, the scripted plan model and file-logging tools.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest
import redis

from agent.chat import ChatModel
from agent.keys import Keys
from agent.redis_memory import as_text
from agent.tooling import Tool, ToolCategory, ToolResult
from agent.types import RunStatus
from bot.runs.runtime import Runtime
from bot.runs.service import RunOptions, RunService
from bot.runs.worker import ChatopsSimpleWorker
from bot.settings import Settings
from bot.slack.client import make_client
from bot.slack.presenter import SlackPresenter
from bot.slack.runtime import WebRuntime
from bot.slack.web import WebApp
from emulator.slack import SlackEmulator, SlackEmulatorClient, WorkspaceConfig, signature
from tests.bot.runtimes import FileTool, executions, file_tools, plan_model
from tests.support.waiting import wait_for

SECRET = "e2e-signing-secret"
TOKEN = "xoxb-e2e-token"
CHANNEL = "C_INCIDENT"
BOT_USER = "U_OPS"

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def buttons(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for b in message.get("blocks") or [] if b["type"] == "actions" for e in b["elements"]]


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    request_queue_size = 128  # as a real server's backlog: Slack delivers many events at once


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None


class WebServer:
    """A WSGI app on 127.0.0.1 (port 0) in a background thread, for fast tests of the web app.

    The production server (``chatops web``) is exercised by ``test_web_process`` and
    ``tests/reliability/test_slow_clients.py``.
    """

    def __init__(self, app: Any, server: WSGIServer | None = None) -> None:
        """Serve ``app``; ``server`` replaces the default thread-per-request server (already bound)."""
        if server is None:
            server = make_server(
                "127.0.0.1", 0, app, server_class=_ThreadingServer, handler_class=QuietHandler
            )
        else:
            server.set_app(app)
        self._server = server
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})
        self._thread.daemon = True
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class PreviewedFileTool(FileTool):
    """A destructive ``FileTool`` with a dry run, as destructive tools have."""

    def __init__(self, name: str, directory: Path) -> None:
        super().__init__(name, ToolCategory.DESTRUCTIVE, directory)

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        return ToolResult(f"would delete 3 files ({arguments})")


@dataclass(frozen=True)
class HttpResult:
    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def http(url: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> HttpResult:
    request = urllib.request.Request(url, data=body, headers=headers or {}, method="POST" if body else "GET")
    try:
        with _OPENER.open(request, timeout=10) as response:
            return HttpResult(response.status, response.read())
    except urllib.error.HTTPError as error:
        return HttpResult(error.code, error.read())


def signed_post(
    url: str,
    body: bytes,
    *,
    secret: str = SECRET,
    timestamp: int | None = None,
    content_type: str = "application/json",
    extra: dict[str, str] | None = None,
) -> HttpResult:
    """POST as Slack does: ``X-Slack-Signature`` over ``v0:{timestamp}:{body}``."""
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    headers = {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": signature(secret, stamp, body),
        **(extra or {}),
    }
    return http(url, body, headers)


def event_envelope(event: dict[str, Any], event_id: str) -> dict[str, Any]:
    """An ``event_callback`` as Slack posts it (for requests a test sends itself)."""
    return {
        "token": "unused",
        "team_id": "T_EMULATOR",
        "api_app_id": "A_OPS",
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": int(time.time()),
        "authorizations": [{"team_id": "T_EMULATOR", "user_id": BOT_USER, "is_bot": True}],
    }


def make_settings(
    emulator: SlackEmulator, redis: str, key_prefix: str, queue: str, **overrides: Any
) -> Settings:
    values: dict[str, Any] = {
        "slack_bot_token": TOKEN,
        "slack_signing_secret": SECRET,
        "slack_api_url": emulator.api_url,
        "redis_url": redis,
        "chatops_redis_prefix": key_prefix,
        "chatops_queue": queue,
        "chatops_retention_days": 1,
        "chatops_lease_ttl_seconds": 5.0,
        "chatops_job_retries": 1,
        "chatops_approval_timeout_seconds": 600,
        "chatops_max_iterations": 10,
        "chatops_deadline_seconds": 60.0,
        "web_host": "127.0.0.1",
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


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
        self.runtime = WebRuntime(self.settings)
        self.server = WebServer(WebApp(self.runtime))
        self.emulator.set_events_url(self.events_url)
        return self

    def worker_runtime(self) -> Runtime:
        presenter = SlackPresenter(make_client(self.settings), self.redis, self.keys)
        self.presenters.append(presenter)
        return Runtime(
            self.redis, self.keys, RunOptions.from_settings(self.settings), self.models, self.tools, presenter
        )

    def work(self) -> None:
        """Run every due job in this process (RQ SimpleWorker, burst) until the queue is empty."""
        worker = ChatopsSimpleWorker(
            [self.settings.chatops_queue], connection=self.redis, runtime_factory=self.worker_runtime
        )
        worker.work(burst=True, with_scheduler=True)

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
        if self.server is not None:
            self.server.close()


@pytest.fixture
def emulator() -> Iterator[SlackEmulator]:
    config = WorkspaceConfig(
        bot_token=TOKEN, signing_secret=SECRET, event_timeout=3.0, retry_delays=(0.0, 0.3, 0.3)
    )
    with SlackEmulator(config) as slack:
        yield slack


@pytest.fixture
def control(emulator: SlackEmulator) -> SlackEmulatorClient:
    return SlackEmulatorClient(emulator.url)


@pytest.fixture
def make_bot(
    emulator: SlackEmulator,
    control: SlackEmulatorClient,
    redis_client: redis.Redis,
    redis_url: str,
    key_prefix: str,
    queue_name: str,
    tmp_path: Path,
) -> Iterator[Callable[..., SlackBot]]:
    """``make_bot(**settings_overrides)``: a served bot with the plan model and file tools."""
    bots: list[SlackBot] = []

    def build(
        models: Sequence[ChatModel] | None = None, tools: Sequence[Tool] | None = None, **overrides: Any
    ) -> SlackBot:
        settings = make_settings(emulator, redis_url, key_prefix, queue_name, **overrides)
        bot = SlackBot(
            settings,
            emulator,
            control,
            redis_client,
            tmp_path,
            models or [plan_model()],
            tools
            if tools is not None
            else [*file_tools(tmp_path), PreviewedFileTool("delete_files", tmp_path)],
        ).serve()
        bots.append(bot)
        return bot

    yield build
    for bot in bots:
        bot.close()


@pytest.fixture
def bot(make_bot: Callable[..., SlackBot]) -> SlackBot:
    return make_bot()
