"""An unreachable model says why, where each person looks: the thread's failure note, ``chatops runs
show``, ``chatops audit tail`` and an ERROR line in the worker's log.

Through the real processes: a ``chatops worker`` with the production runtime, its model at a loopback
port nothing listens on (a socket bound there without ``listen``: the port stays ours and every
connection is refused), Slack the emulator, and the CLI as a subprocess.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from bot.keys import Keys
from bot.runs.service import RunService
from emulator.slack import SlackEmulator, SlackEmulatorClient
from tests.support.harness import make_options
from tests.support.slack_fixtures import control, emulator
from tests.support.slack_workspace import CHANNEL, TOKEN
from tests.support.waiting import wait_until
from tests.support.worker_process import WorkerProcess

__all__ = ["control", "emulator"]  # the fixtures this module uses

ROOT = Path(__file__).resolve().parents[3]
REFUSED = "Connection refused"


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port bound by this test and never listened on: connections to it are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def chatops(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.ops.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow  # a web, a worker and the CLI as processes
def test_an_unreachable_models_connection_error_reaches_the_thread_runs_show_audit_and_log(
    worker_processes: Callable[..., WorkerProcess],
    emulator: SlackEmulator,
    control: SlackEmulatorClient,
    redis_client: redis.Redis,
    redis_url: str,
    keys: Keys,
    key_prefix: str,
    queue_name: str,
    closed_port: int,
    tmp_path: Path,
) -> None:
    worker = worker_processes(
        CHATOPS_RUNTIME="bot.ops.worker:default_runtime",
        LLM_BASE_URL=f"http://127.0.0.1:{closed_port}/v1",
        LLM_MODEL="gpt-test",
        LLM_API_KEY="sk-test-0123456789abcdef",
        SLACK_BOT_TOKEN=TOKEN,
        SLACK_API_URL=emulator.api_url,
        CHATOPS_SLACK_STREAMING="off",
        CHATOPS_LOG_FORMAT="json",
    )
    mention = control.post_message(CHANNEL, "U_ALICE", "<@U_OPS> is web-03 ok?")
    service = RunService(redis_client, keys, make_options(queue_name))
    run_id = service.submit(CHANNEL, mention["ts"], requester="U_ALICE", text="is web-03 ok?").run_id

    def failure_note() -> str | None:
        texts = [str(m.get("text") or "") for m in control.thread(CHANNEL, mention["ts"])]
        return next((text for text in texts if "every model failed" in text), None)

    wait_until(lambda: failure_note() is not None, timeout=120, what="the failure note in the thread")
    note = failure_note() or ""
    assert REFUSED in note and "gpt-test" in note, note

    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "CHATOPS_REDIS_PREFIX": key_prefix,
        "CHATOPS_QUEUE": queue_name,
    }
    empty = tmp_path / "cli.env"
    empty.write_text("")
    shown = chatops(env, "--env-file", str(empty), "runs", "show", run_id)
    assert shown.returncode == 0, shown.stderr
    assert REFUSED in shown.stdout, shown.stdout
    audit = chatops(env, "--env-file", str(empty), "audit", "tail", "--run", run_id, "--json")
    assert audit.returncode == 0, audit.stderr
    finished = [json.loads(line) for line in audit.stdout.splitlines() if '"run_finished"' in line]
    assert finished and REFUSED in json.dumps(finished[-1]), audit.stdout

    def error_line() -> dict[str, object] | None:
        for line in worker.output().splitlines():
            record = json.loads(line) if line.startswith("{") else {}
            if record.get("level") == "ERROR" and record.get("run_id") == run_id and REFUSED in str(record):
                return record
        return None

    wait_until(lambda: error_line() is not None, timeout=30, what="an ERROR line in the worker's log")
    assert "sk-test-0123456789abcdef" not in worker.output()
