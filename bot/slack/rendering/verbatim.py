"""Text shown verbatim on a card: complete, inert, and unable to pass for something else.

An approval card shows what will execute. Here that text becomes Slack code blocks:

* nothing is cut: long text is split over as many pieces as it needs (``code_pieces``), at line
  breaks where it can, never inside an ``&amp;`` entity or an escape;
* it is inert: ``&``, ``<`` and ``>`` become entities (no mention, no link), and backticks that
  could end a code block early are escaped, so the text cannot add formatting;
* it cannot pass for other text: characters a reader cannot see for what they are (bidi controls,
  zero-width and other format characters, line separators, control characters, private-use,
  surrogate and unassigned code points; ``agent.arguments`` decides which) are shown as escapes.
  In JSON (``visible_json``) they become JSON escapes, so the text shown is the same JSON value;
  in other text (``visible_text``) Python-style ``\\xNN``/``\\uNNNN`` escapes.

Lengths are counted as Slack counts them (UTF-16 code units, ``slack_length``), never less.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent.arguments import showable
from bot.slack.rendering.mrkdwn import escape

FENCE = "```"
# Backticks that could meet a fence: any run of two or more (three end a block; two become three
# next to the closing fence).
_BACKTICK_RUN = re.compile(r"`{2,}")
# Things a cut must not split: an entity made by ``escape``, and the escapes made here.
_UNSPLITTABLE = re.compile(r"&(?:amp|lt|gt);|\\(?:x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})")
_LONGEST_UNSPLITTABLE = 10  # len("\\U0010ffff")


def slack_length(text: str) -> int:
    """The length Slack checks against its limits: UTF-16 code units (an emoji counts 2)."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def visible_json(value: Any) -> str:
    """``value`` as indented JSON whose every character can be seen for what it is.

    Characters that cannot (and backticks, which could end the code block) are written as JSON
    ``\\u`` escapes: they occur only inside JSON strings, so the text is still the same JSON value.
    """
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    return "".join(char if showable(char) and char != "`" else _json_escape(char) for char in text)


def visible_text(text: str, *, keep_newlines: bool = True) -> str:
    """``text`` with every character that cannot be seen for what it is written as an escape.

    Newlines (``keep_newlines``) and tabs stay; everything else outside ``agent.arguments``'
    showable set becomes ``\\xNN``, ``\\uNNNN`` or ``\\UNNNNNNNN``; runs of backticks become ``\\x60``.
    """
    shown = []
    for char in text:
        if char == "\n" and keep_newlines:
            shown.append(char)
        elif char == "\n":
            shown.append("\\n")
        elif showable(char):
            shown.append(char)
        else:
            shown.append(python_escape(char))
    return _BACKTICK_RUN.sub(lambda match: "\\x60" * len(match.group()), "".join(shown))


def python_escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def code_pieces(shown: str, room: int) -> list[str]:
    """``shown`` (already made visible) escaped for mrkdwn and cut into pieces of at most ``room``.

    Each piece is meant for one code block: a cut at a line break drops that one newline (the
    next block starts a new line anyway); a longer line is cut hard. No character is lost. A lone
    backtick at either end of a piece is escaped, since it would meet the piece's fence.
    """
    if room < 2 * _LONGEST_UNSPLITTABLE:
        raise ValueError("room too small to cut safely")
    rest = escape(shown)
    pieces: list[str] = []
    while True:
        limit = room - 8  # each end may gain an escaped backtick (4 characters)
        if slack_length(rest) <= limit:
            pieces.append(_guard_ends(rest))
            return pieces
        cut = _fit(rest, limit)
        newline = rest.rfind("\n", 0, cut)
        if newline > cut // 3:
            pieces.append(_guard_ends(rest[:newline]))
            rest = rest[newline + 1 :]
        else:
            cut = _safe_cut(rest, cut)
            pieces.append(_guard_ends(rest[:cut]))
            rest = rest[cut:]


def code_block(piece: str) -> str:
    """One piece in a code block (Slack drops a block with nothing in it, so empty shows a space)."""
    return f"{FENCE}{piece or ' '}{FENCE}"


def _json_escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    high, low = divmod(code - 0x10000, 0x400)
    return f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}"


def _fit(text: str, limit: int) -> int:
    """The longest prefix of ``text`` (as an index) whose Slack length is at most ``limit``."""
    used = 0
    for index, char in enumerate(text):
        used += 2 if ord(char) > 0xFFFF else 1
        if used > limit:
            return index
    return len(text)


def _safe_cut(text: str, position: int) -> int:
    """``position`` moved back to the start of an entity or escape it would split."""
    start = max(0, position - _LONGEST_UNSPLITTABLE)
    for match in _UNSPLITTABLE.finditer(text, start, position + _LONGEST_UNSPLITTABLE):
        if match.start() < position < match.end():
            return max(match.start(), 1)
    return max(position, 1)


def _guard_ends(piece: str) -> str:
    if piece.startswith("`"):
        piece = "\\x60" + piece[1:]
    if piece.endswith("`"):
        piece = piece[:-1] + "\\x60"
    return piece
