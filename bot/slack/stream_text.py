"""Markdown the model or a tool wrote, made inert for a streamed message (``bot.slack.streaming``).

Streams carry Markdown (``markdown_text`` chunks, task titles and outputs), not mrkdwn, so the
rule of ``bot.slack.mrkdwn`` is applied in Markdown's terms: ``&``, ``<`` and ``>`` become entities
(no ``<!channel>``, ``<@U…>`` or ``<url|label>``), a word joiner follows the ``@`` of any bare
``@word`` and the ``#`` of any bare ``#word`` (no broadcast, group handle or channel link), a link
``[label](url)`` becomes ``label (url)`` (its real destination shows) and no ``](``, ``][`` or
``]:`` is left to make one (inline, reference or definition). Only the bare IDs of the run's own
people (``bot.slack.people``: IDs from Slack's events and clicks) become mentions.
"""

from __future__ import annotations

import re

from bot.slack.mrkdwn import WORD_JOINER, inert, one_line
from bot.slack.people import name_people

_MD_LINK = re.compile(r"\[([^\[\]]*)\]\(\s*<?([^()\s<>]*)>?(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)")
_LINK_SYNTAX = re.compile(r"\](?=[(\[:])")  # what is left of ``](``, ``][`` and ``]:``
_BARE_SIGN = re.compile(r"(?<![\w@&#<])([@#])(?=[A-Za-z0-9])")  # "<": a mention of the run's people


def _unlinked(match: re.Match[str]) -> str:
    label, url = match.group(1).strip(), match.group(2)
    if not url:
        return label
    return url if label == url else f"{label} ({url})"


def inert_markdown(text: str, people: frozenset[str] = frozenset()) -> str:
    """``text`` as Markdown that shows what it says and does nothing else in Slack, but for the
    bare IDs of the run's ``people`` (``bot.slack.people``: from Slack, never the model), named."""
    for _ in range(8):  # nested links unwrap one level a pass
        unlinked = _MD_LINK.sub(_unlinked, text)
        if unlinked == text:
            break
        text = unlinked
    text = name_people(inert(_LINK_SYNTAX.sub("]" + WORD_JOINER, text)), people)
    return _BARE_SIGN.sub(lambda m: m.group(1) + WORD_JOINER, text)


def plain_markdown(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit``, inert (a task's title, details or output)."""
    return inert_markdown(one_line(text, limit))
