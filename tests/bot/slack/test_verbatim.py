"""Verbatim text for cards: cut into pieces without losing a character, escaped so it stays inert."""

from __future__ import annotations

import html
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.slack.rendering.mrkdwn import escape
from bot.slack.rendering.verbatim import code_pieces, slack_length, visible_json, visible_text

ROOM = 200


def rejoined(pieces: list[str]) -> str:
    return html.unescape("".join(pieces))


@settings(max_examples=400, deadline=None)
@given(
    text=st.text(alphabet=st.characters(codec="utf-8", exclude_characters="`"), max_size=1500)
    | st.just(" " * 3000)
)
def test_pieces_fit_and_lose_nothing_but_the_newlines_they_were_cut_at(text: str) -> None:
    shown = visible_text(text)
    pieces = code_pieces(shown, ROOM)
    assert all(slack_length(piece) <= ROOM for piece in pieces)
    assert rejoined(pieces).replace("\n", "") == shown.replace("\n", "")
    assert rejoined(pieces).count("\n") + len(pieces) - 1 >= shown.count("\n")
    for piece in pieces:  # no piece can meet its fences or another's
        assert "``" not in piece and not piece.startswith("`") and not piece.endswith("`")


def test_a_backtick_at_either_end_of_a_piece_is_escaped() -> None:
    pieces = code_pieces("`" + "a" * 400 + "`", ROOM)
    assert pieces[0].startswith("\\x60") and pieces[-1].endswith("\\x60")
    assert "".join(pieces) == "\\x60" + "a" * 400 + "\\x60"


def test_a_cut_never_splits_an_entity_or_an_escape() -> None:
    for filler in range(ROOM - 20, ROOM):
        text = "a" * filler + "&<>\u202e" * 20
        for piece in code_pieces(visible_text(text), ROOM):
            assert piece == escape(html.unescape(piece))  # every entity whole
            assert not piece.endswith(("\\", "\\u", "\\u2", "\\u20", "\\u202"))


def test_visible_text_escapes_what_cannot_be_seen_and_keeps_lines() -> None:
    assert visible_text("a\u202eb\u2028c\x1bd\ttab\nnext") == "a\\u202eb\\u2028c\\x1bd\ttab\nnext"
    assert visible_text("one\ntwo", keep_newlines=False) == "one\\ntwo"
    assert visible_text("`x` and ```y```") == "`x` and \\x60\\x60\\x60y\\x60\\x60\\x60"
    assert visible_text("\U000f0000") == "\\U000f0000"


def test_visible_json_is_the_same_value() -> None:
    value = {"a": "\u202e\U000f0001`", "b": ["🚀", "\u2028"]}
    shown = visible_json(value)
    assert json.loads(shown) == value and "\u202e" not in shown and "`" not in shown


def test_emoji_count_twice_as_slack_counts() -> None:
    assert slack_length("🚀a") == 3
    pieces = code_pieces("🚀" * 300, ROOM)
    assert all(slack_length(piece) <= ROOM for piece in pieces) and "".join(pieces) == "🚀" * 300


def test_room_too_small_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        code_pieces("x", 10)
