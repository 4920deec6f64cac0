"""A whole chatops deployment for one test: the Slack emulator, the web app, worker subprocesses.

The web app (Bolt over WSGI) serves on 127.0.0.1, port 0, in a thread of the test process; the
workers are ``python -m tests.reliability.procs`` subprocesses (forking RQ workers with their
scheduler and recovery sweep) whose runtime is ``tests.reliability.runtimes``; Redis is the
test's (the shared one under a unique prefix and queue, or a throwaway ``redis-server``). What a
person would see is read back from the emulator: the thread's messages, reactions and the Web
API calls the bot made.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIServer

import psutil
import redis

from agent.redis_util import as_text
from agent.types import RunStatus
from bot.keys import Keys
from bot.observability.audit import AuditEntry, AuditKind
from bot.ops.compose_web import web_app, web_runtime
from bot.redis_connection import RedisTarget
from bot.runs.service import RunOptions, RunService
from bot.settings import Settings
from bot.slack.handlers.runtime import WebRuntime
from emulator.slack import SlackEmulator, SlackEmulatorClient
from tests.support.after_answer import AfterAnswerPools
from tests.support.leftover_processes import family_environment, kill_family
from tests.support.slack_bot import SETTLE_TIMEOUT, drain_sender, stored_run_ids
from tests.support.slack_workspace import BOT_USER, CHANNEL, QUIET, SECRET, TOKEN, buttons, make_settings
from tests.support.waiting import wait_for, wait_until
from tests.support.web_server import QuietHandler, WebServer

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Worker:
    """One worker subprocess (its own session); ``kill`` takes its work horse and scheduler too."""

    proc: subprocess.Popen[bytes]
    log: Path
    tag: str  # its environment's mark (``family_environment``), which its work horses inherit

    def family(self) -> list[psutil.Process]:
        """The worker and every process it forked (the work horse, the scheduler), alive now."""
        try:
            main = psutil.Process(self.proc.pid)
            found = [main, *main.children(recursive=True)]
        except psutil.NoSuchProcess:
            found = []
        return found

    def horses(self) -> list[int]:
        """Pids of the work horses running now (children of the worker in their own process group)."""
        return [p.pid for p in self.family()[1:] if _pgid(p.pid) == p.pid]

    def signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        """SIGKILL the worker and everything it started."""
        for process in reversed(self.family()):
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        kill_family(self.tag)  # a horse that outlived an earlier kill of its worker alone
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)

    def rss(self) -> int:
        """Resident memory of the worker's main process, in bytes."""
        return int(psutil.Process(self.proc.pid).memory_info().rss)

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


class _PooledServer(WSGIServer):
    """A WSGI server that handles requests on a fixed pool of threads, as ``chatops web``'s app
    threads do (the test helper's thread-per-request server has no bound at all)."""

    request_queue_size = 256

    def __init__(self, *args: Any, threads: int, **kwargs: Any) -> None:
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="web")
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        self._pool.submit(self._handle, request, client_address)

    def _handle(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)

    def server_close(self) -> None:
        super().server_close()
        self._pool.shutdown(wait=False, cancel_futures=True)


class PooledWebServer(WebServer):
    """The web app on 127.0.0.1 (port 0) with the production server's bound: ``threads`` requests at a time,
    the rest wait in the backlog."""

    def __init__(self, app: Any, threads: int = 16) -> None:
        super().__init__(app, server=_PooledServer(("127.0.0.1", 0), QuietHandler, threads=threads))


@dataclass
class Cluster:
    settings: Settings
    emulator: SlackEmulator
    control: SlackEmulatorClient
    directory: Path
    worker_env: dict[str, str]
    server: PooledWebServer | None = None
    runtime: WebRuntime | None = None
    workers: list[Worker] = field(default_factory=list)
    event_ids: dict[str, list[str]] = field(default_factory=dict)  # message ts -> Slack event ids
    pools: AfterAnswerPools = field(default_factory=AfterAnswerPools)
    _redis: redis.Redis | None = None

    # -- processes ------------------------------------------------------------------------------

    def serve(self) -> Cluster:
        self.runtime = web_runtime(self.settings, tuning=QUIET)
        self.server = PooledWebServer(web_app(self.runtime, pools=self.pools))
        self.emulator.set_events_url(self.events_url)
        return self

    @property
    def events_url(self) -> str:
        assert self.server is not None
        return f"{self.server.url}/slack/events"

    def start_worker(self, **env: str) -> Worker:
        log = self.directory / f"worker-{len(self.workers)}.log"
        environment, tag = family_environment({**self.worker_env, **env})
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.procs"],
            cwd=ROOT,
            env=environment,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.workers.append(Worker(proc, log, tag))
        return self.workers[-1]

    def close(self) -> None:
        """Stop the workers, then serve until nothing of the web app still talks to Slack (its work
        after its answers, the process's sender): a Slack error is counted under the test's prefix,
        deleted when the test ends, and nothing may write there afterwards (as ``SlackBot.close``)."""
        for worker in self.workers:
            worker.kill()  # horses that outlived their worker too
        try:
            wait_until(self.pools.idle, SETTLE_TIMEOUT, "the web app's work after its answers")
            drain_sender(stored_run_ids(self.redis, self.keys))
        finally:
            if self.server is not None:
                self.server.close()
            if self._redis is not None:
                self._redis.close()

    # -- Redis and runs ---------------------------------------------------------------------------

    @property
    def redis(self) -> redis.Redis:
        if self._redis is None:
            self._redis = test_client(self.settings)
        return self._redis

    @property
    def keys(self) -> Keys:
        return Keys(self.settings.chatops_redis_prefix)

    @property
    def service(self) -> RunService:
        return RunService(self.redis, self.keys, RunOptions.from_settings(self.settings))

    def run_id(self, thread_ts: str, timeout: float = 30.0) -> str:
        def probe() -> str | None:
            return as_text(self.redis.get(self.keys.slack("thread_last_run", CHANNEL, thread_ts)))

        return wait_for(probe, timeout, f"a run in thread {thread_ts}")

    def status(self, run_id: str) -> RunStatus | None:
        record = self.service.get(run_id)
        return record.status if record else None

    def wait_status(self, run_id: str, status: RunStatus, timeout: float = 60.0) -> None:
        wait_for(lambda: self.status(run_id) is status, timeout, f"run {run_id} to be {status.value}")

    def settle(self, timeout: float = 60.0) -> None:
        """Wait until nothing is under way that could still post in Slack: Slack has delivered every
        event (its retries too), the web app has done what its answers handed on, every run has
        told its thread how it ended, no job is queued and none works on a run (holds its lease).

        A second answer or card would come from one of those; a job that runs later for a run that
        has reported finds it finished and does nothing. (RQ's started-job registry is no witness:
        a job that ended while Redis was away stays listed there until its entry expires.)"""
        assert self.emulator.core.deliverer.wait_idle(timeout), "Slack is still delivering events"
        wait_until(self.pools.idle, timeout, "the web app's work after its answers")
        queue = self.service.queue

        def idle() -> bool:
            reporting = int(self.redis.zcard(self.keys.reporting()))
            leased = next(self.redis.scan_iter(match=self.keys.lease("*"), count=1000), None)
            return not reporting and leased is None and queue.count == 0

        wait_until(idle, timeout, "every run reported, no job queued and no run leased")

    def audit(self, run_id: str) -> list[AuditEntry]:
        return self.service.audit.entries(run_id)

    def audit_kinds(self, run_id: str) -> list[AuditKind]:
        return [entry.kind for entry in self.audit(run_id)]

    # -- Slack, as people see it ----------------------------------------------------------------------

    def mention(self, text: str, user: str = "U_ALICE", thread_ts: str | None = None) -> str:
        posted = self.control.post_message(CHANNEL, user, f"<@{BOT_USER}> {text}", thread_ts=thread_ts)
        self.event_ids[str(posted["ts"])] = [str(e) for e in posted.get("event_ids") or []]
        return str(posted["ts"])

    def say(self, text: str, user: str = "U_BOB", thread_ts: str | None = None) -> str:
        return str(self.control.post_message(CHANNEL, user, text, thread_ts=thread_ts)["ts"])

    def bot_replies(self, thread_ts: str) -> list[dict[str, Any]]:
        return [m for m in self.control.thread(CHANNEL, thread_ts)[1:] if m.get("user") == BOT_USER]

    def approval_card(self, thread_ts: str, timeout: float = 30.0) -> dict[str, Any]:
        def probe() -> dict[str, Any] | None:
            return next(
                (m for m in self.bot_replies(thread_ts) if buttons(m) and "Approval" in str(m["text"])), None
            )

        return wait_for(probe, timeout, "the approval card")

    def answers(self, thread_ts: str, prefix: str = "done:") -> list[str]:
        return [str(m["text"]) for m in self.bot_replies(thread_ts) if str(m["text"]).startswith(prefix)]


def test_client(settings: Settings) -> redis.Redis:
    """The test's own client of the cluster's Redis: behind sentinels, of the master they name now."""
    target = RedisTarget.from_settings(settings)
    if target.sentinels:
        client: redis.Redis = target.sentinel_manager().master_for(target.master, socket_timeout=10)  # type: ignore[no-untyped-call]
        return client
    return redis.Redis.from_url(settings.redis_url, socket_timeout=10)


def cluster_settings(
    emulator: SlackEmulator, redis_url: str, key_prefix: str, queue: str, **overrides: Any
) -> Settings:
    return make_settings(emulator, redis_url, key_prefix, queue, **overrides)


def worker_environment(settings: Settings, directory: Path, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SLACK_BOT_TOKEN": TOKEN,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": settings.slack_api_url,
        "REDIS_URL": settings.redis_url,
        "CHATOPS_REDIS_PREFIX": settings.chatops_redis_prefix,
        "CHATOPS_QUEUE": settings.chatops_queue,
        "CHATOPS_LEASE_TTL_SECONDS": "1",
        "CHATOPS_RETENTION_DAYS": "1",
        "CHATOPS_MAX_ITERATIONS": "40",
        "CHATOPS_DEADLINE_SECONDS": "120",
        "CHATOPS_APPROVAL_TIMEOUT_SECONDS": "600",
        "CHATOPS_RUNTIME": "tests.reliability.runtimes:reliability_runtime",
        "CHATOPS_TEST_DIR": str(directory),
        **sentinel_environment(settings),
        **extra,
    }
    env.pop("SLACK_APP_TOKEN", None)
    return env


def sentinel_environment(settings: Settings) -> dict[str, str]:
    """The Sentinel settings of the web app's, for the worker subprocesses (none without sentinels)."""
    if not settings.redis_sentinels:
        return {}
    return {
        "REDIS_SENTINELS": ",".join(settings.redis_sentinels),
        "REDIS_SENTINEL_MASTER": settings.redis_sentinel_master,
    }
