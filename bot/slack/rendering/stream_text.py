"""Markdown the model or a tool wrote, made inert for a streamed message (``bot.slack.delivery.streaming``).

Streams carry Markdown (``markdown_text`` chunks, task titles and outputs), not mrkdwn, so the
rule of ``bot.slack.rendering.mrkdwn`` is applied in Markdown's terms: ``&``, ``<`` and ``>`` become entities
(no ``<!channel>``, ``<@U…>`` or ``<url|label>``), a word joiner follows the ``@`` of any bare
``@word`` and the ``#`` of any bare ``#word`` (no broadcast, group handle or channel link), a link
``[label](url)`` becomes ``label (url)`` (its real destination shows) and no ``](``, ``][`` or
``]:`` is left to make one (inline, reference or definition). Only the bare IDs of the run's own
people (``bot.slack.rendering.people``: IDs from Slack's events and clicks) become mentions.

What is formatting stays formatting, as when the same answer is posted (``mrkdwn.to_mrkdwn``, where
Slack shows ``&gt;`` at a line's start as a quote): emphasis, emoji codes, headings, lists, code,
and a quote's ``>`` at the start of a line outside code, which is put back as ``>`` (Markdown
quotes only from the character; alone, with every ``<`` an entity, it cannot close a token).
"""

from __future__ import annotations

import re

from bot.slack.rendering.mrkdwn import WORD_JOINER, inert, one_line
from bot.slack.rendering.people import name_people

_MD_LINK = re.compile(r"\[([^\[\]]*)\]\(\s*<?([^()\s<>]*)>?(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)")
_LINK_SYNTAX = re.compile(r"\](?=[(\[:])")  # what is left of ``](``, ``][`` and ``]:``
_BARE_SIGN = re.compile(r"(?<![\w@&#<])([@#])(?=[A-Za-z0-9])")  # "<": a mention of the run's people
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_QUOTE_MARKERS = re.compile(r"^( {0,3})((?:&gt; ?)+)")


def _unlinked(match: re.Match[str]) -> str:
    label, url = match.group(1).strip(), match.group(2)
    if not url:
        return label
    return url if label == url else f"{label} ({url})"


def inert_markdown(text: str, people: frozenset[str] = frozenset()) -> str:
    """``text`` as Markdown that shows what it says and does nothing else in Slack, but for the
    bare IDs of the run's ``people`` (``bot.slack.rendering.people``: from Slack, never the model), named."""
    for _ in range(8):  # nested links unwrap one level a pass
        unlinked = _MD_LINK.sub(_unlinked, text)
        if unlinked == text:
            break
        text = unlinked
    text = name_people(inert(_LINK_SYNTAX.sub("]" + WORD_JOINER, text)), people)
    return _quotes(_BARE_SIGN.sub(lambda m: m.group(1) + WORD_JOINER, text))


def _quotes(text: str) -> str:
    """The ``&gt;`` that start a line outside a code block back to ``>``: Markdown's quote."""
    lines = text.split("\n")
    in_code = False
    for index, line in enumerate(lines):
        if _FENCE.match(line):
            in_code = not in_code
        elif not in_code:
            lines[index] = _QUOTE_MARKERS.sub(lambda m: m.group(1) + m.group(2).replace("&gt;", ">"), line)
    return "\n".join(lines)


def plain_markdown(text: str, limit: int, people: frozenset[str] = frozenset()) -> str:
    """``text`` on one line, cut to ``limit``, inert (a task's title, details or output), but for the
    IDs of the run's ``people``, named."""
    return inert_markdown(one_line(text, limit), people)
