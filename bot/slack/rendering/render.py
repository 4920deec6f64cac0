"""Block Kit for everything the bot posts: the run card, approval cards, the decline modal, notices.

Rendering is a pure function of the presenter's view models (``bot.runs.presenter``) and approval records,
so it is unit-tested against Slack's limits without a server. Every text of the run card and the
notices is cut to its field's limit here, once, instead of trusting callers: a message Slack rejects
(``invalid_blocks``) is a lost update, and model or tool output can be any length. Approval cards
are the exception (``bot.slack.rendering.approval_card``): they are never cut, a call too long for one is refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from agent.evidence import REF
from agent.tool_step import RESERVED_ARGUMENTS
from agent.types import RunStatus
from bot.runs.presenter import CardView, Outcome, Step, StepStatus, StopNotice

# The approval card lives in its own module; these names are part of ``render``'s interface.
from bot.slack.rendering.approval_card import (
    ApprovalCard,
    approval_blocks,
    approval_card,
    approval_card_problem,
    approval_text,
    card_limits_problem,
    decision_line,
)
from bot.slack.rendering.blockkit import (
    ACTION_APPROVE,
    ACTION_DECLINE,
    ACTION_POSTMORTEM,
    ACTION_STOP,
    ACTION_TRANSCRIPT,
    BUTTON_TEXT,
    BUTTON_VALUE,
    CARD_TEXT,
    CONFIRM_BUTTON,
    CONFIRM_TEXT,
    CONFIRM_TITLE,
    CONTEXT_TEXT,
    MAX_BLOCKS,
    MESSAGE_TEXT,
    MODAL_TITLE,
    PRIVATE_METADATA,
    RUN_CONTROLS,
    SECTION_FIELD,
    SECTION_TEXT,
    VIEW_DECLINE,
    Block,
    actions,
    button,
    context,
    mrkdwn,
    plain,
    section,
    slack_date,
    texts,
)
from bot.slack.rendering.mrkdwn import (
    escape,
    inert,
    inline_code,
    link,
    mention,
    one_line,
    plural,
    split_mrkdwn,
    to_mrkdwn,
    truncate,
)
from bot.slack.rendering.people import name_people, step_people

__all__ = [
    "ACTION_APPROVE",
    "ACTION_DECLINE",
    "ACTION_POSTMORTEM",
    "ACTION_STOP",
    "ACTION_TRANSCRIPT",
    "BUTTON_TEXT",
    "BUTTON_VALUE",
    "CARD_TEXT",
    "CONFIRM_BUTTON",
    "CONFIRM_TEXT",
    "CONFIRM_TITLE",
    "CONTEXT_TEXT",
    "MAX_BLOCKS",
    "MESSAGE_TEXT",
    "MODAL_TITLE",
    "PRIVATE_METADATA",
    "SECTION_FIELD",
    "SECTION_TEXT",
    "VIEW_DECLINE",
    "ApprovalCard",
    "Block",
    "approval_blocks",
    "approval_card",
    "approval_card_problem",
    "approval_text",
    "card_limits_problem",
    "context",
    "decision_line",
    "mrkdwn",
    "plain",
    "section",
    "slack_date",
]

# Slack advises keeping a message's text under 4,000 characters; longer answers become several posts.
ANSWER_CHUNK = 3900
NOTIFICATION_TEXT = 300  # the ``text`` fallback shown in notifications; short is better

REASON_BLOCK = "reason"
REASON_ACTION = "reason_input"
REASON_MAX = 1000

CARD_STEPS = 15  # the newest steps shown on a run card; older ones are counted, not listed
STEP_ARGS, STEP_RESULT = 80, 120

_STATUS = {
    "queued": (":hourglass_flowing_sand:", "Queued"),
    "running": (":gear:", "Working"),
    "awaiting_approval": (":raised_hand:", "Waiting for approval"),
    "completed": (":white_check_mark:", "Done"),
    "failed": (":x:", "Failed"),
    "iteration_limit": (":warning:", "Stopped: iteration limit"),
    "deadline": (":warning:", "Stopped: deadline"),
    "budget": (":money_with_wings:", "Waiting: token budget reached"),
    "budget_spent": (":warning:", "Stopped: token budget"),
    "loop_detected": (":warning:", "Stopped: loop detected"),
    "cancelled": (":octagonal_sign:", "Cancelled"),
}
_STEP_ICON = {
    StepStatus.RUNNING: ":hourglass:",
    StepStatus.OK: ":white_check_mark:",
    StepStatus.ERROR: ":x:",
    StepStatus.REFUSED: ":no_entry_sign:",
}


def short_arguments(arguments: str, limit: int = STEP_ARGS) -> str:
    """``key=value, ...`` on one line, for a run card step. What the approval gate added to the call
    (``confirmed_by``, the plan, the grant) is left out: the step names its approver itself."""
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return one_line(arguments, limit)
    if isinstance(parsed, dict):
        shown = {key: value for key, value in parsed.items() if key not in RESERVED_ARGUMENTS}
        text = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in shown.items())
        return one_line(text, limit)
    return one_line(arguments, limit)


# -- the run card -------------------------------------------------------------------------------


def card_text(run_id: str, requester: str, card: CardView) -> str:
    """The notification fallback for the card."""
    _, label, detail = status_label(card)
    said = f"{label} ({detail})" if detail else label
    return truncate(
        f"{said}: run for {mention(requester)} ({plural(len(card.steps), 'step')})", NOTIFICATION_TEXT
    )


def status_label(card: CardView) -> tuple[str, str, str]:
    """The card's icon, status word and what it did: a finished run says what happened, not "Done"."""
    if card.status is RunStatus.COMPLETED:
        return outcome_label(card.outcome)
    icon, label = _STATUS.get(card.status.value, (":grey_question:", card.status.value))
    return icon, label, ""


def outcome_label(outcome: Outcome) -> tuple[str, str, str]:
    """A completed run: changes made, declined, only looked, or answered without running a tool."""
    others = [
        plural(count, noun) + " " + verb
        for count, noun, verb in (
            (outcome.unknown, "change", "of unknown outcome: check the target"),
            (outcome.failed_changes, "change", "failed"),
            (outcome.declined, "call", "declined"),
            (outcome.refused, "call", "refused"),
        )
        if count
    ]
    if outcome.changed:
        return ":white_check_mark:", "Done", ", ".join([plural(outcome.changed, "change") + " made", *others])
    if outcome.unknown:  # never "nothing was changed": it may have been
        return ":warning:", "Finished", ", ".join(others)
    if outcome.declined:
        return ":no_entry:", "Declined", "nothing was changed"
    if outcome.failed_changes:
        return ":warning:", "Finished", ", ".join(others)
    if outcome.looked:
        return ":white_check_mark:", "Done", "looked only, nothing was changed"
    if outcome.refused:
        return ":no_entry_sign:", "Answered", f"no tool ran ({', '.join(others)})"
    return ":speech_balloon:", "Answered", "no tool ran"


def source_line(url: str) -> str:
    """The link back to what started a run (an alert's source), as the URL itself."""
    return f":link: alert source: {link(url)}"


def follow_up_line(follows: str) -> str:
    """A follow-up run's card names the thread's earlier run it continues (an id: ours, escaped)."""
    return f":leftwards_arrow_with_hook: follow-up: continues run `{escape(follows[:12])}` of this thread"


def card_blocks(
    run_id: str, requester: str, card: CardView, source_url: str = "", follows: str = ""
) -> list[Block]:
    """Status, steps, usage, and a Stop button while the run is not finished."""
    icon, label, detail = status_label(card)
    said = f"*{label}* · {detail}" if detail else f"*{label}*"
    head: list[Block] = [section(f"{icon} {said} · requested by {mention(requester)}")]
    blocks: list[Block] = []
    usage = [plural(card.iterations, "iteration")]
    if card.tokens or card.status.terminal:  # counted as the run goes (each iteration's start)
        usage.append(plural(card.tokens, "token"))
        if card.cost:  # LLM_PRICES (bot.prices): the bot's own number
            usage.append(card.cost)
    usage.append(f"run `{escape(run_id[:12])}`")
    if card.targets:  # the inventory's names (validated), never the model's text
        usage.insert(0, "targets " + ", ".join(f"`{escape(name)}`" for name in card.targets))
    blocks.append(context(" · ".join(usage)))
    if source_url:
        blocks.append(context(source_line(source_url)))
    if follows:
        blocks.append(context(follow_up_line(follows)))
    if not card.status.terminal:
        blocks.append(actions(RUN_CONTROLS, [button(ACTION_STOP, "Stop", run_id)]))
    else:  # a finished run offers its transcript for the post-mortem (bot.observability.transcript)
        finished = [
            button(ACTION_TRANSCRIPT, "Transcript", run_id),
            button(ACTION_POSTMORTEM, "Postmortem draft", run_id),
        ]
        blocks.append(actions(RUN_CONTROLS, finished))
    # Slack refuses blocks holding more than about 12,000 characters in all (msg_blocks_too_long,
    # blockkit.CARD_TEXT): the newest steps that fit are shown, the others counted.
    room = CARD_TEXT - text_length([*head, *blocks])
    people = step_people(requester, card.steps)
    for shown in range(min(CARD_STEPS, len(card.steps)), -1, -1):
        steps = [section(chunk) for chunk in _step_chunks(card.steps, shown, people)]
        if text_length(steps) <= room:
            break
    return [*head, *steps, *blocks][:MAX_BLOCKS]


def text_length(blocks: list[Block]) -> int:
    """The characters of all the text in ``blocks``: what Slack's total limit counts."""
    return sum(len(text) for text in texts(blocks))


def step_line(step: Step, people: frozenset[str] = frozenset()) -> str:
    """``:icon: *E3* `tool` args → result (1.2s) · approved by @x``, one line (``E3``: the result's
    evidence id, what the Findings message and the answer's citations link here for).

    Arguments and results are the model's and the tools' (log lines): inert (``mrkdwn.inert``), but
    for the IDs of the run's ``people`` (``bot.slack.rendering.people``), named.
    """
    line = f"{_STEP_ICON[step.status]} {inline_code(step.tool, 60)}"
    if step.evidence and REF.fullmatch(step.evidence):  # the id findings and answers cite (code's)
        line = f"{_STEP_ICON[step.status]} *{step.evidence}* {inline_code(step.tool, 60)}"
    args = short_arguments(step.arguments)
    if args:
        line += f" {name_people(inert(args), people)}"
    result = step_result(step)
    if result:
        line += f" → {name_people(inert(one_line(result, STEP_RESULT)), people)}"
    if step.duration_seconds is not None:
        line += f" _({step.duration_seconds:.1f}s)_"
    if step.confirmed_by:
        line += f" · approved by {mention(step.confirmed_by)}"
    return line


def step_result(step: Step) -> str:
    """The tool's output without the "(approved by U…)" line the tool adds for the model: the step
    names its approver itself, as a mention."""
    note = f"(approved by {step.confirmed_by})" if step.confirmed_by else ""
    result = step.result.rstrip()
    return result.removesuffix(note).rstrip() if note and result.endswith(note) else step.result


def _step_chunks(steps: Sequence[Step], shown: int, people: frozenset[str]) -> list[str]:
    """The newest ``shown`` step lines packed into section-sized chunks; older ones are counted."""
    lines = [step_line(step, people) for step in steps[len(steps) - shown :]] if shown > 0 else []
    hidden = len(steps) - len(lines)
    if hidden > 0:
        lines.insert(0, f"_… {plural(hidden, 'earlier step')}_")
    return split_mrkdwn("\n".join(lines), SECTION_TEXT) if lines else []


# -- answers and notices ------------------------------------------------------------------------


def answer_chunks(
    markdown: str, people: frozenset[str] = frozenset(), finish: Callable[[str], str] | None = None
) -> list[str]:
    """The final answer as Slack mrkdwn, split into postable messages; the run's ``people``
    (``bot.slack.rendering.people``) named as mentions rather than raw IDs; ``finish``: what
    completes the converted text before it is split (the citations: ``bot.slack.rendering.citations``)."""
    converted = name_people(to_mrkdwn(markdown), people)
    return split_mrkdwn(finish(converted) if finish is not None else converted, ANSWER_CHUNK)


def stop_notice_text(notice: StopNotice, last_step: Step | None = None) -> str:
    """What a terminal boundary (limit, deadline, budget, loop, failure, stop) tells the thread.

    The reason (a model error, say) and the last step are the model's and the tools' text: inert.
    """
    icon, label = _STATUS.get(notice.status.value, (":warning:", notice.status.value))
    lines = [f"{icon} *{label}*"]
    people = step_people("", [last_step] if last_step is not None else [])
    if notice.reason:
        lines.append(f"Why: {inert(one_line(notice.reason, 500))}")
    names = dict.fromkeys(notice.tools_used)
    used = ", ".join(inline_code(name, 60) for name in names) or "none"
    lines.append(f"Iterations: {notice.iterations} · Tokens: {notice.tokens:,} · Tools called: {used}")
    if last_step is not None:
        lines.append(f"Last state: {step_line(last_step, people)}")
    return truncate("\n".join(lines), ANSWER_CHUNK)


def transcript_messages(markdown: str, run_id: str, max_messages: int = 12) -> list[str]:
    """A Markdown transcript as thread messages: code blocks (copyable as Markdown) within Slack's limits.

    Lines are kept whole where they fit; three backticks inside the text become three quotes so
    no block ends early. Past ``max_messages`` the rest is left to ``chatops runs show``.
    """
    room = ANSWER_CHUNK - 120  # the heading and the fences
    chunks: list[str] = []
    current = ""
    for text in inert(markdown.replace("```", "'''")).splitlines():
        line = text
        while len(line) > room:
            chunks, current = _flush(chunks, current), ""
            chunks.append(line[:room])
            line = line[room:]
        if current and len(current) + len(line) + 1 > room:
            chunks, current = _flush(chunks, current), ""
        current = f"{current}\n{line}" if current else line
    chunks = _flush(chunks, current)
    cut = len(chunks) > max_messages
    chunks = chunks[:max_messages]
    messages = []
    for number, chunk in enumerate(chunks, 1):
        part = f" (part {number} of {len(chunks)})" if len(chunks) > 1 else ""
        messages.append(f":scroll: *Transcript of run `{escape(run_id[:12])}`*{part}\n```{chunk}```")
    if cut:
        messages[-1] += (
            f"\n_Longer than {max_messages} messages: see `chatops runs show {escape(run_id)} --format markdown`._"
        )
    return messages


def _flush(chunks: list[str], current: str) -> list[str]:
    return [*chunks, current] if current else chunks


# -- the decline modal ---------------------------------------------------------------------------


def decline_modal(approval_id: str, metadata: dict[str, str], tool: str) -> dict[str, Any]:
    """The modal asking for an optional reason; ``private_metadata`` carries the approval id."""
    private = json.dumps({"approval_id": approval_id, **metadata}, separators=(",", ":"))
    if len(private) > PRIVATE_METADATA:
        private = json.dumps({"approval_id": approval_id}, separators=(",", ":"))
    return {
        "type": "modal",
        "callback_id": VIEW_DECLINE,
        "private_metadata": private,
        "title": plain("Decline", MODAL_TITLE),
        "submit": plain("Decline", MODAL_TITLE),
        "close": plain("Cancel", MODAL_TITLE),
        "blocks": [
            section(f"Decline {inline_code(tool)}? The model will be told your reason."),
            {
                "type": "input",
                "block_id": REASON_BLOCK,
                "optional": True,
                "label": plain("Reason", 2000),  # Slack adds "(optional)" itself
                "element": {
                    "type": "plain_text_input",
                    "action_id": REASON_ACTION,
                    "multiline": True,
                    "max_length": REASON_MAX,
                },
            },
        ],
    }


def modal_reason(view: dict[str, Any]) -> str | None:
    """The reason typed into the decline modal, or ``None`` when left empty."""
    value: object = view
    for name in ("state", "values", REASON_BLOCK, REASON_ACTION, "value"):
        value = value.get(name) if isinstance(value, dict) else None
    return (value.strip() or None) if isinstance(value, str) else None


def modal_metadata(view: dict[str, Any]) -> dict[str, str]:
    """The ``private_metadata`` a decline modal was opened with (empty when unreadable)."""
    raw = view.get("private_metadata")
    try:
        data = json.loads(raw) if isinstance(raw, str) and raw else {}
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
