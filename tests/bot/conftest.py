"""Fixtures for the bot's tests: keys under the test's unique prefix, a unique queue, an in-process harness."""

from __future__ import annotations

import time
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
from bot.audit import AuditKind
from bot.jobs import Runtime
from bot.presenter import InMemoryPresenter, Presenter
from bot.runs import RunOptions, RunService
from bot.worker import ChatopsSimpleWorker
from tests.bot.runtimes import FileTool, executions, file_tools, plan_model


@pytest.fixture
def keys(key_prefix: str) -> Keys:
    return Keys(key_prefix)


@pytest.fixture
def queue_name() -> str:
    """An RQ queue no other test uses (RQ's own keys are not under our prefix)."""
    return f"test-{uuid.uuid4().hex[:12]}"


def wait_until(predicate: Callable[[], object], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


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
