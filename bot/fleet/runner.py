"""``chatops runner --target NAME``: an RQ worker on the host, for that target's queue only.

The runner needs ``REDIS_URL`` (a Redis ACL user limited to RQ's keys and the fleet's: see
docs/OPERATIONS.md), the inventory, its own tool settings (``CHATOPS_TOOLS_FILE``,
``CHATOPS_LOG_DIRS``, ``CHATOPS_SERVICE_BACKEND``, ...) and ``CHATOPS_RUNNER_SECRET``: no Slack or
LLM credentials. It runs jobs in its own process (RQ's ``SimpleWorker``: no fork per call, so a
call through a runner costs milliseconds), deserialises them as JSON (never pickle), and runs
only ``bot.fleet.runner_job.perform``: any other function named by a job in its queue is refused
without being imported (``RunnerJob``, on the workers' ``bot.job_worker.AllowListedWorker``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import redis
from rq.queue import Queue
from rq.serializers import JSONSerializer
from rq.worker import SimpleWorker

from agent.redis_util import redis_clock
from agent.tooling import ToolCategory
from bot.changes.journal import ChangeJournal
from bot.errors import BotConfigurationError
from bot.fleet.change_scan import ChangeScanThread, Scan
from bot.fleet.dispatch import RUNNER_FUNCTION
from bot.fleet.executions import Executions
from bot.fleet.grant_ledger import GrantLedger
from bot.fleet.grants import GrantSigner, PolicyNeed
from bot.fleet.heartbeats import Heartbeats, HeartbeatThread
from bot.fleet.runner_acl import runner_worker_name, target_queue_name
from bot.fleet.runner_job import RunnerContext, bound
from bot.fleet.target_keys import target_key
from bot.job_worker import AllowListedJob, AllowListedWorker
from bot.keys import Keys
from tools.targets import local_executor

log = logging.getLogger(__name__)
_SCAN_STOP_SECONDS = (
    10.0  # a scan under way when the runner stops: waited for this long, then left (a daemon thread)
)


class RunnerJob(AllowListedJob):
    """A runner's job: only the runner's one function is ever called."""

    functions = frozenset({RUNNER_FUNCTION})
    refusal = f"a runner runs only {RUNNER_FUNCTION}"


class RunnerWorker(AllowListedWorker, SimpleWorker):
    """Binds the runner's context around every job; beats its heartbeat from its own thread, and
    scans its host for changes from another (``change_scan``, when it was given a scan)."""

    def __init__(
        self,
        *args: Any,
        context: RunnerContext,
        heartbeat: HeartbeatThread,
        change_scan: ChangeScanThread | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, job_class=RunnerJob, bind=partial(bound, context), **kwargs)
        self.fleet_heartbeat = heartbeat
        self.change_scan = change_scan

    def clean_group_registries(self) -> None:
        """RQ's groups are shared by every queue, out of a runner's Redis user's reach
        (``bot.fleet.runner_acl``); chatops uses none, and the workers clean them."""

    def work(self, *args: Any, **kwargs: Any) -> bool:
        self.fleet_heartbeat.start()
        if self.change_scan is not None:
            self.change_scan.start()
        try:
            return bool(super().work(*args, **kwargs))
        finally:
            self.fleet_heartbeat.stop()
            if self.change_scan is not None:
                self.change_scan.stop(timeout=_SCAN_STOP_SECONDS)


def build_runner(
    *,
    connection: redis.Redis,
    keys: Keys,
    queue_base: str,
    target: str,
    tools: dict[str, Any],
    secret: str,
    heartbeat_seconds: float,
    output_filter: Any,
    state_dir: Path,
    name: str | None = None,
    replicas: int = 0,
    replica_wait_ms: int = 500,
    policy: Callable[[str, ToolCategory], PolicyNeed] | None = None,
    key: bytes = b"",
    scan: Scan | None = None,
    scan_seconds: float = 60.0,
    changes_days: int = 30,
    health: Mapping[str, str] | None = None,
) -> RunnerWorker:
    """A runner worker for ``target`` with ``tools`` (its own registry, by name); ``state_dir``:
    ``CHATOPS_RUNNER_STATE_DIR``, where it records the grants it spent (``grants/{target}``).

    ``scan``: what changed on the host since the last scan (``tools.changes``' collectors), called
    at start and every ``scan_seconds`` (``CHATOPS_CHANGES_SCAN_SECONDS``) and stored in the
    target's change journal, kept ``changes_days`` (``CHATOPS_CHANGES_DAYS``); ``None``: no scan.
    ``health``: its inventory entry's health URLs, which a restart's grant must have signed."""
    if not secret and not key:
        raise BotConfigurationError(
            "a runner needs its key (CHATOPS_RUNNER_KEY) or CHATOPS_RUNNER_SECRET to verify jobs and approvals"
        )
    own = key or target_key(secret.encode(), target)  # the one key it uses: its target's
    executor = local_executor()
    context = RunnerContext(
        target=target,
        executor=executor,
        tools=tools,
        executions=Executions(
            connection, keys, own, target, derived=True, replicas=replicas, replica_wait_ms=replica_wait_ms
        ),
        signer=GrantSigner(own, 0.0, clock=redis_clock(connection), own_target=target),
        output_filter=output_filter,
        now=redis_clock(connection),
        policy=policy,
        ledger=GrantLedger(state_dir / "grants" / target),
        key=own,
        health=dict(health or {}),
    )
    heartbeats = Heartbeats(connection, keys, heartbeat_seconds)
    heartbeat = HeartbeatThread(heartbeats, target, executor, tuple(sorted(tools)))
    queue = Queue(target_queue_name(queue_base, target), connection=connection, serializer=JSONSerializer)
    # Its worker's keys start with its queue's prefix: its Redis user reaches no other (``runner_acl``).
    worker = runner_worker_name(queue.name, name)
    change_scan = None
    if scan is not None:
        journal = ChangeJournal(connection, keys, partial(_own_key, target, own), days=changes_days)
        change_scan = ChangeScanThread(scan, journal, target, scan_seconds, on_scanned=heartbeat.scanned)
    return RunnerWorker(
        [queue],
        connection=connection,
        name=worker,
        context=context,
        heartbeat=heartbeat,
        change_scan=change_scan,
    )


def _own_key(own_target: str, own: bytes, target: str) -> bytes:
    """A runner holds its own target's key, and no other: it seals its own journal only."""
    if target != own_target:
        raise BotConfigurationError(f"the runner of {own_target} holds no key for {target}")
    return own
