"""Running an approved change's declared before-read and check (``agent.verification``).

``read_before`` runs the ``before`` call just before the action: its output must be a JSON object
(its fields fill an undo's ``{before.X}``). ``run_check`` runs the ``check`` right after the action
succeeded, read-only and without approval, through the run's own tools (so a call on a runner
target goes to that runner, as any read-only call does), again with growing pauses until it
passes or ``seconds`` are spent: a restarted unit takes a moment to come up.

Where the result goes (``agent.tool_step``): into the action's own result message, as a second
evidence id (``meta["check"]``). A synthetic call and result pair would need an assistant
message of its own between the action's result and the results of the calls after it in the same
turn, which breaks the history's rule that a turn's results follow the message that asked; one
message per call keeps "every call has exactly one result", and the evidence index gives the
check its own id (``agent.evidence``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from agent.tooling import Tool, ToolResult
from agent.types import CheckMeta, Message, MessageMeta
from agent.verification import PlannedCall

RunCall = Callable[[Tool, str, float], ToolResult]
"""Runs ``tool`` with ``arguments`` within ``timeout`` seconds; never raises (``ToolStep``)."""
FIRST_PAUSE_SECONDS = 0.5
MAX_PAUSE_SECONDS = 8.0
OUTPUT_SHOWN_CHARS = 2000  # of a check's output, in the model's result and the thread


@dataclass(frozen=True)
class Before:
    """What the before-read found: its fields, or why there are none."""

    call: PlannedCall
    output: str
    fields: dict[str, object] | None

    def line(self) -> str:
        if self.fields is None:
            return f"Before: {self.call.tool} could not be read ({_cut(self.output, 300)})"
        return f"Before: {self.call.tool} said {_cut(self.output, 500)}"


@dataclass(frozen=True)
class CheckOutcome:
    """One check's end: passed, failed, or did not finish in time."""

    call: PlannedCall
    passed: bool
    timed_out: bool
    output: str
    attempts: int
    seconds: float
    budget: float
    before: Before | None = None
    refused: str | None = None
    """Why the check was not run at all (it differs from the approved one)."""

    def headline(self) -> str:
        """``Verified: ...``, ``Check failed: ...`` or ``Check did not finish in N s: ...``."""
        what = f"{self.call.tool} {self.call.arguments}"
        if self.refused is not None:
            return f"Check not run: {self.refused}"
        if self.passed:
            return f"Verified: {what}"
        if self.timed_out:
            return f"Check did not finish in {self.budget:g} s: {what}"
        tries = "1 try" if self.attempts == 1 else f"{self.attempts} tries"
        return f"Check failed: {what} ({tries} in {self.seconds:.0f} s)"

    def text(self) -> str:
        """What the model reads of it (after its evidence id)."""
        lines = [self.headline()]
        if self.before is not None:
            lines.append(self.before.line())
        if self.refused is None:
            lines.append(
                f"{'After' if self.before is not None else 'Output'}: {_cut(self.output, OUTPUT_SHOWN_CHARS)}"
            )
        return "\n".join(lines)


def read_before(call: PlannedCall, tool: Tool | None, run: RunCall, timeout: float) -> Before:
    if tool is None:
        return Before(call, f"no tool {call.tool} in this run", None)
    result = run(tool, call.arguments, timeout)
    fields = None
    if not result.is_error:
        fields = _json_object(result.output)
    return Before(call, result.output, fields)


def run_check(
    call: PlannedCall,
    tool: Tool | None,
    run: RunCall,
    *,
    seconds: float,
    action_started: float,
    before: Before | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> CheckOutcome:
    """The check, again after growing pauses, until it passes or ``seconds`` are spent.

    ``action_started``: when the action began (seconds since the epoch), for a check that the
    unit came up after it. An attempt still running when the budget ran out (it is given only
    what is left) did not finish: the verdict is the last attempt that did ("failed", with what it
    read), and only when none did, "did not finish". An attempt is not started with less time
    left than the previous one took: through a busy runner it would arrive after its deadline, and
    its "not run" would say nothing about the unit."""
    started = clock()
    if tool is None:  # the run does not offer it (an access policy took it away): nothing ran
        refused = f"{call.tool} is not offered in this run; verify by hand"
        return CheckOutcome(call, False, False, "", 0, 0.0, seconds, before, refused)
    attempts, finished, pause, output, took = 0, 0, FIRST_PAUSE_SECONDS, "", 0.0
    while (left := seconds - (clock() - started)) > 0 and (finished == 0 or left >= took):
        attempts += 1
        attempt_started = clock()
        result = run(tool, call.arguments, left)
        took = clock() - attempt_started
        answer = _strip_target(result.output)
        if call.passed(
            answer, result.is_error, action_started, before.output if before is not None else None
        ):
            return CheckOutcome(call, True, False, answer, attempts, clock() - started, seconds, before)
        remaining = seconds - (clock() - started)
        if remaining <= max(0.05, left * 0.05):  # it used what was left: it did not finish
            output = output if finished else answer  # with no reading, why it did not finish
            break
        finished, output = finished + 1, answer
        sleep(min(pause, remaining))
        pause = min(pause * 2, MAX_PAUSE_SECONDS)
    tries = finished or attempts
    return CheckOutcome(call, False, finished == 0, output, tries, clock() - started, seconds, before)


def with_health(outcome: CheckOutcome, health: CheckOutcome) -> CheckOutcome:
    """A passed check and the health URL it also requested, as one outcome: passed when both did;
    else the health request's (its call, so the thread says which part failed), with the check's
    before-read. The output holds both."""
    output = f"{outcome.output}\nHealth: {health.output or health.refused or '(no answer)'}"
    attempts, seconds = outcome.attempts + health.attempts, outcome.seconds + health.seconds
    if health.passed:
        return replace(outcome, output=output, attempts=attempts, seconds=seconds)
    return replace(
        health,
        output=output,
        attempts=attempts,
        seconds=seconds,
        before=outcome.before,
        budget=outcome.budget,
    )


def with_check(message: Message, outcome: CheckOutcome, ref: str | None, text: str) -> Message:
    """The change's result ``message`` with its check's ``text`` after it, labelled ``[ref]``
    (``meta["check"]`` says where it starts, for the evidence index)."""
    head = f"{message.content or ''}\n\n"
    label = f"[{ref}] " if ref is not None else ""
    check: CheckMeta = {
        "evidence": ref or "",
        "tool": outcome.call.tool,
        "arguments": outcome.call.arguments,
        "at": len(head) + len(label),
        "passed": outcome.passed,
    }
    meta: MessageMeta = {**message.meta, "check": check}
    return message.model_copy(update={"content": head + label + text, "meta": meta})


def _strip_target(output: str) -> str:
    """``[web-03] api.service: ...`` as the check reads it: the target's tag is not the unit's state."""
    if output.startswith("[") and "] " in output[:80]:
        return output.split("] ", 1)[1]
    return output


def _json_object(text: str) -> dict[str, object] | None:
    body = _strip_target(text).strip()
    start = body.find("{")
    if start < 0:
        return None
    try:
        found = json.loads(body[start:])
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
