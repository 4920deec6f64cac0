"""A restart's check also requests the service's health URL where the inventory gives one (issue
34), through the egress policy like any ``http_check``: a real local HTTP server answers, the web
app, the Slack emulator, a worker and the real ``service_restart`` (fake ``systemctl``) run it.

Attacks: an inventory URL the egress policy does not allow is never requested (the check fails);
a model cannot name a URL of its own (the call names only the service).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import redis

from agent.scripted import FunctionModel, ScriptItem, tool_call
from agent.types import Request, RunStatus
from bot.keys import Keys
from bot.observability.audit import AuditKind
from bot.slack.rendering import render
from tests.bot.fleet.test_routing import fleet_tools, write_inventory
from tests.bot.slack.test_checks_e2e import fake_systemctl, thread_text  # noqa: F401 - a fixture
from tests.support.slack_bot import SlackBot
from tests.support.waiting import wait_for


class HealthServer:
    """A local HTTP server answering ``status`` on every path; ``paths`` lists what it was asked."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.paths: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.paths.append(self.path)
                body = b"ok" if outer.status < 400 else b"config error"
                self.send_response(outer.status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def servers() -> Iterator[Callable[[int], HealthServer]]:
    started: list[HealthServer] = []

    def start(status: int) -> HealthServer:
        started.append(HealthServer(status))
        return started[-1]

    yield start
    for server in started:
        server.close()


class RestartModel:
    """Restarts ``api`` on ``ops-box`` (with ``extra`` arguments), then answers."""

    def __init__(self, **extra: Any) -> None:
        self.read: list[str] = []
        self.extra = extra

    def step(self, request: Request) -> ScriptItem:
        results = [m for m in request.messages if m.role == "tool"]
        if not results:
            return tool_call("service_restart", "call_0", target="ops-box", service="api", **self.extra)
        self.read.append(results[-1].content or "")
        return "done"


def health_bot(
    make_bot: Callable[..., SlackBot],
    state: Path,
    redis_client: redis.Redis,
    keys: Keys,
    model: RestartModel,
    url: str,
    allow: str,
) -> SlackBot:
    env = {"PATH": f"{state / 'bin'}:/usr/bin:/bin", "FAKE_SYSTEMCTL_DIR": str(state)}
    box = {"name": "ops-box", "via": "local", "health": {"api": url}}
    inventory = write_inventory(state, box)
    settings = {"chatops_service_backend": "systemd", "chatops_egress_allow": [allow]}
    tools = fleet_tools(state, redis_client, keys, inventory, env=env, **settings)
    return make_bot(
        models=[FunctionModel(model.step, model="restart")],
        tools=[tools["service_restart"], tools["service_status"], tools["http_check"]],
        chatops_check_seconds=3,
    )


def approve(bot: SlackBot) -> tuple[str, str, str]:
    ts = bot.mention("restart the api on ops-box")
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.AWAITING_APPROVAL
    card = wait_for(lambda: next((m for m in bot.bot_replies(ts) if "Approval" in m["text"]), None))
    bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_APPROVE)
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    return ts, run_id, json.dumps(card["blocks"])


def test_the_card_shows_the_health_url_and_a_healthy_answer_verifies_the_restart(
    make_bot: Callable[..., SlackBot],
    fake_systemctl: Path,  # noqa: F811 - the fixture
    redis_client: redis.Redis,
    keys: Keys,
    servers: Callable[[int], HealthServer],
) -> None:
    server = servers(200)
    url = f"http://127.0.0.1:{server.port}/health"
    model = RestartModel()
    bot = health_bot(make_bot, fake_systemctl, redis_client, keys, model, url, f"127.0.0.1:{server.port}")
    ts, run_id, card = approve(bot)
    assert "*Then checks*" in card and f'http_check {{\\"url\\":\\"{url}\\"}}' in card
    assert server.paths == ["/health"]
    [read] = model.read
    assert "[E2] Verified: service_status" in read and f"Health: OK: GET {url} -> 200" in read
    [check] = [e for e in bot.service.audit.entries(run_id) if e.kind is AuditKind.CHECK_ENDED]
    assert check.fields["passed"] == "1"
    assert wait_for(lambda: "Verified" in thread_text(bot, ts) or None)


def test_an_unhealthy_answer_fails_the_check_though_the_unit_is_active(
    make_bot: Callable[..., SlackBot],
    fake_systemctl: Path,  # noqa: F811 - the fixture
    redis_client: redis.Redis,
    keys: Keys,
    servers: Callable[[int], HealthServer],
) -> None:
    server = servers(503)
    url = f"http://127.0.0.1:{server.port}/health"
    model = RestartModel()
    bot = health_bot(make_bot, fake_systemctl, redis_client, keys, model, url, f"127.0.0.1:{server.port}")
    ts, run_id, _ = approve(bot)
    assert server.paths and set(server.paths) == {"/health"}
    [read] = model.read
    assert "[E2] Check failed: http_check" in read and "active (running)" in read and "503" in read
    [check] = [e for e in bot.service.audit.entries(run_id) if e.kind is AuditKind.CHECK_ENDED]
    assert (check.fields["tool"], check.fields["passed"]) == ("http_check", "0")
    assert wait_for(lambda: "Check failed" in thread_text(bot, ts) or None)


def test_an_inventory_url_the_egress_policy_does_not_allow_is_never_requested(
    make_bot: Callable[..., SlackBot],
    fake_systemctl: Path,  # noqa: F811 - the fixture
    redis_client: redis.Redis,
    keys: Keys,
    servers: Callable[[int], HealthServer],
) -> None:
    """A hostile inventory points the health URL at a place the operator's egress rules do not
    list (another port here: the cloud metadata address or Redis alike): the check fails and the
    place is never asked."""
    allowed, elsewhere = servers(200), servers(200)
    url = f"http://127.0.0.1:{elsewhere.port}/latest/meta-data"
    model = RestartModel()
    bot = health_bot(make_bot, fake_systemctl, redis_client, keys, model, url, f"127.0.0.1:{allowed.port}")
    _, run_id, _ = approve(bot)
    assert elsewhere.paths == [] and allowed.paths == []
    [read] = model.read
    assert "Check failed: http_check" in read or "Check not run" in read
    [check] = [e for e in bot.service.audit.entries(run_id) if e.kind is AuditKind.CHECK_ENDED]
    assert check.fields["passed"] == "0"


def test_a_model_cannot_name_a_health_url_of_its_own(
    make_bot: Callable[..., SlackBot],
    fake_systemctl: Path,  # noqa: F811 - the fixture
    redis_client: redis.Redis,
    keys: Keys,
    servers: Callable[[int], HealthServer],
) -> None:
    server, hostile = servers(200), servers(200)
    url = f"http://127.0.0.1:{server.port}/health"
    model = RestartModel(health_url=f"http://127.0.0.1:{hostile.port}/")
    bot = health_bot(make_bot, fake_systemctl, redis_client, keys, model, url, f"127.0.0.1:{server.port}")
    _, _, card = approve(bot)
    assert f'http_check {{\\"url\\":\\"http://127.0.0.1:{hostile.port}' not in card  # never its check
    # The call the model wrote is refused as invalid when it runs: no restart, no request anywhere.
    assert hostile.paths == [] and server.paths == []
    [read] = model.read
    assert "health_url" in read and "Restarted" not in read
    assert not (fake_systemctl / "started").exists()
