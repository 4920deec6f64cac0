"""What Slack renders *live* in a message: mentions, broadcasts, channel links and links.

A test reads this to see what a person would see as a ping or a clickable link, so it is
stricter than Slack, never kinder:

* an angle-bracket token (``<@U…>``, ``<#C…>``, ``<!subteam^…>``, ``<!here>``, ``<url|label>``,
  ``<!date…>``) is live wherever it stands, inside code spans and code blocks too, and in
  ``plain_text`` objects (Slack renders neither there, but a bot must not rely on that);
  an angle-bracket token of no known form is reported as ``unknown``;
* the bare words ``@here``, ``@channel`` and ``@everyone`` are live broadcasts outside code in
  every text (Slack turns them into broadcasts only under automatic parsing: ``link_names``,
  ``parse=full``, or a mrkdwn text object without ``verbatim: true``);
* under automatic parsing, bare ``#name`` of a channel and ``@handle`` of a user group are live
  (any such word when the names are not given);
* a link is ``disguised`` when its label is not its URL. Bare URLs Slack links by itself show
  their own text, so they are not reported.

``Live.kind`` is one of ``user``, ``channel``, ``usergroup``, ``broadcast``, ``link``, ``date``,
``unknown``; ``where`` says which part of the message (``text``, ``blocks/0/text``, ...).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from emulator.slack.text import unescape

_TOKEN = re.compile(r"<([^<>]*)>")
_SCHEME = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*:")
_BROADCASTS = ("here", "channel", "everyone")
_BARE_BROADCAST = re.compile(r"@(here|channel|everyone)(?![\w])", re.IGNORECASE)
_BARE_CHANNEL = re.compile(r"(?<![\w&#])#([a-z0-9][a-z0-9_-]*)")
_BARE_HANDLE = re.compile(r"(?<![\w@])@([a-zA-Z0-9][a-zA-Z0-9._-]*)")
_CODE = re.compile(r"```.*?```|`[^`\n]+`", re.DOTALL)
_MARKDOWN_LINK = re.compile(r"\[([^\[\]]*)\]\(([^()\s]*)\)")


@dataclass(frozen=True)
class Live:
    kind: str
    target: str
    label: str | None = None
    where: str = "text"

    @property
    def disguised(self) -> bool:
        """A link whose label is not its URL (entities decoded on both sides, as Slack shows them)."""
        return (
            self.kind == "link" and self.label is not None and unescape(self.label) != unescape(self.target)
        )

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "disguised": self.disguised}


def live_in_text(
    text: str,
    *,
    auto_parse: bool,
    where: str = "text",
    channels: Sequence[str] = (),
    handles: Sequence[str] = (),
) -> list[Live]:
    """Everything live in one mrkdwn text (``auto_parse``: Slack's automatic parsing applies)."""
    found = [_token(match.group(1), where) for match in _TOKEN.finditer(text)]
    prose = _CODE.sub(" ", _TOKEN.sub(" ", text))
    found += [Live("broadcast", m.group(1).lower(), where=where) for m in _BARE_BROADCAST.finditer(prose)]
    if auto_parse:
        known_channels = {name.lower() for name in channels}
        for match in _BARE_CHANNEL.finditer(prose):
            if not known_channels or match.group(1).lower() in known_channels:
                found.append(Live("channel", "#" + match.group(1), where=where))
        known_handles = {handle.lower() for handle in handles}
        for match in _BARE_HANDLE.finditer(prose):
            name = match.group(1).rstrip(".").lower()
            if name not in _BROADCASTS and (not known_handles or name in known_handles):
                found.append(Live("usergroup", "@" + name, where=where))
    return found


def live_in_message(
    message: dict[str, Any],
    *,
    auto_parse: bool = False,
    channels: Sequence[str] = (),
    handles: Sequence[str] = (),
) -> list[Live]:
    """Everything live in a message as Slack returns it: its ``text`` and every text in its blocks.

    ``auto_parse``: the message was posted with ``parse=full`` or ``link_names``.
    """
    found = live_in_text(
        str(message.get("text") or ""), auto_parse=auto_parse, channels=channels, handles=handles
    )
    for path, node in _nodes(message.get("blocks") or [], "blocks"):
        kind = node.get("type")
        if kind == "mrkdwn" and isinstance(node.get("text"), str):
            automatic = auto_parse or not node.get("verbatim")
            found += live_in_text(
                node["text"], auto_parse=automatic, where=path, channels=channels, handles=handles
            )
        elif kind == "plain_text" and isinstance(node.get("text"), str):
            found += [_token(m.group(1), path) for m in _TOKEN.finditer(node["text"])]
        elif kind == "markdown" and isinstance(node.get("text"), str):
            found += live_in_text(
                node["text"], auto_parse=True, where=path, channels=channels, handles=handles
            )
            found += [
                Live("link", m.group(2), m.group(1), path) for m in _MARKDOWN_LINK.finditer(node["text"])
            ]
        elif kind in ("user", "channel", "usergroup", "broadcast", "link"):
            found.append(_rich_text_element(node, path))
    return found


def _token(body: str, where: str) -> Live:
    target, bar, label = body.partition("|")
    shown = label if bar else None
    if target.startswith("@"):
        return Live("user", target[1:], shown, where)
    if target.startswith("#"):
        return Live("channel", target[1:], shown, where)
    if target.startswith("!subteam^"):
        return Live("usergroup", target[len("!subteam^") :], shown, where)
    if target.startswith("!date^"):
        return Live("date", target, shown, where)
    if target.startswith("!"):
        return Live("broadcast", target[1:], shown, where)
    if _SCHEME.match(target):
        return Live("link", target, shown, where)
    return Live("unknown", body, None, where)


def _rich_text_element(node: dict[str, Any], where: str) -> Live:
    kind = str(node.get("type"))
    if kind == "link":
        label = node.get("text")
        return Live("link", str(node.get("url") or ""), str(label) if label else None, where)
    ident = node.get("user_id") or node.get("channel_id") or node.get("usergroup_id") or node.get("range")
    return Live(kind, str(ident or ""), None, where)


def _nodes(node: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every object under ``node`` with its JSON pointer-ish path."""
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from _nodes(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _nodes(item, f"{path}/{index}")
