"""A run's transcript as Slack messages a person reads: mrkdwn lines, not Markdown tables in a code block.

The Transcript button sends these to the clicker only (``chat.postEphemeral`` in the run's thread,
``bot.slack.handlers.actions``). Layout: a summary line or two, then the timeline, one numbered line per
step; a tool's output follows its call in a short code block. Everything from the people, the
model and the tools is inert (``mrkdwn.inert``; code blocks cannot be closed early: their backtick
runs become quotes), and cut: a transcript in Slack is for reading, the whole of it is in
``chatops runs show RUN --format markdown``. People are live mentions (Slack user IDs only).
"""

from __future__ import annotations

from bot.observability.transcript import CallView, Step, Transcript, seconds, stamp, tokens_line
from bot.slack.rendering.mrkdwn import escape, inert, inline_code, mention, one_line, split_mrkdwn

MESSAGE_CHARS = 3900
MAX_MESSAGES = 8
TEXT_LINE = 400  # characters of a request, reply or answer shown
OUTPUT_CHARS = 600  # characters of a tool's output shown
ARGUMENTS = 200


def _code(text: str, limit: int) -> str:
    body = inert(text.replace("```", "'''"))
    if len(body) > limit:
        body = body[:limit].rstrip() + "\n…"
    return f"```{body}```" if body.strip() else ""


def _offset(t: Transcript, at: float | None) -> str:
    origin = t.started_at or t.created_at
    return f" _(+{seconds(at - origin)})_" if at is not None else ""


def _call_lines(t: Transcript, call: CallView) -> list[str]:
    category = f" ({inert(one_line(call.category, 40))})" if call.category else ""
    line = f"    • {inline_code(call.tool, 60)}{category} {inert(one_line(call.arguments, ARGUMENTS))}"
    if call.approval is not None:
        by = f" by {mention(call.approval.decided_by)}" if call.approval.decided_by else ""
        line += f" · {escape(call.approval.status)}{by}"
    if call.outcome == "pending":
        return [line + " · no result yet"]
    took = f", {seconds(call.duration_seconds)}" if call.duration_seconds is not None else ""
    line += f" → *{escape(call.outcome)}*{took}{_offset(t, call.finished_at)}"
    output = _code(call.output or "", OUTPUT_CHARS)
    return [line, output] if output else [line]


def _step_lines(t: Transcript, step: Step, number: int) -> list[str]:
    text = inert(one_line(step.text or "", TEXT_LINE))
    if step.kind in ("request", "reply"):
        what = "Request" if step.kind == "request" else "Reply"
        return [f"*{number}. {what}* from {mention(step.author or '')}{_offset(t, step.at)}", f"> {text}"]
    if step.kind == "tool":
        return [f"*{number}. Tool result*", _code(step.text or "", OUTPUT_CHARS)]
    lines = [f"*{number}. Assistant*" + (f": {text}" if text else "")]
    for call in step.calls:
        lines += _call_lines(t, call)
    return lines


def transcript_text(t: Transcript) -> str:
    took = seconds(t.finished_at - (t.started_at or t.created_at)) if t.finished_at else "not finished"
    status = escape(t.status) + (f": {inert(one_line(t.error, 200))}" if t.error else "")
    lines = [
        f":scroll: *Transcript of run `{escape(t.run_id[:12])}`* · only you can see this",
        f"*Status:* {status} · *Requested by* {mention(t.requester)}",  # shown in the run's own thread
        f"*Started:* {stamp(t.started_at or t.created_at)} · *Took:* {took} "
        f"({seconds(t.active_seconds)} working) · *Iterations:* {t.iterations}",
        f"*Tokens:* {escape(tokens_line(t.usage))} · *Model:* {escape(t.model or '-')}",
        "",
    ]
    number = 0
    for step in t.steps:
        if step.kind == "system":
            continue
        number += 1
        lines += [line for line in _step_lines(t, step, number) if line]
    return "\n".join(lines)


def transcript_messages(t: Transcript, max_messages: int = MAX_MESSAGES) -> list[str]:
    """The transcript in messages Slack takes; past ``max_messages`` the rest is named, not sent."""
    parts = split_mrkdwn(transcript_text(t), MESSAGE_CHARS - 200)
    if len(parts) > max_messages:
        parts = parts[:max_messages]
        parts[-1] += (
            f"\n_… longer than {max_messages} messages: the whole transcript is "
            f"`chatops runs show {escape(t.run_id)} --format markdown`._"
        )
    return parts
