"""``Harness``: a run service and an in-process RQ worker over real Redis, for the engine's tests.

``make_options`` is the tests' ``RunOptions``: short leases, one retry, a generous deadline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import redis
from rq import Queue

from agent.chat import ChatModel
from agent.tooling import Tool
from agent.types import Limits, Message, RunStatus
from bot.keys import Keys
from bot.observability.audit import AuditKind
from bot.runs.presenter import InMemoryPresenter, Presenter
from bot.runs.queueing import worker_queue, worker_queue_names
from bot.runs.runtime import Runtime
from bot.runs.service import RunOptions, RunService
from bot.runs.worker import ChatopsSimpleWorker
from tests.bot.runtimes import FileTool, executions


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
        return worker_queue(self.options.queue_name, self.redis)

    def runtime(self) -> Runtime:
        return Runtime(self.redis, self.keys, self.options, self.models, self.tools, self.presenter)

    def work(self) -> None:
        """Run every job that is due (scheduled ones too), in this process, until the queue is empty."""
        worker = ChatopsSimpleWorker(
            worker_queue_names(self.options.queue_name),
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
