"""Which thread replies continue the conversation: a plain reply after the thread's run has ended.

Slack's side remembers each thread's last run (``slack:thread_last_run:{channel}:{thread_ts}``, this
module's key): the web process writes it with the start of a run it creates (``bot.slack.handlers.events``),
and the worker's presenter when it posts a run's card, so a thread an alert started (whose run
no web process created) continues too. A reply in a thread with no active run starts a follow-up run (``RunRecord.follows``, which reads the earlier runs:
``bot.runs.thread_history``) when the reply is meant for the bot:

* the thread's last run ended at most ``CHATOPS_FOLLOW_UP_MINUTES`` ago, or it ended with an answer
  that asks the people something (``run_asked_question``: then at any time while the run and this
  key are kept);
* the reply is a person's message in the thread (not a bot's, not an edit or a deletion: the
  event filter of ``bot.slack.handlers.events``), not addressed to other people (it mentions someone, a
  group, ``@here`` or ``@channel``, and not the bot), and not only thanks or an emoji. A bare
  acknowledgement ("ok", "cool", "+1") continues only a run that asked a question: then it is the
  answer.

Whatever the answer said, a follow-up is a new run: the rate limits, ``CHATOPS_CHANNELS`` and the
policy apply to its author exactly as to a mention, so a model that ends every answer with a
question gets no run past them. A mention in the thread always continues it (``bot.slack.handlers.events``).
"""

from __future__ import annotations

import re

import redis

from agent import defaults as agent_defaults
from agent.redis_util import as_text
from bot.keys import Keys
from bot.runs.record import RunRecord
from bot.runs.thread_history import run_asked_question

_OTHERS = re.compile(r"<@([A-Z0-9_]+)(?:\|[^>]*)?>|<!(?:here|channel|everyone|subteam\^)")
_NOISE = re.compile(r":[a-z0-9_+'-]+:|[!.,;?¿¡…]+|\s+")
_THANKS = re.compile(
    r"(?:thanks?|thank you|thx|ty|cheers|merci|danke)(?: (?:a lot|so much|all|team|bot|ops))*"
)
_ACKNOWLEDGEMENTS = re.compile(
    r"(?:ok|okay|k|kk|cool|nice|great|perfect|awesome|lgtm|\+1|got it|sounds good|hi|hello|hey|np|"
    r"no worries|will do|yes|yep|yeah|no|nope)"
)


LAST_RUN_SECONDS = agent_defaults.RETENTION_DAYS * 24 * 3600  # a key outliving its run finds no record


def last_run_key(keys: Keys, channel: str, thread_ts: str) -> str:
    """The thread's last run (written when a run starts in it or posts its card)."""
    return keys.slack("thread_last_run", channel, thread_ts)


def remember_last_run(
    client: redis.Redis | redis.client.Pipeline, keys: Keys, channel: str, thread_ts: str, run_id: str
) -> None:
    """``run_id`` is the thread's last run now (on ``client``, or queued on a pipeline)."""
    client.set(last_run_key(keys, channel, thread_ts), run_id, ex=LAST_RUN_SECONDS)


def last_run(client: redis.Redis, keys: Keys, channel: str, thread_ts: str) -> str | None:
    return as_text(client.get(last_run_key(keys, channel, thread_ts)))


def read_last_run(pipeline: redis.client.Pipeline, keys: Keys, channel: str, thread_ts: str) -> None:
    """``last_run`` queued on the caller's ``pipeline`` (its answer: ``as_text`` of it)."""
    pipeline.get(last_run_key(keys, channel, thread_ts))


def addressed_to_others(text: str, bot_user: str | None) -> bool:
    """Whether the message names people other than the bot (and not the bot): it is for them."""
    named = [match.group(1) for match in _OTHERS.finditer(text)]
    return bool(named) and bot_user not in named


def chatter(text: str) -> tuple[bool, bool]:
    """(only thanks or emoji, only an acknowledgement or a greeting) of a reply's text."""
    words = _NOISE.sub(" ", text.lower()).strip()
    if not any(ch.isalnum() for ch in words) or _THANKS.fullmatch(words):  # only emoji ("🙏") or punctuation
        return True, True
    return False, bool(_ACKNOWLEDGEMENTS.fullmatch(words))


def continues(
    record: RunRecord | None, text: str, bot_user: str | None, *, now: float, window_seconds: float
) -> bool:
    """Whether a reply with ``text`` continues the thread whose last run is ``record``."""
    if record is None or not record.status.terminal or addressed_to_others(text, bot_user):
        return False
    thanks, acknowledgement = chatter(text)
    if thanks:
        return False
    if run_asked_question(record):
        return True
    ended = record.ended_at()
    in_window = window_seconds > 0 and ended is not None and now - ended <= window_seconds
    return in_window and not acknowledgement
