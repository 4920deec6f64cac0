"""A run's final answer in its thread: a few messages, or one message and the whole answer as a file.

Slack lets an app post about one message a second per channel (docs.slack.dev/apis/web-api/
rate-limits: "Posting messages: 1 per second, short bursts >1 allowed"), and a thread of dozens
of 3,900-character parts is unreadable anyway. So an answer of up to ``ANSWER_MESSAGES`` parts is
posted as messages; a longer one becomes its first part plus a file upload of the whole answer
(``files_upload_v2``: files.getUploadURLExternal, the upload, files.completeUploadExternal; needs
``files:write``). Where Slack refuses the upload for good (no ``files:write``, uploads disabled in
the workspace) the first parts are posted and the last says where the rest is.

Nothing is lost silently: an answer Slack refuses for good (``Undeliverable``) is replaced by a
short notice in the thread saying so and how to read it (``chatops runs show``); transient
failures (429, 5xx, a timeout, an upload that broke) raise, and the run's report posts the
answer again later (``bot.runs.report_steps``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackRequestError

from bot.runs.presenter import RunRef, Undeliverable
from bot.slack.delivery.sender import is_transient
from bot.slack.rendering.mrkdwn import escape, plural, split_mrkdwn

log = logging.getLogger(__name__)

ANSWER_MESSAGES = 3  # an answer needing more messages than this is attached as a file
COMMENT_TEXT = 3500  # the message that carries the file: the answer's beginning, then a note

PostText = Callable[[RunRef, str], None]


def answer_file_name(run: RunRef) -> str:
    """The attachment's name: the run's id (hex), never text from the model."""
    return f"answer-{run.run_id[:12]}.md"


def show_hint(run: RunRef) -> str:
    return f"`chatops runs show {escape(run.run_id)}`"


def deliver_answer(
    client: WebClient, run: RunRef, chunks: list[str], whole: str, post_text: PostText
) -> None:
    """Post ``chunks`` (the answer as mrkdwn messages; ``whole`` is the redacted answer itself).

    Raises what ``post_text`` raises for transient failures; an answer refused for good is
    reported in the thread instead (and ``Undeliverable`` raised only if even that fails)."""
    try:
        if len(chunks) <= ANSWER_MESSAGES:
            for chunk in chunks:
                post_text(run, chunk)
        else:
            _attach(client, run, chunks, whole, post_text)
    except Undeliverable as refused:
        log.error("run %s: Slack refused the answer (%s); telling the thread", run.run_id, refused)
        notice = (
            f":warning: The answer could not be posted here ({escape(str(refused))}). "
            f"It is kept: {show_hint(run)} shows it."
        )
        post_text(run, notice)  # an Undeliverable here too: the report logs it (nothing more to try)


def _attach(client: WebClient, run: RunRef, chunks: list[str], whole: str, post_text: PostText) -> None:
    name = answer_file_name(run)
    note = (
        f"\n_… the whole answer ({len(whole):,} characters, {len(chunks)} messages long) "
        f"is attached as `{name}`._"
    )
    comment = _beginning(chunks[0], COMMENT_TEXT - len(note)) + note
    try:
        client.files_upload_v2(
            channel=run.channel,
            thread_ts=run.thread_ts,
            content=whole,
            filename=name,
            title=f"Answer of run {run.run_id[:12]}",
            initial_comment=comment,
        )
        return
    except SlackApiError as error:
        if is_transient(error):
            raise
        code = error.response.get("error") if error.response is not None else None
        log.warning("run %s: Slack refused the answer's file (%s); posting its beginning", run.run_id, code)
    except (SlackRequestError, OSError) as error:  # the upload itself failed: try again later
        raise ConnectionError(f"uploading the answer failed: {error}") from error
    rest = len(chunks) - ANSWER_MESSAGES
    for chunk in chunks[: ANSWER_MESSAGES - 1]:
        post_text(run, chunk)
    tail = f"\n_… {plural(rest, 'more message')} not posted here: {show_hint(run)} shows them._"
    post_text(run, _beginning(chunks[ANSWER_MESSAGES - 1], COMMENT_TEXT) + tail)


def _beginning(chunk: str, limit: int) -> str:
    """The first ``limit`` characters of a mrkdwn chunk, cut where it renders on its own (a code
    block is closed, no ``<...>`` token or entity is split)."""
    return chunk if len(chunk) <= limit else split_mrkdwn(chunk, limit)[0]
