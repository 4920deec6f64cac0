"""``chatops web`` (gunicorn, threaded workers) and ``chatops worker`` as real processes.

The production entry points end to end: Slack (the emulator) delivers a signed mention to the
gunicorn server, a forking RQ worker runs it and asks for approval, a click goes back through
gunicorn (a lazy listener decides and enqueues the resume), and the worker finishes the run.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from agent.keys import Keys
from agent.redis_memory import as_text
from agent.types import RunStatus
from bot.runs import RunOptions, RunService
from bot.settings import Settings
from bot.slack import render
from emulator.slack import SlackEmulator, SlackEmulatorClient
from tests.bot.runtimes import executions
from tests.bot.slack.conftest import BOT_USER, CHANNEL, SECRET, TOKEN, buttons, http, signed_post
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[3]
CHATOPS = str(Path(sys.executable).with_name("chatops"))

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def processes(
    emulator: SlackEmulator, redis_url: str, key_prefix: str, queue_name: str, tmp_path: Path
) -> Iterator[tuple[str, dict[str, str]]]:
    """``chatops web`` and ``chatops worker`` subprocesses; yields the web URL and their environment."""
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SLACK_BOT_TOKEN": TOKEN,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": emulator.api_url,
        "REDIS_URL": redis_url,
        "CHATOPS_REDIS_PREFIX": key_prefix,
        "CHATOPS_QUEUE": queue_name,
        "CHATOPS_LEASE_TTL_SECONDS": "5",
        "CHATOPS_RUNTIME": "tests.bot.slack.runtimes:slack_runtime",
        "CHATOPS_TEST_DIR": str(tmp_path),
        "PORT": str(port),
        "WEB_HOST": "127.0.0.1",
        "WEB_WORKERS": "2",
        "WEB_THREADS": "4",
    }
    env.pop("SLACK_APP_TOKEN", None)
    logs = tmp_path / "logs"
    logs.mkdir()
    started: list[subprocess.Popen[bytes]] = []
    for name, command in (("web", [CHATOPS, "web"]), ("worker", [CHATOPS, "worker"])):
        with open(logs / f"{name}.log", "wb") as log:
            started.append(
                subprocess.Popen(command, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
            )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _health(url) == 200, timeout=30, what="chatops web to answer /healthz")
        emulator.set_events_url(f"{url}/slack/events")
        yield url, env
    finally:
        for process in started:
            process.send_signal(signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for name in ("web", "worker"):
            sys.stderr.write(
                f"--- {name} log ---\n{(logs / f'{name}.log').read_text(errors='replace')[-4000:]}\n"
            )


def _health(url: str) -> int | None:
    try:
        return http(f"{url}/healthz").status
    except OSError:
        return None


def test_chatops_web_and_worker_run_the_approval_flow(
    processes: tuple[str, dict[str, str]],
    control: SlackEmulatorClient,
    redis_client: redis.Redis,
    tmp_path: Path,
) -> None:
    url, env = processes
    settings = Settings(
        _env_file=None, redis_url=env["REDIS_URL"], chatops_redis_prefix=env["CHATOPS_REDIS_PREFIX"]
    )  # type: ignore[call-arg]
    service = RunService(
        redis_client, Keys(settings.chatops_redis_prefix), RunOptions.from_settings(settings)
    )

    # A forged request is refused by the production server too.
    forged = json.dumps(
        {"type": "event_callback", "event_id": "EvX", "event": {"type": "app_mention"}}
    ).encode()
    assert signed_post(f"{url}/slack/events", forged, secret="wrong").status == 401

    ts = str(control.post_message(CHANNEL, "U_ALICE", f"<@{BOT_USER}> plan: restart_service")["ts"])

    def approval_card() -> dict[str, object] | None:
        return next(
            (m for m in control.thread(CHANNEL, ts)[1:] if buttons(m) and "Approval" in str(m["text"])), None
        )

    card = wait_for(approval_card, timeout=30, what="the approval card")
    assert executions(tmp_path / "restart_service.log") == []
    control.click(str(card["ts"]), "U_BOB", action_id=render.ACTION_APPROVE)

    def answer() -> dict[str, object] | None:
        return next((m for m in control.thread(CHANNEL, ts)[1:] if str(m["text"]).startswith("done:")), None)

    wait_for(answer, timeout=30, what="the answer")
    [run] = executions(tmp_path / "restart_service.log")
    assert run["arguments"]["confirmed_by"] == "U_BOB"
    run_id = as_text(redis_client.get(service.keys.slack("thread_last_run", CHANNEL, ts)))
    record = service.get(run_id or "")
    assert record is not None and record.status is RunStatus.COMPLETED
    deliveries = control.deliveries(kind="event")
    assert deliveries and all(d["status"] == 200 for d in deliveries)  # every event acked, none retried
