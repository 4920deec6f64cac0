"""Fixtures for the bot's tests: keys under the test's unique prefix, a unique queue, an in-process harness."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis
from rq import Queue

from agent.chat import ChatModel
from agent.keys import Keys
from agent.tooling import Tool
from agent.types import Limits, Message, RunStatus
from bot.runs.audit import AuditKind
from bot.runs.presenter import InMemoryPresenter, Presenter
from bot.runs.runtime import Runtime
from bot.runs.service import RunOptions, RunService
from bot.runs.worker import ChatopsSimpleWorker
from tests.bot.runtimes import FileTool, executions, file_tools, plan_model


@pytest.fixture
def keys(key_prefix: str) -> Keys:
    return Keys(key_prefix)


@pytest.fixture
def queue_name() -> str:
    """An RQ queue no other test uses (RQ's own keys are not under our prefix)."""
    return f"test-{uuid.uuid4().hex[:12]}"


@dataclass
class Harness:
    """A run service and an in-process RQ worker over real Redis, with a scripted model and file tools."""

    redis: redis.Redis
    keys: Keys
    options: RunOptions
    directory: Path
    models: Sequence[ChatModel]
    tools: Sequence[Tool]
    presenter: Presenter = field(default_factory=InMemoryPresenter)

    @property
    def service(self) -> RunService:
        return RunService(self.redis, self.keys, self.options)

    @property
    def queue(self) -> Queue:
        return Queue(self.options.queue_name, connection=self.redis)

    def runtime(self) -> Runtime:
        return Runtime(self.redis, self.keys, self.options, self.models, self.tools, self.presenter)

    def work(self) -> None:
        """Run every job that is due (scheduled ones too), in this process, until the queue is empty."""
        worker = ChatopsSimpleWorker(
            [self.options.queue_name],
            connection=self.redis,
            runtime_factory=self.runtime,
            sweep=self.service.recover,
        )
        worker.work(burst=True, with_scheduler=True)

    def submit(self, text: str, thread_ts: str = "100.1", requester: str = "U_REQ") -> str:
        submission = self.service.submit("C1", thread_ts, requester=requester, text=text)
        assert submission.created
        return submission.run_id

    def status(self, run_id: str) -> RunStatus:
        record = self.service.get(run_id)
        assert record is not None
        return record.status

    def history(self, run_id: str) -> list[Message]:
        return self.service.history(run_id)

    def tool_results(self, run_id: str) -> list[str]:
        return [m.content or "" for m in self.history(run_id) if m.role == "tool"]

    def executions(self, name: str) -> list[dict[str, object]]:
        return executions(self.directory / f"{name}.log")

    def tool(self, name: str) -> FileTool:
        return next(t for t in self.tools if isinstance(t, FileTool) and t.name == name)

    def audit_kinds(self, run_id: str) -> list[AuditKind]:
        return [e.kind for e in self.service.audit.entries(run_id)]


def make_options(queue_name: str, **overrides: object) -> RunOptions:
    defaults: dict[str, object] = {
        "queue_name": queue_name,
        "retention_seconds": 3600,
        "lease_ttl_seconds": 5.0,
        "approval_timeout_seconds": 600.0,
        "job_retries": 1,
        "limits": Limits(max_iterations=40, deadline_seconds=60),
    }
    defaults.update(overrides)
    return RunOptions(**defaults)  # type: ignore[arg-type]


@pytest.fixture
def harness(redis_client: redis.Redis, keys: Keys, queue_name: str, tmp_path: Path) -> Iterator[Harness]:
    yield Harness(
        redis_client, keys, make_options(queue_name), tmp_path, [plan_model()], file_tools(tmp_path)
    )


ROOT = Path(__file__).resolve().parents[2]


@dataclass
class WorkerProcess:
    """A real ``chatops worker`` subprocess (forking RQ worker, scheduler on) in its own process group."""

    proc: subprocess.Popen[bytes]
    log: Path

    def kill(self) -> None:
        """SIGKILL the worker and its scheduler (the work horse has a process group of its own)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
def worker_processes(
    redis_url: str, key_prefix: str, queue_name: str, tmp_path: Path
) -> Iterator[Callable[..., WorkerProcess]]:
    """Start worker subprocesses on this test's prefix and queue; all are killed at the end (horses too)."""
    started: list[WorkerProcess] = []
    env_file = tmp_path / "empty.env"
    env_file.write_text("")

    def start(**extra_env: str) -> WorkerProcess:
        env = {
            **os.environ,
            "REDIS_URL": redis_url,
            "CHATOPS_REDIS_PREFIX": key_prefix,
            "CHATOPS_QUEUE": queue_name,
            "CHATOPS_LEASE_TTL_SECONDS": "1",
            "CHATOPS_RECOVERY_INTERVAL_SECONDS": "1",
            "CHATOPS_JOB_RETRIES": "2",
            "CHATOPS_RETENTION_DAYS": "1",
            "CHATOPS_MAX_ITERATIONS": "40",
            "CHATOPS_DEADLINE_SECONDS": "120",
            "CHATOPS_RUNTIME": "tests.bot.runtimes:subprocess_runtime",
            "CHATOPS_TEST_DIR": str(tmp_path),
            **extra_env,
        }
        log = tmp_path / f"worker-{len(started)}.log"
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.ops.cli", "--env-file", str(env_file), "worker"],
            cwd=ROOT,
            env=env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        started.append(WorkerProcess(proc, log))
        return started[-1]

    yield start
    for worker in started:
        worker.kill()
    # Work horses are forks of our workers: same command line, which names this test's env file.
    for log in tmp_path.glob("*.log"):
        for line in log.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError, KeyError, TypeError):
                kill_if_ours(int(json.loads(line)["pid"]), str(env_file))


def kill_if_ours(pid: int, marker: str) -> None:
    """SIGKILL ``pid`` only if it is still one of this test's worker processes (pids get reused)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return
    if marker in cmdline:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
