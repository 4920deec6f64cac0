"""The worker's side of a runner target: each call goes to the target's RQ queue, and back.

``RunnerTool`` is the route of one (tool, target) pair (``tools.targets.TargetedTool`` picks it).
A call is a small JSON job (RQ's ``JSONSerializer``: nothing pickled crosses to a runner) naming
the target, the tool, the arguments exactly as the model wrote them, the approval grant of an
approved call and a deadline, signed as a whole with the target's key (``bot.fleet.job_signing``);
the runner looks the tool up in its own registry and refuses anything else. Its RQ job id starts
with the target's queue (``bot.fleet.runner_acl``), so a runner's Redis user reaches only its own. The
dispatcher waits for the result on the execution's list, checking between short waits that the
runner is still alive; when it is not, or the deadline passes, it abandons the execution (one
``SET NX`` against the runner's own claim, ``bot.fleet.executions``) and says whether the call ran.
"""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass, field

import redis
from rq import Queue
from rq.serializers import JSONSerializer

from agent.arguments import checked_arguments
from agent.errors import ArgumentsRejected
from agent.tooling import (
    APPROVAL_GRANT,
    CallCategory,
    Tool,
    ToolCategory,
    ToolResult,
    WrapperTool,
)
from bot.fleet.executions import Executions, RemoteResult
from bot.fleet.grants import Grant
from bot.fleet.heartbeats import Heartbeats
from bot.fleet.job_signing import sign_job
from bot.fleet.runner_acl import new_job_id, target_queue_name
from bot.fleet.target_keys import target_key
from bot.keys import Keys

RUNNER_FUNCTION = "bot.fleet.runner_job.perform"  # the one function a runner runs
_WAIT_SLICE_SECONDS = 1.0  # how often a waiting dispatcher checks the runner's heartbeat
_GRACE_SECONDS = 2.0  # past the tool's own timeout, for the runner to report it itself


@dataclass
class Dispatcher:
    """Sends calls to runners' queues and waits for their results (one per worker process)."""

    redis: redis.Redis
    keys: Keys
    queue_base: str
    heartbeats: Heartbeats
    secret: bytes  # ``CHATOPS_RUNNER_SECRET``: results are sealed with it (``bot.fleet.executions``)
    queues: dict[str, Queue] = field(default_factory=dict)

    def executions(self, target: str) -> Executions:
        return Executions(self.redis, self.keys, self.secret, target)

    def queue(self, target: str) -> Queue:
        if target not in self.queues:
            self.queues[target] = Queue(
                target_queue_name(self.queue_base, target), connection=self.redis, serializer=JSONSerializer
            )
        return self.queues[target]

    def call(
        self, target: str, op: str, tool: str, arguments: str, *, timeout: float, mutating: bool
    ) -> RemoteResult:
        """Run ``op`` (execute, preview, describe) of ``tool`` on ``target``'s runner."""
        unreachable, now = self.heartbeats.check(target)
        if unreachable is not None:
            return RemoteResult(f"Error: {unreachable}; nothing was run", is_error=True)
        execution = _execution_id(arguments) if op == "execute" else None
        execution = execution or f"ro-{uuid.uuid4().hex}"
        deadline = now + timeout
        payload = {
            "target": target,
            "execution": execution,
            "op": op,
            "tool": tool,
            "arguments": arguments,
            "deadline": deadline,
            "timeout": timeout,
        }
        queue = self.queue(target)
        queue.enqueue_call(
            RUNNER_FUNCTION,
            args=(sign_job(target_key(self.secret, target), payload),),
            job_id=new_job_id(queue.name),
            timeout=math.ceil(timeout + _GRACE_SECONDS),
            ttl=math.ceil(timeout + _GRACE_SECONDS),  # never started by then: dropped from the queue
            result_ttl=60,  # expired by Redis: deleting at once costs the runner a dozen round trips
            failure_ttl=3600,
        )
        return self._wait(target, tool, execution, timeout + _GRACE_SECONDS, mutating)

    def _wait(self, target: str, tool: str, execution: str, budget: float, mutating: bool) -> RemoteResult:
        executions = self.executions(target)
        started = time.monotonic()
        while True:
            left = budget - (time.monotonic() - started)
            result = executions.wait(execution, min(_WAIT_SLICE_SECONDS, max(0.05, left)))
            if result is not None:
                return result
            unreachable = self.heartbeats.unreachable(target)
            if unreachable is None and time.monotonic() - started < budget:
                continue
            why = unreachable or f"{tool} on {target} did not answer within {budget:.0f} s"
            if executions.abandon(execution):
                return RemoteResult(f"Error: {why}; the call was not run", is_error=True)
            late = executions.wait(execution, 0.05)  # it may have finished just now
            if late is not None:
                return late
            if mutating:
                return RemoteResult(
                    f"Error: outcome unknown: {why} while {tool} was running; verify the state before retrying",
                    is_error=True,
                )
            return RemoteResult(f"Error: {why} while {tool} was running", is_error=True)


def _execution_id(arguments: str) -> str | None:
    """An approved call's execution id, from its grant (the runner checks the grant's signature)."""
    try:
        text = checked_arguments(arguments).get(APPROVAL_GRANT)  # the gate's parse, not a new one
    except ArgumentsRejected:
        return None
    grant = Grant.decode(text) if isinstance(text, str) else None
    return grant.execution_id if grant is not None else None


class RunnerTool(WrapperTool):
    """The route of one tool on one runner target: every call is sent to that runner.

    It wraps the worker's own tool of that name, whose schema, category and timeout the worker's
    gate uses (the runner decides again from its own registry before acting); every part a call
    reaches goes to the runner instead.
    """

    receives_target = True  # the runner binds the arguments exactly as the model wrote them

    def __init__(self, inner: Tool, target: str, dispatcher: Dispatcher) -> None:
        super().__init__(inner)
        self._target = target
        self._dispatcher = dispatcher

    @property
    def parallel(self) -> bool:
        return self.category is ToolCategory.READ_ONLY

    @property
    def enforces_timeout(self) -> bool:
        """The call waits for the runner's answer on its own budget (``Dispatcher._wait``): it
        returns by its timeout whatever the runner does, so the loop need not hand it to its pool."""
        return True

    def category_for(self, arguments: str) -> CallCategory:
        """The tool's own category: the arguments carry the target, which the local tool would not
        take, and the runner holds the call to its own registry's answer anyway."""
        return CallCategory(self.category)

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        return self._call("execute", arguments, timeout)

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        return self._call("preview", arguments, timeout)

    def describe(self, arguments: str) -> str | None:
        """The exact command, as the runner that will run it describes it."""
        result = self._call("describe", arguments, min(self.timeout, 10.0))
        return None if result.is_error or not result.output else result.output

    def refusal(self, arguments: str) -> str | None:
        """A mutating call to a target whose runner is silent, or has no such tool, is not put
        before a person (the runner lists its tools in its heartbeat)."""
        heartbeats = self._dispatcher.heartbeats
        unreachable = heartbeats.unreachable(self._target)
        if unreachable is not None:
            return unreachable
        beat = heartbeats.get(self._target)
        name = self.definition.name
        if beat is not None and name not in beat.tools:
            return f"the runner of {self._target} has no tool {name}; it was not run"
        return None

    def _call(self, op: str, arguments: str, timeout: float) -> ToolResult:
        mutating = op == "execute" and self.category.requires_confirmation
        remote = self._dispatcher.call(
            self._target, op, self.definition.name, arguments, timeout=timeout, mutating=mutating
        )
        return remote.to_tool_result(self._target)
