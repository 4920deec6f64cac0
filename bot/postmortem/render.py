"""A postmortem as Markdown (a file people edit) and as JSON (``chatops postmortem --format json``).

Every text in a ``Postmortem`` that came from people, tools, models or alert senders is made inert
in the Markdown: a one-line text has every ASCII punctuation character backslash-escaped (CommonMark
shows it as itself: no emphasis, link, heading, list, HTML, ``<@U…>`` or ``<!channel>``), its
whitespace collapsed (no new block can start) and its control characters dropped; the answer, the
one multi-line text, goes in a ``~~~`` fence longer than any run of tildes in it. Links are shown
only when they are ``https`` URLs without spaces or angle brackets (a Slack permalink); otherwise
the line's audit entry id or message ts is its link.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable

from bot.postmortem.facts import Line, Postmortem
from bot.postmortem.undo_state import Undo
from bot.postmortem.zone import Zone

_PUNCTUATION = re.compile(r"([!#&()*+\-./:<>@\[\\\]^_`{|}~])")  # not , ' " ? ; = % $: inert as they are
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_SAFE_URL = re.compile(r"https://[A-Za-z0-9.-]+/[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=%-]*")


def inert(text: str) -> str:
    """``text`` on one line, showing what it says and nothing else in Markdown."""
    flat = " ".join(_CONTROL.sub(" ", text).split())
    return _PUNCTUATION.sub(r"\\\1", flat)


def code(text: str) -> str:
    """An id as a code span (shown literally: no escapes inside it, so none are added)."""
    return "`" + " ".join(_CONTROL.sub(" ", text).replace("`", "").split()) + "`"


def fenced(text: str) -> str:
    """``text`` whole, in a fence nothing in it can close."""
    clean = _CONTROL.sub(lambda m: m.group(0) if m.group(0) in "\n\t" else " ", text)
    longest = max((len(run) for run in re.findall(r"~+", clean)), default=0)
    marks = "~" * max(3, longest + 1)
    return f"{marks}text\n{clean}\n{marks}"


def utc(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at)) if at else "-"


def _link(line: Line) -> str:
    if line.link and _SAFE_URL.fullmatch(line.link):
        return f"[{'audit ' + line.ref if line.source == 'audit' else 'message'}](<{line.link}>)"
    what = "audit" if line.source == "audit" else "message ts"
    return f"{what} {code(line.ref)}"


def _zone_text(text: str) -> str:
    """A zone's name is letters, digits and ``_+-/`` (``Zone.of``): only ``_`` could mean emphasis."""
    return text.replace("_", "\\_")


def _undo(undo: Undo, when: Callable[[float], str]) -> str:
    """The change's undo state (``bot.postmortem.undo_state``) in words."""
    by = f" requested by {inert(undo.requested_by)}" if undo.requested_by else ""
    run = f" (run {code(undo.undo_run[:12])})" if undo.undo_run else ""
    checked = f", checked: {inert(undo.check)}" if undo.check else ", no check recorded"
    said = {
        "none": "no undo",
        "not offered": f"no undo offered ({inert(undo.problem)})",
        "offered": f"undo offered until {when(undo.until)}",
        "expired": f"undo offered until {when(undo.until)}, expired unused",
        "requested": f"undo{by}{run}, not run",
        "executed": f"undo{by}, executed{run}{checked}",
        "failed": f"undo{by}, ran and failed{run}",
    }
    return said.get(undo.state, f"undo {inert(undo.state)}")


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "not resolved when this draft was made"
    minutes = int(seconds // 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def to_markdown(pm: Postmortem, zone: Zone | None = None) -> str:
    """The draft; ``zone``: the reader's (Slack's ``users.info``), shown beside UTC on the timeline."""
    impact = pm.impact

    def when(at: float) -> str:
        return f"{utc(at)} ({_zone_text(zone.local(at))})" if zone and at else utc(at)

    out = [
        f"# {inert(pm.title)}",
        "",
        f"Draft made by chatops from run {code(pm.run_id)} in channel {code(pm.channel)}"
        + (f", [thread](<{pm.thread_link}>)" if _SAFE_URL.fullmatch(pm.thread_link or "") else "")
        + ". Every timeline line links to the audit entry or the message that backs it.",
        "",
        "## Summary",
        "",
        f"- Conclusion: {inert(pm.conclusion)}"
        + (f" (confidence {inert(pm.confidence)})" if pm.confidence else ""),
        f"- Run status: {inert(pm.status)}",
    ]
    if pm.root_cause:
        out.append("- Root cause (verified evidence only):")
        for cause in pm.root_cause:
            out.append(f"  - {inert(cause.statement)}")
            out += [
                f"    - {inert(ref)} ({inert(tool)}): “{inert(quote)}”" for ref, tool, quote in cause.evidence
            ]
    else:
        out.append("- Root cause: none with verified evidence")
    out += ["", "## Impact", ""]
    if impact.kind == "alert":
        out += [
            f"- Alert: {inert(impact.title)}"
            + (f" (severity {inert(impact.severity)})" if impact.severity else ""),
            f"- Fired (the alert thread's first message): {utc(impact.started_at)}",
            f"- Status: {inert(impact.status)}"
            + (f", resolved {utc(impact.resolved_at)}" if impact.resolved_at else ""),
            f"- Duration: {_duration(impact.duration_seconds)}",
        ]
    else:
        out += [f"- Asked by {inert(impact.requester)} at {utc(impact.started_at)}: {inert(impact.title)}"]
    shown = f", and {_zone_text(zone.label)}" if zone is not None else ""
    out += ["", f"## Timeline (UTC{shown})", ""]
    out += [
        f"- {when(line.at)} · {inert(line.actor)} · {inert(line.what)} · {_link(line)}"
        for line in pm.timeline
    ]
    out += ["", "## Actions taken", ""]
    if not pm.actions:
        out.append("- none: the run changed nothing")
    for action in pm.actions:
        target = f" on {inert(action.target)}" if action.target else ""
        approved = f", approved by {inert(action.approved_by)}" if action.approved_by else ""
        check = f"; check {inert(action.check)}" if action.check else "; no check recorded"
        out.append(
            f"- {when(action.at)} {inert(action.tool)}{target} {inert(action.arguments)}{approved}: "
            f"{inert(action.outcome)}{check}; {_undo(action.undo, when)} · audit {code(action.audit_id)}"
        )
    out += ["", "## To discuss", ""]
    out += [f"- {inert(question)}" for question in pm.to_discuss] or ["- nothing the facts raise"]
    out += ["", "## The run's answer", "", fenced(pm.answer or "(no answer)"), ""]
    return "\n".join(out)


def to_json(pm: Postmortem) -> str:
    return json.dumps(pm.as_json(), indent=2, ensure_ascii=False)
