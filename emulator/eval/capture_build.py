"""A finished run as a scenario file's data (``chatops eval capture``; the reading is ``capture``).

From the run's history (messages, tool calls with their arguments, tool results with their
evidence ids) and its findings as shown:

* the fleet: each target the run called a tool on. ``tail_log``'s outputs become the files they
  were read from where that is exact (``emulator.eval.capture_logs``); every other read-only
  call's output is **frozen** under ``frozen:`` (tool -> arguments -> output,
  ``emulator.eval.fleet.FrozenCall``). Frozen, not inverted: what a real host printed (a real
  ``df``, a production catalog tool, a service's status with its absolute ``since``) has no exact
  inverse in the simulated state, and the check that matters is that the replay reads back what
  the run read. Changes (mutating, destructive calls) are not frozen: the replay makes them again;
* the start: the alert that started the run (its labels and summary as its root showed them; when
  it began firing is not kept, so the replay's alert fires ``started``'s default before), else the
  first user message as the mention; the later user messages as replies;
* ``reference``: the run's own turns in order (texts, calls with their arguments as made, the
  final answer), escaped for the scripted language (``$`` as ``$$`` in texts and arguments,
  braces doubled in texts, which are ``str.format`` templates);
* ``truth``: the supported hypotheses as root causes (the model's structured ``cause`` when it
  has one, as the scorer reads it; else ``TARGET:finding:ID`` matched by the whole statement), the verified
  quotes as facts, the approved changes that ran as fixes. Marked ``unconfirmed`` unless a person
  passed ``--confirm``: the loader refuses an unconfirmed truth (``emulator.eval.spec``), naming the
  file and what to check.

Everything is already redacted by the bot; it is redacted again here with the bot's own
redactor (``redact``), before escaping, so quotes still occur in the outputs they cite.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent.findings import Conclusion, Findings, HypothesisStatus
from agent.types import Message
from emulator.eval.capture_logs import TAIL_LOG, InvertedLogs, TailCall, invert_tail_logs
from emulator.eval.errors import EvalError
from emulator.eval.scoring.rca import normalised
from emulator.eval.truth import CAUSE_ID

Redact = Callable[[str], str]
_SCALARS = (str, int, float, bool)
_RE2_SPECIAL = re.compile(r"([\\.+*?()|\[\]{}^$#&~-])")
_CHANGES = ("mutating", "destructive")
_NOT_ARGUMENTS = ("target", "confirmed_by", "approved_plan")


class CaptureError(EvalError):
    """A run that cannot be captured as asked (gone, condensed, nothing to confirm)."""


@dataclass(frozen=True)
class CapturedRun:
    run_id: str
    history: Sequence[Message]
    findings: Findings | None
    alert: CapturedAlert | None = None  # when an alert started it


@dataclass(frozen=True)
class CapturedAlert:
    """The alert that started a run, as its group's root showed it."""

    labels: Mapping[str, str]
    title: str
    summary: str = ""


def literal_pattern(text: str) -> str:
    """``text`` as an RE2 pattern matching it literally (``re.escape`` escapes what RE2 refuses)."""
    return _RE2_SPECIAL.sub(r"\\\1", text)


def script_text(text: str) -> str:
    """A reply text of the scripted model: ``$`` is ``$$``, braces doubled (a ``str.format`` template)."""
    return text.replace("$", "$$").replace("{", "{{").replace("}", "}}")


def script_value(value: Any) -> Any:
    """A tool call's argument for the scripted model: ``$`` as ``$$`` in every string."""
    if isinstance(value, str):
        return value.replace("$", "$$")
    if isinstance(value, list):
        return [script_value(item) for item in value]
    if isinstance(value, dict):
        return {key: script_value(item) for key, item in value.items()}
    return value


def redacted(value: Any, redact: Redact) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redacted(item, redact) for item in value]
    if isinstance(value, dict):
        return {key: redacted(item, redact) for key, item in value.items()}
    return value


def _arguments(raw: str, redact: Redact) -> dict[str, Any]:
    try:
        parsed = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {}
    return redacted(parsed, redact) if isinstance(parsed, dict) else {}


@dataclass(frozen=True)
class _Call:
    tool: str
    target: str | None
    arguments: dict[str, Any]
    category: str
    output: str
    approved: bool


def _calls(history: Sequence[Message], redact: Redact) -> list[_Call]:
    """Every answered tool call, in order, with its (redacted) arguments and output."""
    asked = {call.id: call for message in history for call in message.tool_calls}
    calls = []
    for message in history:
        if message.role != "tool" or message.tool_call_id not in asked:
            continue
        call, meta = asked[message.tool_call_id], message.meta
        target = meta.get("target")
        output = redact(message.content or "")
        if target:
            output = output.removeprefix(f"[{target}] ")
        calls.append(
            _Call(
                tool=call.name,
                target=target,
                arguments=_arguments(call.arguments, redact),
                category=str(meta.get("category", "")),
                output=output,
                approved=bool(meta.get("confirmed_by")) and not call.refused,
            )
        )
    return calls


def inverted_logs(calls: Sequence[_Call]) -> InvertedLogs | None:
    """The files the run's ``tail_log`` calls read, when every one of them can be inverted."""
    tails = [TailCall(c.target, c.arguments, c.output) for c in calls if c.tool == TAIL_LOG]
    return invert_tail_logs(tails) if tails else None


def fleet_of(calls: Sequence[_Call], logs: InvertedLogs | None) -> dict[str, Any]:
    targets: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for call in calls:
        if call.target is None:
            continue
        frozen = targets.setdefault(call.target, {})
        if call.tool == TAIL_LOG and logs is not None:
            continue  # read from the file it was inverted into
        own = {k: v for k, v in call.arguments.items() if k != "target"}
        if call.category != "read_only" or not all(isinstance(v, _SCALARS) for v in own.values()):
            continue  # a change is replayed as it is; a list or mapping argument cannot be a key
        frozen.setdefault(call.tool, []).append({"arguments": own, "output": call.output})
    if not targets:
        raise CaptureError("the run called no tool on a target: there is no state to freeze")
    files = logs.files if logs is not None else {}
    return {
        "targets": {
            name: {
                **(
                    {"files": [{"path": p, "lines": lines} for p, lines in files[name].items()]}
                    if name in files
                    else {}
                ),
                **({"frozen": frozen} if frozen else {}),
            }
            for name, frozen in targets.items()
        }
    }


def _replayed(name: str, arguments: dict[str, Any], logs: InvertedLogs | None) -> dict[str, Any]:
    """A call's arguments for the scripted model; a ``tail_log`` of an inverted file reads it on the
    simulated host (``${TARGET.log_dir}``, inserted after the escaping)."""
    replayed: dict[str, Any] = script_value(arguments)
    target, path = arguments.get("target"), arguments.get("path")
    if logs is None or name != TAIL_LOG or not isinstance(target, str) or not isinstance(path, str):
        return replayed
    where = logs.paths.get((target, path))
    if where is not None:
        replayed["path"] = "${" + f"{target}.log_dir" + "}" + where.removeprefix("/var/log")
    return replayed


def reference_of(
    history: Sequence[Message], redact: Redact, logs: InvertedLogs | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The run's own turns as a scripted model, and the user messages after the first as replies."""
    turns: list[dict[str, Any]] = []
    replies: list[dict[str, Any]] = []
    for message in history[_first_user(history) + 1 :]:
        if message.role == "user" and message.content and turns:
            replies.append({"turn": len(turns), "text": redact(message.content)[:3000], "user": "requester"})
        if message.role != "assistant":
            continue
        turn: dict[str, Any] = {}
        if message.content:
            turn["text"] = script_text(redact(message.content))
        if message.tool_calls:
            turn["tool_calls"] = [
                {
                    "name": call.name,
                    "arguments": _replayed(call.name, _arguments(call.arguments, redact), logs),
                }
                for call in message.tool_calls
            ]
        turns.append(turn or {"text": "..."})
    return {"latency": 0, "turns": turns}, replies


def _first_user(history: Sequence[Message]) -> int:
    for index, message in enumerate(history):
        if message.role == "user":
            return index
    raise CaptureError("the run's history has no user message: nothing started it")


def mention_of(history: Sequence[Message], redact: Redact) -> str:
    text = redact(history[_first_user(history)].content or "").strip()
    return text[:3000] or "(no text)"


def truth_of(
    run: CapturedRun, calls: Sequence[_Call], targets: Sequence[str], redact: Redact
) -> dict[str, Any]:
    """The truth the run's findings claim: its supported hypotheses, verified quotes, approved changes."""
    findings = run.findings
    if findings is None:
        raise CaptureError(
            "the run recorded no findings: there is no truth to take from it; write one by hand"
        )
    supported = [h for h in findings.hypotheses if h.status is HypothesisStatus.SUPPORTED]
    if not supported and findings.conclusion is not Conclusion.NO_FAULT_FOUND:
        raise CaptureError(
            f"the run supported no hypothesis and concluded {findings.conclusion.value}: there is no truth "
            "to take from it; write one by hand"
        )
    causes: list[dict[str, Any]] = []
    for hypothesis in supported:
        statement = redact(hypothesis.statement)
        cause = normalised(hypothesis.cause) if hypothesis.cause else ""
        if CAUSE_ID.fullmatch(cause):  # the scorer takes the model's structured cause as it is
            causes += [] if any(c["id"] == cause for c in causes) else [{"id": cause}]
            continue
        where = next((e.target for e in hypothesis.verified_evidence if e.target in targets), targets[0])
        causes.append(
            {"id": f"{where}:finding:{hypothesis.id.lower() or 'h'}", "match": [literal_pattern(statement)]}
        )
    facts = _facts(supported or findings.hypotheses, redact)
    if not facts:
        raise CaptureError(
            "no evidence of the run was verified: a truth needs at least one fact; write one by hand"
        )
    fixes = [
        {"tool": call.tool, "target": call.target, "arguments": _fix_arguments(call.arguments)}
        for call in calls
        if call.category in _CHANGES and call.approved and call.target in targets
    ]
    return {"root_causes": causes, "facts": facts, **({"fixes": fixes} if fixes and causes else {})}


def _facts(hypotheses: Sequence[Any], redact: Redact) -> list[str]:
    facts: list[str] = []
    for hypothesis in hypotheses:
        for evidence in hypothesis.verified_evidence:
            quote = redact(evidence.quote).strip()
            if quote and len(quote) <= 500 and quote not in facts:
                facts.append(quote)
    return facts


def _fix_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The change's own arguments as made: text as a literal pattern (the truth takes no ``${...}``)."""
    rules: dict[str, Any] = {}
    for name, value in arguments.items():
        if name in _NOT_ARGUMENTS or not isinstance(value, (*_SCALARS, type(None))):
            continue
        rules[name] = {"matches": literal_pattern(value)} if isinstance(value, str) else value
    return rules


def tags_of(truth: Mapping[str, Any]) -> list[str]:
    causes = len(truth["root_causes"])
    tags = ["no-fault" if causes == 0 else "single-cause" if causes == 1 else "two-causes"]
    return tags + (["needs-approval"] if truth.get("fixes") else [])


def scenario_data(run: CapturedRun, name: str, confirmed: bool, redact: Redact) -> dict[str, Any]:
    """The scenario file's data; an unconfirmed capture's truth says what a person must check."""
    calls = _calls(run.history, redact)
    logs = inverted_logs(calls)
    fleet = fleet_of(calls, logs)
    targets = list(fleet["targets"])
    truth = truth_of(run, calls, targets, redact)
    for cause in truth["root_causes"]:  # a structured cause may name a target the run never called
        fleet["targets"].setdefault(cause["id"].split(":", 1)[0], {})
    reference, replies = reference_of(run.history, redact, logs)
    mention = mention_of(run.history, redact)
    start: dict[str, Any] = {"alert": alert_start(run.alert, redact)} if run.alert else {"mention": mention}
    if not confirmed:
        truth = {
            "unconfirmed": f"captured from run {run.run_id} without --confirm: this is what the run claimed, "
            "not yet what a person says is true",
            **truth,
        }
    return {
        "name": name,
        "description": f"Captured from run {run.run_id[:12]}: {mention.splitlines()[0]}"[:300],
        "tags": tags_of(truth) + (["alert"] if run.alert else []),
        "incident": f"Captured with chatops eval capture from run {run.run_id}.",
        "fleet": fleet,
        "start": start,
        **({"replies": replies} if replies else {}),
        "truth": truth,
        "reference": reference,
    }


def alert_start(alert: CapturedAlert, redact: Redact) -> dict[str, Any]:
    """The scenario's ``start: alert:`` (redacted)."""
    labels = {str(k): redact(str(v)) for k, v in alert.labels.items()}
    labels["alertname"] = labels.get("alertname") or redact(alert.title) or "CapturedAlert"
    summary = redact(alert.summary)
    return {"labels": labels, **({"annotations": {"summary": summary}} if summary else {})}
