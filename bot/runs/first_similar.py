"""A mention's run: the past incidents it starts from, searched by its first job in the worker
(off the web's ack path, issue 29) as the web did before, with the same code (``bot.memory.notes``).

The web marks the run's first message ``similar_pending`` (``RunService.submit``). Before the
loop's first model call the worker searches the run's own channel (``similar_for_run``: the
memory's boundary, the thread's own incidents left out), then:

* the lines go into the first message in the loop's first write (``RunConfig.first_message``):
  that fenced write puts the system prompt first and stores the state, so a job re-delivered
  after it finds a state and adds nothing, and one re-delivered before it writes them once;
* the thread's "Similar:" note is posted by the run's presenter (Slack's: with Forget buttons,
  recorded as the message that shows those incidents, ``IncidentStore.remember_note``) after a
  claim per run (``SET NX``): a re-delivered job never posts it twice (a crash between the claim
  and the post loses the note, never doubles it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import redis

from agent.types import Message
from bot.memory.notes import named_targets, similar_for_run, similar_lines
from bot.memory.similar import IncidentMemory, Similar
from bot.runs.presenter import RunRef

log = logging.getLogger(__name__)

NOTE_CLAIM_SECONDS = 7 * 24 * 3600  # longer than any retry of a run's first job


def pending(messages: Sequence[Message]) -> bool:
    """Whether the run's stored history is a first message still waiting for its search."""
    return (
        len(messages) == 1 and messages[0].role == "user" and messages[0].meta.get("similar_pending") is True
    )


def search(
    memory: IncidentMemory | None, run: RunRef, query: str, target_names: Sequence[str]
) -> list[Similar]:
    """The incidents the run starts from: its own channel's, by the request's words and targets."""
    return similar_for_run(
        memory,
        run.channel,
        query=query,
        thread_ts=run.thread_ts,
        targets=named_targets(query, list(target_names)),
    )


def with_lines(found: Sequence[Similar], redact: Callable[[str], str]) -> Callable[[Message], Message]:
    """``RunConfig.first_message``: the first message with the incidents' lines after the request
    (as ``RunService.submit`` puts them), redacted, and without the pending mark."""

    def first(message: Message) -> Message:
        meta = {key: value for key, value in message.meta.items() if key != "similar_pending"}
        content = message.content or ""
        lines = similar_lines(list(found))
        if lines:
            content = f"{content}\n\n{redact(chr(10).join(lines))}"
        return message.model_copy(update={"content": content, "meta": meta})

    return first


def post_note(
    client: redis.Redis,
    claim_key: str,
    presenter: object,
    run: RunRef,
    found: Sequence[Similar],
    remember: Callable[[str, str, list[str]], None] | None,
) -> str | None:
    """The thread's note, once per run; its ts (None: nothing posted)."""
    if not found:
        return None
    post = getattr(presenter, "post_similar_note", None)  # a custom presenter may not have it
    if not callable(post):
        return None
    if not client.set(claim_key, "1", nx=True, ex=NOTE_CLAIM_SECONDS):
        return None  # an earlier attempt of this job posted it (or was about to)
    ts = post(run.channel, run.thread_ts, list(found))
    if ts and remember is not None:
        remember(run.channel, str(ts), [similar.incident.id for similar in found])
    return str(ts) if ts else None
