"""The one job a runner runs: a call of a tool in its own registry, checked as if hostile.

Anything in Redis may have been written by someone who should not command this host, so the job
trusts nothing it is handed: the payload's shape is checked, its signature must be the runner
secret's over its whole content, for this target, unexpired (``bot.fleet.job_signing``; a job
that fails it gets no answer at all, only a WARNING line in the runner's log naming the RQ job:
answering would let a Redis writer have the runner seal text for any execution, and the runner's
Redis user cannot write the audit stream), the tool must be in the runner's own
registry (built from its own settings; no code or command ever comes through Redis), the call
must be for this runner's target, the deadline must not have passed, and a call that changes
something needs a grant this runner verifies itself (``bot.fleet.grants``) and spends on the host
(``bot.fleet.grant_ledger``) before it claims the execution in Redis (``bot.fleet.executions``): a
retried or replayed job never runs a side effect twice, even with its Redis mark deleted. A
read-only execution already done is not run again either (a replay within the job's deadline).
Results pass through the runner's own output filter (redaction, size cap) before they leave.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from rq import get_current_job

from agent.arguments import parse_arguments
from agent.errors import ArgumentsRejected
from agent.tooling import APPROVAL_GRANT, Tool, ToolCategory, ToolResult, call_category, describe_call
from agent.types import TRUSTED_ARGUMENTS
from bot.errors import BotConfigurationError
from bot.fleet.executions import DONE, EXECUTING, LATE, UNREPLICATED, Executions, RemoteResult
from bot.fleet.grant_ledger import GrantLedger
from bot.fleet.grants import Grant, GrantSigner, PolicyNeed, declared_verify, policy_problem
from bot.fleet.job_signing import EXPIRED, SIGNATURE, freshness_problem, signature_problem

log = logging.getLogger(__name__)
TARGET_ARGUMENT = "target"
_OPS = ("execute", "preview", "describe")
LATE_REASON = "the call arrived after its deadline; it was not run"
UNREPLICATED_REASON = "no Redis replica confirmed that the call started (a failover could forget it and run it twice); it was not run"


@dataclass
class RunnerContext:
    """What the job needs, bound by the runner worker around every job."""

    target: str
    executor: str  # host:pid
    tools: dict[str, Tool]
    executions: Executions
    signer: GrantSigner
    output_filter: Callable[[str], str]
    now: Callable[[], float]
    ledger: GrantLedger  # the grants spent on this host (``CHATOPS_RUNNER_STATE_DIR``)
    key: bytes  # its target's key (``bot.fleet.target_keys``): every job is signed with it
    policy: Callable[[str, ToolCategory], PolicyNeed] | None = None  # its own CHATOPS_POLICY_FILE
    health: Mapping[str, str] = field(default_factory=dict)  # its inventory entry's health URLs


_current: ContextVar[RunnerContext | None] = ContextVar("chatops_runner", default=None)


@contextmanager
def bound(context: RunnerContext) -> Iterator[None]:
    token = _current.set(context)
    try:
        yield
    finally:
        _current.reset(token)


def perform(payload: Any) -> str:
    """The RQ job function (``bot.fleet.dispatch.RUNNER_FUNCTION``): run the call, push its result."""
    context = _current.get()
    if context is None:
        raise BotConfigurationError("runner jobs run only inside chatops runner")
    problem = _job_problem(context, payload)
    if problem is not None:
        job = get_current_job()
        fields = payload if isinstance(payload, dict) else {}
        # Whoever wrote the job chose these: quoted and cut, so they cannot forge log lines.
        log.warning(
            "refused runner job %s (op %.40r, tool %.60r, execution %.120r): %s",
            job.id if job is not None else "?",
            fields.get("op"),
            fields.get("tool"),
            fields.get("execution"),
            problem,
        )
        context.executions.record_refusal(
            job=job.id if job is not None else "?",
            op=fields.get("op"),
            tool=fields.get("tool"),
            execution=fields.get("execution"),
            problem=problem,
            executor=context.executor,
        )
        if problem == EXPIRED:  # signed by a dispatcher, who may still wait: tell it (sealed)
            context.executions.answer(payload["execution"], _refused(context, LATE_REASON))
        return "refused"
    _run(context, payload)
    return "done"


def _run(context: RunnerContext, payload: dict[str, Any]) -> RemoteResult:
    execution: str = payload["execution"]
    tool = context.tools.get(payload["tool"])
    if tool is None:
        return _answer(
            context,
            execution,
            _refused(context, f"the runner of {context.target} has no tool {payload['tool']}"),
        )
    try:
        arguments = parse_arguments(payload["arguments"], trusted=TRUSTED_ARGUMENTS)
    except ArgumentsRejected as error:
        return _answer(context, execution, _refused(context, f"invalid arguments: {error}"))
    named = arguments.get(TARGET_ARGUMENT, context.target)
    if named != context.target:
        return _answer(
            context, execution, _refused(context, f"this call is for target {named!r}, not {context.target}")
        )
    local = json.dumps({k: v for k, v in arguments.items() if k not in (TARGET_ARGUMENT, APPROVAL_GRANT)})
    op = payload["op"]  # its deadline has not passed: ``job_problem``
    if op == "describe":
        return _answer(context, execution, _result(context, ToolResult(describe_call(tool, local) or "")))
    if op == "preview":
        shown = tool.preview(local, timeout=float(payload["timeout"]))
        return _answer(
            context, execution, _result(context, shown or ToolResult("Error: no dry run", is_error=True))
        )
    return _execute(context, tool, payload, arguments, local)


def _execute(
    context: RunnerContext, tool: Tool, payload: dict[str, Any], arguments: dict[str, Any], local: str
) -> RemoteResult:
    execution: str = payload["execution"]
    category = call_category(tool, local).category
    changes = category.requires_confirmation
    if changes:
        problem = context.signer.problem(
            arguments.get(APPROVAL_GRANT),
            tool=payload["tool"],
            arguments=arguments,
            target=context.target,
            execution=execution,
            verify=declared_verify(tool, arguments, context.target, context.health),
        )
        if problem is None and context.policy is not None:
            problem = policy_problem(arguments.get(APPROVAL_GRANT), context.policy(payload["tool"], category))
        if problem is not None:
            log.warning("refused %s on %s: %s", payload["tool"], context.target, problem)
            return _answer(
                context,
                execution,
                _refused(context, f"the runner of {context.target} refused {payload['tool']}: {problem}"),
            )
    if changes and not _spend(context, arguments, execution):
        log.warning(
            "did not run %s (%s): its grant was already spent on this host", payload["tool"], execution
        )
        return _answer(
            context,
            execution,
            _refused(
                context,
                f"outcome unknown: {payload['tool']} was not run again on {context.target}: "
                "its approval grant was already spent on this host",
            ),
        )
    taken = context.executions.claim(
        execution, context.executor, float(payload["deadline"]), replicated=changes
    )
    if taken == LATE:
        return _answer(context, execution, _refused(context, LATE_REASON))
    if taken == UNREPLICATED:
        log.warning("did not run %s (%s): no Redis replica confirmed its mark", payload["tool"], execution)
        return _answer(context, execution, _refused(context, UNREPLICATED_REASON))
    if taken == DONE and not changes:
        # Answered already: a replay of a signed read-only job within its deadline reads nothing.
        log.warning("did not run %s (%s) again: it was answered already", payload["tool"], execution)
        return _refused(context, "it was answered already")
    if taken is not None and (taken not in (EXECUTING, DONE) or changes):
        # Abandoned by its dispatcher (nobody waits), or a side effect that may already have run.
        reason = "it already started once" if taken in (EXECUTING, DONE) else "its dispatcher gave up on it"
        log.warning("did not run %s (%s): %s", payload["tool"], execution, reason)
        return _answer(
            context,
            execution,
            _refused(
                context, f"outcome unknown: {payload['tool']} was not run again on {context.target}: {reason}"
            ),
        )
    result = tool.execute(local, timeout=float(payload["timeout"]))
    remote = _result(context, result)
    context.executions.finish(execution, remote)
    level = logging.INFO if changes else logging.DEBUG  # what changed this host is always in its log
    log.log(
        level,
        "ran %s on %s (%s)%s",
        payload["tool"],
        context.target,
        execution,
        " failed" if result.is_error else "",
    )
    return remote


def _spend(context: RunnerContext, arguments: dict[str, Any], execution: str) -> bool:
    """Spend the (verified) grant of this execution on the host: ``False`` if it was spent already."""
    grant = Grant.decode(str(arguments.get(APPROVAL_GRANT)))  # verified by ``GrantSigner.problem``
    return grant is not None and context.ledger.spend(execution, grant.expires_at, context.now())


def _answer(context: RunnerContext, execution: str, result: RemoteResult) -> RemoteResult:
    context.executions.answer(execution, result)
    return result


def _result(context: RunnerContext, result: ToolResult) -> RemoteResult:
    filtered = context.output_filter
    stable = filtered(result.stable_output) if result.stable_output is not None else None
    return RemoteResult.from_tool_result(
        ToolResult(
            output=filtered(result.output),
            is_error=result.is_error,
            plan=result.plan,
            nothing_to_do=result.nothing_to_do,
            stable_output=stable,
        ),
        context.executor,
    )


def _refused(context: RunnerContext, why: str) -> RemoteResult:
    return RemoteResult(f"Error: {why}", is_error=True, executor=context.executor)


def _job_problem(context: RunnerContext, payload: Any) -> str | None:
    """Why this job must not be acted on at all: not a signed job for this target, now."""
    if not isinstance(payload, dict):
        return "the payload is not an object"
    return (
        signature_problem(context.key, payload)
        or _payload_problem(payload)
        or freshness_problem(payload, target=context.target, now=context.now())
    )


def _payload_problem(payload: dict[str, Any]) -> str | None:
    expected: dict[str, type | tuple[type, ...]] = {
        "target": str,
        "execution": str,
        "op": str,
        "tool": str,
        "arguments": str,
        "deadline": (int, float),
        "timeout": (int, float),
    }
    for key, kind in expected.items():
        if not isinstance(payload.get(key), kind) or isinstance(payload.get(key), bool):
            return f"{key} is missing or has the wrong type"
    if payload["op"] not in _OPS:
        return f"unknown op {payload['op']!r}"
    if set(payload) - set(expected) - {SIGNATURE}:
        return f"unknown fields {sorted(set(payload) - set(expected) - {SIGNATURE})}"
    if not 0 < float(payload["timeout"]) <= 3600:
        return "timeout out of range"
    return None
