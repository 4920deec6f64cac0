"""Markdown (what models write) to Slack ``mrkdwn``, the escaping rule, truncation and safe splitting.

Slack's ``mrkdwn`` is not Markdown: bold is ``*x*``, italic ``_x_``, strike ``~x~``, links are
``<url|text>``, there are no headings, and ``&``, ``<`` and ``>`` must be escaped as entities.
Everything here is pure text processing, so it is tested without Slack.

**The escaping rule** (one rule, here, for every text the model or a tool produced; the
invariant "text from the model or a tool is inert in Slack"):

* ``&``, ``<`` and ``>`` become entities everywhere, inside code too (``escape``). Slack parses
  ``<@U…>``, ``<#C…>``, ``<!subteam^…>``, ``<!here>`` and ``<url|label>`` only from raw angle
  brackets, so no mention, broadcast or labelled link can come out of escaped text.
* The bare words ``@here``, ``@channel`` and ``@everyone`` are broken with an invisible word
  joiner after the ``@`` (``inert``): Slack's automatic parsing (``link_names``, ``parse=full``,
  text objects without ``verbatim``) would turn them into broadcasts. This holds inside the
  model's code spans and blocks too, whose ends the model's own backticks could move. The one
  exception is the approval card's verbatim code (``bot.slack.rendering.verbatim``): it must be exactly
  what will run, its fences cannot be moved (backtick runs are escaped) and Slack parses no bare
  word inside code, so there only ``escape`` applies. Every mrkdwn text object is also sent with
  ``verbatim: true`` (``bot.slack.rendering.blockkit``), so no bare channel name or handle is linked either.
* A link the model writes is shown as its real URL, never under another label: ``[label](url)``
  becomes ``label (url)`` (just the URL when the label is the URL), and the URL is a link whose
  text is the URL itself (``<url>``, a ``|`` in it percent-encoded so it cannot start a label).

Only the bot's own formatting is live: emphasis, emoji, dates, and the people it names itself
(``mention``: requesters and approvers, Slack user IDs taken from events and clicks).
"""

from __future__ import annotations

import re
import unicodedata

_LINK = re.compile(r"\[([^\[\]]+)\]\((https?://[^\s()]+(?:\([^\s()]*\))?[^\s()]*)\)")
# A URL the model wrapped in angle brackets. No ``|``: ``<https://evil|https://good>`` is a
# labelled (disguised) link and stays escaped text.
_AUTOLINK = re.compile(r"<(https?://[^\s<>|]+)>")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_ITALIC_STAR = re.compile(r"(?<![*\w])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![*\w])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_ENTITY = re.compile(r"&(?:amp|lt|gt);")
_PROTECTED = re.compile("|".join(f"(?:{p.pattern})" for p in (_CODE_SPAN, _LINK, _AUTOLINK)))
_BOLD_MARK = "\x00"  # a placeholder for ``*`` so single-star italics are not confused with bold
# Any ``@`` before a broadcast word, whatever follows (stricter than Slack, which wants a word end).
_BROADCAST_WORD = re.compile(r"@(?=(?:here|channel|everyone))", re.IGNORECASE)
WORD_JOINER = "\u2060"  # invisible, not a space: ``@here`` still reads as written
_SLACK_USER = re.compile(r"[UW][A-Z0-9_]+")  # the emulator's IDs have underscores
# Characters a URL shown as ``<url>`` must not carry raw: ``|`` would start a label.
_URL_UNSAFE = {"|": "%7C"}

ELLIPSIS = "…"


def escape(text: str) -> str:
    """Slack's three reserved characters as entities: the rule inside code whose fences cannot move."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def inert(text: str) -> str:
    """The rule for prose the model or a tool wrote: escaped, and no bare broadcast word left."""
    return _BROADCAST_WORD.sub("@" + WORD_JOINER, escape(text))


def visible(text: str) -> str:
    """``text`` without invisible format characters (Unicode ``Cf``: zero-width spaces and
    joiners, bidi overrides and isolates, soft hyphens, BOM): they can hide or reorder what a
    person reads (``deifirevnu`` shown as "unverified"), and no quote a tool printed needs them."""
    if text.isascii():  # no ASCII character is a format character (``Cf``): most text, at once
        return text
    return "".join(char for char in text if unicodedata.category(char) != "Cf")


def inline_code(text: str, limit: int = 100) -> str:
    """``text`` on one line as inline code that cannot end early (its backticks become ``'``).

    The strongest inert form: Slack renders no emphasis, emoji code, mention or link inside code,
    and no invisible character is kept to disguise what it shows (``visible``). ``limit`` counts
    the escaped text (an entity is never cut)."""
    shown = inert(" ".join(visible(text).split())).replace("`", "'")
    return "`" + truncate(shown, limit) + "`"  # cut once escaped: ``limit`` is what Slack counts


def is_user_id(text: str) -> bool:
    """Whether ``text`` is a Slack user ID (``U...``/``W...``), not a name or an alert source."""
    return bool(_SLACK_USER.fullmatch(text))


def mention(user: str) -> str:
    """A person the bot names itself, as a live mention when ``user`` is a Slack user ID
    (anything else is shown as inert text: never a mention made of text)."""
    if is_user_id(user):
        return f"<@{user}>"
    return inert(" ".join(user.split())[:80]) or "unknown"


def link(url: str) -> str:
    """``url`` as a link whose text is the URL itself (escaped, a ``|`` percent-encoded)."""
    for char, encoded in _URL_UNSAFE.items():
        url = url.replace(char, encoded)
    return f"<{escape(url)}>"


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``count`` and ``noun`` as a person writes them: "1 iteration", "2 iterations", "1,791 tokens".

    The one rule for every count the bot shows; ``many`` where adding an "s" is wrong ("1 person")."""
    return f"{count:,} {noun if count == 1 else (many or noun + 's')}"


def truncate(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, marked with an ellipsis when cut."""
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    return text[: _safe_cut(text, limit - 1)].rstrip() + ELLIPSIS


def one_line(text: str, limit: int) -> str:
    """Whitespace collapsed to single spaces, truncated: for short summaries on the run card."""
    return truncate(" ".join(text.split()), limit)


def to_mrkdwn(markdown: str) -> str:
    """Convert common Markdown to Slack ``mrkdwn`` (code blocks kept as they are, but inert)."""
    out: list[str] = []
    in_code = False
    for line in markdown.replace("\r\n", "\n").split("\n"):
        if _FENCE.match(line):
            # The language tag after ``` would show as text in Slack, so it is dropped.
            out.append("```")
            in_code = not in_code
            continue
        out.append(inert(line) if in_code else _convert_line(line))
    if in_code:
        out.append("```")  # an unclosed fence would swallow the rest of the message
    return "\n".join(out)


def _convert_line(line: str) -> str:
    """One line outside code: headings, bullets and rules, then inline formatting."""
    heading = _HEADING.match(line)
    if heading:
        inner = _BOLD.sub(r"\2", heading.group(1))
        return f"*{_inline(inner)}*" if inner else ""
    if _RULE.match(line):
        return "──────────"
    bullet = _BULLET.match(line)
    if bullet:
        return f"{bullet.group(1)}• {_inline(bullet.group(2))}"
    return _inline(line)


def _inline(text: str) -> str:
    """Inline Markdown to mrkdwn; code spans and links are protected from formatting."""
    pieces: list[str] = []
    pos = 0
    for match in _PROTECTED.finditer(text):
        pieces.append(_format(inert(text[pos : match.start()])))
        pieces.append(_protected_piece(match))
        pos = match.end()
    pieces.append(_format(inert(text[pos:])))
    return "".join(pieces)


def _protected_piece(match: re.Match[str]) -> str:
    """A code span or a link, rendered by the rule: code inert, a link as its real URL."""
    token = match.group(0)
    code = _CODE_SPAN.fullmatch(token)
    if code:
        return f"`{inert(code.group(2))}`"
    labelled = _LINK.fullmatch(token)
    if labelled:
        label, url = labelled.group(1), labelled.group(2)
        if label.strip() == url:
            return link(url)
        return f"{_format(inert(label))} ({link(url)})"
    autolink = _AUTOLINK.fullmatch(token)
    assert autolink is not None  # _PROTECTED has no other alternative
    return link(autolink.group(1))


def _format(text: str) -> str:
    """Emphasis on already-escaped text: **b**/__b__ -> *b*, *i* -> _i_, ~~s~~ -> ~s~."""
    text = _BOLD.sub(lambda m: f"{_BOLD_MARK}{m.group(2)}{_BOLD_MARK}", text)
    text = _ITALIC_STAR.sub(r"_\1_", text)
    text = _STRIKE.sub(r"~\1~", text)
    return text.replace(_BOLD_MARK, "*")


# -- splitting ---------------------------------------------------------------------------------


def split_mrkdwn(text: str, limit: int) -> list[str]:
    """Split ``text`` into chunks of at most ``limit`` characters.

    Cuts prefer paragraph breaks, then line breaks, then spaces; never inside a ``<...>`` token
    or an ``&amp;`` entity. A chunk that ends inside a code block closes it and the next one
    reopens it, so every chunk renders on its own.
    """
    if limit < 16:
        raise ValueError("limit too small to split safely")
    chunks: list[str] = []
    rest = text.strip("\n")
    reopen = False
    while rest:
        prefix = "```\n" if reopen else ""
        room = limit - len(prefix) - len("\n```")
        if len(prefix) + len(rest) <= limit:
            chunk, rest = rest, ""
        else:
            cut = _cut_point(rest, room)
            chunk, rest = rest[:cut].rstrip(), rest[cut:].lstrip("\n ")
        body = prefix + chunk
        reopen = _fence_open(body)
        if reopen:
            body += "\n```"
        if body.strip("`\n "):
            chunks.append(body)
    return chunks or [""]


def _fence_open(text: str) -> bool:
    """Whether ``text`` ends inside a ``` code block."""
    return text.count("```") % 2 == 1


def _cut_point(text: str, room: int) -> int:
    """Where to cut ``text`` so the first part has at most ``room`` characters."""
    window = text[:room]
    for separator in ("\n\n", "\n", " "):
        index = window.rfind(separator)
        if index > room // 3:  # a cut very early would make tiny chunks; fall back to a harder cut
            return _safe_cut(text, index)
    return _safe_cut(text, room)


def _safe_cut(text: str, position: int) -> int:
    """Move ``position`` back so it does not split a ``<...>`` token or an ``&..;`` entity."""
    head = text[:position]
    opening = head.rfind("<")
    if opening > head.rfind(">") and opening > 0:
        position = opening
    for entity in _ENTITY.finditer(text, max(0, position - 5), position + 5):
        if entity.start() < position < entity.end():
            position = entity.start()
    return max(position, 1)
