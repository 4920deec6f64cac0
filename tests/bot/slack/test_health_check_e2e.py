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
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import redis

from agent.scripted import FunctionModel, ScriptItem, tool_call
from agent.types import Request, RunStatus
from bot.keys import Keys
from bot.observability.audit import AuditKind
from tests.bot.fleet.test_routing import fleet_tools, write_inventory
from tests.bot.slack.test_checks_e2e import approve_restart, fake_systemctl, thread_text  # noqa: F401 - a fixture
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


@dataclass
class World:
    """The bot's parts a test builds its restart on: a fake ``systemctl``, Redis, local servers."""

    make_bot: Callable[..., SlackBot]
    state: Path
    redis_client: redis.Redis
    keys: Keys
    servers: Callable[[int], HealthServer]

    def bot(self, model: RestartModel, url: str, allow: int) -> SlackBot:
        """A bot whose inventory gives ``ops-box``'s api the health ``url``; egress allows
        127.0.0.1 on port ``allow`` only."""
        env = {"PATH": f"{self.state / 'bin'}:/usr/bin:/bin", "FAKE_SYSTEMCTL_DIR": str(self.state)}
        inventory = write_inventory(self.state, {"name": "ops-box", "via": "local", "health": {"api": url}})
        settings = {"chatops_service_backend": "systemd", "chatops_egress_allow": [f"127.0.0.1:{allow}"]}
        tools = fleet_tools(self.state, self.redis_client, self.keys, inventory, env=env, **settings)
        return self.make_bot(
            models=[FunctionModel(model.step, model="restart")],
            tools=[tools["service_restart"], tools["service_status"], tools["http_check"]],
            chatops_check_seconds=3,
        )

    def approved(self, model: RestartModel, url: str, allow: int) -> tuple[SlackBot, str, str, str]:
        """The restart asked, its card approved by Bob, the run finished: bot, thread, run, card."""
        bot = self.bot(model, url, allow)
        ts, run_id, card = approve_restart(bot)
        bot.work()
        assert bot.status(run_id) is RunStatus.COMPLETED
        return bot, ts, run_id, json.dumps(card["blocks"])


@pytest.fixture
def world(
    make_bot: Callable[..., SlackBot],
    fake_systemctl: Path,  # noqa: F811 - the fixture
    redis_client: redis.Redis,
    keys: Keys,
    servers: Callable[[int], HealthServer],
) -> World:
    return World(make_bot, fake_systemctl, redis_client, keys, servers)


def check_of(bot: SlackBot, run_id: str) -> dict[str, str]:
    [check] = [e for e in bot.service.audit.entries(run_id) if e.kind is AuditKind.CHECK_ENDED]
    return check.fields


def test_the_card_shows_the_health_url_and_a_healthy_answer_verifies_the_restart(world: World) -> None:
    server = world.servers(200)
    url = f"http://127.0.0.1:{server.port}/health"
    model = RestartModel()
    bot, ts, run_id, card = world.approved(model, url, server.port)
    assert "*Then checks*" in card and f'http_check {{\\"url\\":\\"{url}\\"}}' in card
    assert server.paths == ["/health"]
    [read] = model.read
    assert "[E2] Verified: service_status" in read and f"Health: OK: GET {url} -> 200" in read
    assert check_of(bot, run_id)["passed"] == "1"
    assert wait_for(lambda: "Verified" in thread_text(bot, ts) or None)


def test_an_unhealthy_answer_fails_the_check_though_the_unit_is_active(world: World) -> None:
    server = world.servers(503)
    model = RestartModel()
    bot, ts, run_id, _ = world.approved(model, f"http://127.0.0.1:{server.port}/health", server.port)
    assert server.paths and set(server.paths) == {"/health"}
    [read] = model.read
    assert "[E2] Check failed: http_check" in read and "active (running)" in read and "503" in read
    assert (check_of(bot, run_id)["tool"], check_of(bot, run_id)["passed"]) == ("http_check", "0")
    assert wait_for(lambda: "Check failed" in thread_text(bot, ts) or None)


def test_an_inventory_url_the_egress_policy_does_not_allow_is_never_requested(world: World) -> None:
    """A hostile inventory points the health URL at a place the operator's egress rules do not
    list (another port here: the cloud metadata address or Redis alike): the check fails and the
    place is never asked."""
    allowed, elsewhere = world.servers(200), world.servers(200)
    model = RestartModel()
    bot, _, run_id, _ = world.approved(
        model, f"http://127.0.0.1:{elsewhere.port}/latest/meta-data", allowed.port
    )
    assert elsewhere.paths == [] and allowed.paths == []
    [read] = model.read
    assert "Check failed: http_check" in read or "Check not run" in read
    assert check_of(bot, run_id)["passed"] == "0"


def test_a_model_cannot_name_a_health_url_of_its_own(world: World) -> None:
    server, hostile = world.servers(200), world.servers(200)
    model = RestartModel(health_url=f"http://127.0.0.1:{hostile.port}/")
    _, _, _, card = world.approved(model, f"http://127.0.0.1:{server.port}/health", server.port)
    assert f'http_check {{\\"url\\":\\"http://127.0.0.1:{hostile.port}' not in card  # never its check
    # The call the model wrote is refused as invalid when it runs: no restart, no request anywhere.
    assert hostile.paths == [] and server.paths == []
    [read] = model.read
    assert "health_url" in read and "Restarted" not in read
    assert not (world.state / "started").exists()
