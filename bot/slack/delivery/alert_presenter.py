"""Alert threads in Slack (``bot.runs.presenter.AlertPresenter``): the root message and its notes.

Everything shown that came from the alert (title, labels, annotations, summary) is the sender's
text and is shown inert (``mrkdwn.inert``); links are shown as their real URL (``mrkdwn.link``),
never as text a sender chose; every mrkdwn object is ``verbatim``. The text passes through the
worker's redactor before it leaves, like every other message the bot posts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from slack_sdk import WebClient

from bot.memory.similar import Similar
from bot.runs.presenter import AlertView
from bot.slack.delivery.similar_note import post_similar_note
from bot.slack.rendering.blockkit import (
    ACTION_INVESTIGATE,
    actions,
    button,
    context,
    fit_text,
    mrkdwn,
    notification_text,
    section,
)
from bot.slack.rendering.citations import without_citations
from bot.slack.rendering.mrkdwn import escape, inert, inline_code, link, mention, to_mrkdwn

_LABELS_SHOWN = 12
_RUNBOOK_TITLE_CHARS = 200
_CHANGES_SHOWN = 5
_CHANGE_CHARS = 200
Block = dict[str, Any]


class SlackAlertPresenter:
    def __init__(self, client: WebClient, redact: Callable[[str], str] | None = None) -> None:
        self._client = client
        self._redact = redact or (lambda text: text)

    def post_alert(self, channel: str, view: AlertView) -> str | None:
        response = self._client.chat_postMessage(channel=channel, **self._message(alert_blocks(view)))
        ts = response.get("ts")
        return str(ts) if ts else None

    def update_alert(self, channel: str, ts: str, view: AlertView) -> None:
        self._client.chat_update(channel=channel, ts=ts, **self._message(alert_blocks(view)))

    def post_alert_note(self, channel: str, thread_ts: str, text: str) -> str | None:
        # The note is the job's sentence around a sender's words (a resolved alert's title): inert.
        message = self._message([section(inert(self._redact(text)))])
        response = self._client.chat_postMessage(channel=channel, thread_ts=thread_ts, **message)
        ts = response.get("ts")
        return str(ts) if ts else None

    def post_similar_note(self, channel: str, thread_ts: str, found: Sequence[Similar]) -> str | None:
        """The thread's "Similar:" note with its Forget buttons (``bot.slack.delivery.similar_note``)."""
        return post_similar_note(self._client, channel, thread_ts, found, self._redact)

    def _message(self, blocks: list[Block]) -> dict[str, Any]:
        """The blocks redacted, and the notification ``text`` taken from them (``notification_text``):
        the fallback is the blocks' own inert words, so the two cannot drift apart."""
        for block in blocks:
            _redact_block(block, self._redact)
        return {"text": notification_text(blocks), "blocks": blocks}


def alert_blocks(view: AlertView) -> list[Block]:
    """The root message: state and title, the facts, labels, summary, links, and what the bot does."""
    icon = ":white_check_mark:" if view.status == "resolved" else ":rotating_light:"
    state = "RESOLVED" if view.status == "resolved" else "FIRING"
    blocks: list[Block] = [section(f"{icon} *{state}* · {inert(' '.join(view.title.split()))}")]
    count = f"{view.alerts} ({view.resolved_alerts} resolved)" if view.resolved_alerts else str(view.alerts)
    facts = [f"*Source*\n{escape(view.source)}", f"*Alerts*\n{count}"]
    if view.severity:
        facts.append(f"*Severity*\n{inert(view.severity)}")
    if view.target:
        facts.append(f"*Target*\n`{escape(view.target)}`")  # an inventory name: validated
    if view.runbook:  # the team's runbook's title: text anyone with the runbook repo wrote, inert
        facts.append(f"*Runbook*\n{inert(' '.join(view.runbook.split())[:_RUNBOOK_TITLE_CHARS])}")
    blocks.append({"type": "section", "fields": [mrkdwn(text, 2000) for text in facts]})
    if view.labels:
        shown = ", ".join(f"{key}={value}" for key, value in view.labels[:_LABELS_SHOWN])
        more = f" (+{len(view.labels) - _LABELS_SHOWN} more)" if len(view.labels) > _LABELS_SHOWN else ""
        blocks.append(context(inert(shown) + more))
    if view.summary:
        blocks.append(section(inert(view.summary)))
    if view.changes:  # (bot.alerts.changes) our time and kind; the host's or webhook's words as inline code
        shown = "\n".join(
            f"{escape(head)}: {inline_code(what, _CHANGE_CHARS)}"
            for head, what in view.changes[:_CHANGES_SHOWN]
        )
        blocks.append(section(f"*Changed before this alert:*\n{shown}"))
    if view.links:
        blocks.append(context(" · ".join(f"{escape(what)}: {link(url)}" for what, url in view.links[:4])))
    if view.answer:
        # The model's Markdown as the thread's answer shows it (``to_mrkdwn``: inert, links as their
        # URL), without its citations: their verdicts (verified or not) are shown in the thread only,
        # so nothing here looks checked that code did not check.
        answer = to_mrkdwn(without_citations(view.answer))
        blocks.append(section(f"*What the investigation found*\n{answer}"))
        blocks.append(context("Its evidence, each citation checked against the tool output: in the thread."))
    when = time.strftime("%H:%M:%S UTC", time.gmtime(view.last_notified_at)) if view.last_notified_at else ""
    status = [f"{view.notifications} notification(s)"] + ([f"last notified {when}"] if when else [])
    if view.held and view.investigate_button:  # a run under way is not held back any more
        status.append(
            f"held back by the route's storm limit ({view.held} group(s) held in its window): "
            "no automatic investigation"
        )
    blocks.append(context(" · ".join(status)))
    if view.investigated_by and not view.investigate_button:
        blocks.append(context(f"Investigation started by {mention(view.investigated_by)}"))
    if view.investigate_button and view.status != "resolved":
        blocks.append(actions("alert_controls", [button(ACTION_INVESTIGATE, "Investigate", view.group_id)]))
    return fit_text(blocks)  # a webhook's fields can be long: under Slack's total (msg_blocks_too_long)


def _redact_block(block: Block, redact: Callable[[str], str]) -> None:
    for key, value in list(block.items()):
        if key == "text" and isinstance(value, str):
            block[key] = redact(value)
        elif isinstance(value, dict):
            _redact_block(value, redact)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    _redact_block(item, redact)
