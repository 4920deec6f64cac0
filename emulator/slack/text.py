"""Message text as Slack clients send it: escaped, with ``<@U123>`` mentions and rich_text blocks."""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from typing import Any

# A Slack "special" token: <@U123>, <#C123|name>, <!here>, <!subteam^S123>, <https://x|label>, <mailto:a>.
TOKEN = re.compile(
    r"<(@[UW][A-Z0-9_]+(?:\|[^>]*)?|#C[A-Z0-9_]+(?:\|[^>]*)?|![a-z^A-Z0-9_|@-]+"
    r"|(?:https?|mailto):[^>|\s]+(?:\|[^>]*)?)>"
)
# What a Slack client turns into styled rich_text runs as you type: *bold*, _italic_, ~strike~, `code`.
STYLED = re.compile(r"(?<![\w*_~`])([*_~`])(?=\S)([^*_~`\n]+?)(?<=\S)\1(?![\w*_~`])")
STYLE_NAMES = {"*": "bold", "_": "italic", "~": "strike", "`": "code"}
# An entity Slack itself produces; any other ``&`` is a literal ampersand.
ENTITY = re.compile(r"&(amp|lt|gt);")
AT_NAME = re.compile(r"(?<![\w<@])@([a-zA-Z0-9._-]+)")


def escape_user_text(text: str) -> str:
    """Escape ``&``, ``<`` and ``>`` the way a Slack client does, leaving well-formed tokens alone.

    Callers may pass raw text ("a < b") or already-formatted text ("<@U_OPS> go"); both end as
    Slack would store them.
    """
    out: list[str] = []
    pos = 0
    for match in TOKEN.finditer(text):
        out.append(_escape_plain(text[pos : match.start()]))
        out.append(match.group(0))
        pos = match.end()
    out.append(_escape_plain(text[pos:]))
    return "".join(out)


def _escape_plain(text: str) -> str:
    pieces = ENTITY.split(text)
    # re.split with one group alternates text, entity name, text, ...
    escaped: list[str] = []
    for i, piece in enumerate(pieces):
        if i % 2:
            escaped.append(f"&{piece};")
        else:
            escaped.append(piece.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))
    return "".join(escaped)


def unescape(text: str) -> str:
    """Slack's three entities back to characters (what rich_text elements carry)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def translate_mentions(text: str, users: Mapping[str, str], groups: Mapping[str, str]) -> str:
    """``@ops`` -> ``<@U_OPS>`` and ``@oncall`` -> ``<!subteam^S_ONCALL>``, as the Slack client's autocomplete does.

    ``users`` and ``groups`` map lowercase names/handles to IDs; ``@here``/``@channel`` become broadcasts.
    """

    def replace(match: re.Match[str]) -> str:
        name = match.group(1).rstrip(".,:;").lower()
        tail = match.group(1)[len(name) :]
        if name in ("here", "channel", "everyone"):
            return f"<!{name}>{tail}"
        if name in users:
            return f"<@{users[name]}>{tail}"
        if name in groups:
            return f"<!subteam^{groups[name]}>{tail}"
        return match.group(0)

    return AT_NAME.sub(replace, text)


def mentioned_users(text: str) -> list[str]:
    """User IDs mentioned as ``<@U123>`` in ``text``, in order, without repeats."""
    seen: dict[str, None] = {}
    for match in re.finditer(r"<@([UW][A-Z0-9_]+)(?:\|[^>]*)?>", text):
        seen.setdefault(match.group(1), None)
    return list(seen)


def rich_text_block(text: str) -> dict[str, Any]:
    """The ``rich_text`` block a Slack client attaches to a typed message."""
    elements: list[dict[str, Any]] = []
    pos = 0
    for match in TOKEN.finditer(text):
        _append_text(elements, text[pos : match.start()])
        elements.append(_token_element(match.group(1)))
        pos = match.end()
    _append_text(elements, text[pos:])
    return {
        "type": "rich_text",
        "block_id": secrets.token_urlsafe(4)[:5],
        "elements": [{"type": "rich_text_section", "elements": elements}],
    }


def _append_text(elements: list[dict[str, Any]], piece: str) -> None:
    pos = 0
    for match in STYLED.finditer(piece):
        if match.start() > pos:
            elements.append({"type": "text", "text": unescape(piece[pos : match.start()])})
        style = {STYLE_NAMES[match.group(1)]: True}
        elements.append({"type": "text", "text": unescape(match.group(2)), "style": style})
        pos = match.end()
    if pos < len(piece):
        elements.append({"type": "text", "text": unescape(piece[pos:])})


def _token_element(token: str) -> dict[str, Any]:
    if token.startswith("@"):
        return {"type": "user", "user_id": token[1:].split("|")[0]}
    if token.startswith("#"):
        return {"type": "channel", "channel_id": token[1:].split("|")[0]}
    if token.startswith("!subteam^"):
        return {"type": "usergroup", "usergroup_id": token[len("!subteam^") :].split("|")[0]}
    if token.startswith("!"):
        return {"type": "broadcast", "range": token[1:].split("|")[0]}
    url, _, label = token.partition("|")
    element: dict[str, Any] = {"type": "link", "url": url}
    if label:
        element["text"] = unescape(label)
    return element
