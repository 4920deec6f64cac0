"""``chatops web`` (two worker processes) and ``chatops worker`` as real processes.

The production entry points end to end: Slack (the emulator) delivers a signed mention to the
web server, a forking RQ worker runs it and asks for approval, a click goes back through the web
server (a lazy listener decides and enqueues the resume), and the worker finishes the run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import redis

from agent.redis_util import as_text
from agent.types import RunStatus
from bot.keys import Keys
from bot.runs.service import RunOptions, RunService
from bot.settings import Settings
from bot.slack.rendering import render
from emulator.slack import SlackEmulator, SlackEmulatorClient
from tests.bot.runtimes import executions
from tests.bot.slack.web_process import chatops_processes, health
from tests.support.slack_http import signed_post
from tests.support.slack_workspace import BOT_USER, CHANNEL, buttons
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def processes(
    emulator: SlackEmulator, redis_url: str, key_prefix: str, queue_name: str, tmp_path: Path
) -> Iterator[tuple[str, dict[str, str]]]:
    """``chatops web`` and ``chatops worker`` subprocesses; yields the web URL and their environment.
    The web process must stop gracefully on SIGTERM (exit status 0)."""
    with chatops_processes(
        emulator, redis_url, key_prefix, queue_name, tmp_path, WEB_WORKERS="2", WEB_THREADS="4"
    ) as served:
        yield served.url, served.env
    assert served.exit_codes.get("web") == 0, served.log("web")[-2000:]


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


def test_a_killed_web_worker_is_replaced_and_an_orphaned_one_stops(
    emulator: SlackEmulator, redis_url: str, key_prefix: str, queue_name: str, tmp_path: Path
) -> None:
    """The supervisor replaces a worker process that dies; if the supervisor itself is killed
    (SIGKILL: no chance to stop them), its workers notice and stop rather than keep the port, the
    replacement too while it is still building its app (it knows its supervisor from the fork)."""
    with chatops_processes(
        emulator, redis_url, key_prefix, queue_name, tmp_path, names=("web",), WEB_WORKERS="2"
    ) as served:
        supervisor = psutil.Process(served.pids["web"])
        first = wait_for(lambda: supervisor.children() if len(supervisor.children()) == 2 else None)
        assert health(served.url) == 200
        first[0].kill()
        workers = wait_for(
            lambda: (
                kids
                if len(kids := supervisor.children()) == 2 and first[0].pid not in {k.pid for k in kids}
                else None
            ),
            what="a new worker process",
        )
        supervisor.kill()  # at once: the replacement is most likely still building its app
        gone, alive = psutil.wait_procs(workers, timeout=15)
        assert alive == [] and len(gone) == 2
