"""Property tests of the JSON limits on tool-call arguments, and of how a card shows what passed them.

Whatever text the model sends as arguments (deep, wide, huge, malformed, any unicode),
``parse_arguments`` either returns an object within the limits or raises ``ArgumentsRejected``:
never ``RecursionError``, ``MemoryError`` or any other exception that would kill a job. And the
JSON an approval card shows for accepted arguments is the same value, made only of characters a
reader can see for what they are.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.arguments import (
    MAX_ARGUMENTS_DEPTH,
    canonical_arguments,
    parse_arguments,
    showable,
)
from agent.errors import ArgumentsRejected
from bot.slack.rendering.verbatim import visible_json

pytestmark = pytest.mark.reliability

JSON_LEAVES = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=40,
)
OPENERS = st.sampled_from(
    [
        "[",
        "{",
        '{"a":',
        '["x",',
        '{"k": "[\\"',
    ]
)


def depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth(item) for item in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(item) for item in value), default=0)
    return 0


def parsed_or_rejected(text: str, **limits: int) -> dict[str, Any] | None:
    """The object, or ``None`` for a refusal; any other exception fails the test."""
    try:
        return parse_arguments(text, **limits)  # type: ignore[arg-type]
    except ArgumentsRejected:
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(openers=st.lists(OPENERS, max_size=60), closing=st.booleans(), tail=st.text(max_size=20))
def test_any_nesting_is_parsed_or_rejected_never_another_exception(
    openers: list[str], closing: bool, tail: str
) -> None:
    text = "".join(openers) + tail + ("]}" * len(openers) if closing else "")
    result = parsed_or_rejected(text)
    if result is not None:
        assert depth(result) <= MAX_ARGUMENTS_DEPTH


@settings(max_examples=40, deadline=None)
@given(levels=st.integers(min_value=0, max_value=200_000), bracket=st.sampled_from(["[", '{"a":']))
def test_bracket_bombs_of_any_depth_are_rejected_quickly(levels: int, bracket: str) -> None:
    closer = "]" if bracket == "[" else "}"
    text = "{" + '"x":' + bracket * levels + "1" + closer * levels + "}"
    result = parsed_or_rejected(text, max_bytes=10**7)
    assert (result is not None) == (levels + 1 <= MAX_ARGUMENTS_DEPTH)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=JSON_VALUES, repeat=st.integers(min_value=0, max_value=3000))
def test_any_json_value_and_size_is_parsed_or_rejected(value: Any, repeat: int) -> None:
    text = json.dumps({"value": value, "pad": [value] * repeat}, ensure_ascii=bool(repeat % 2))
    result = parsed_or_rejected(text)
    if result is not None:
        assert json.loads(canonical_arguments(result)) == result  # canonical form round-trips
        assert len(canonical_arguments(result).encode()) <= len(text.encode()) + 1


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=200))
def test_arbitrary_text_is_parsed_or_rejected(text: str) -> None:
    parsed_or_rejected(text)
    parsed_or_rejected(text, max_bytes=8, max_depth=1, max_string=2)


@pytest.mark.slow  # 300 generated cards
@settings(max_examples=300, deadline=None)
@given(value=st.dictionaries(st.text(max_size=10), JSON_VALUES, max_size=6))
def test_accepted_arguments_show_on_a_card_as_the_same_json_made_of_showable_characters(
    value: dict[str, Any],
) -> None:
    result = parsed_or_rejected(json.dumps(value))
    if result is None:
        return
    shown = visible_json(result)
    assert json.loads(shown) == result
    assert all(showable(char) for char in shown) and "`" not in shown


@settings(max_examples=300, deadline=None)
@given(value=st.dictionaries(st.text(max_size=10), st.text(max_size=20), max_size=4))
def test_even_unshowable_text_is_shown_as_the_same_json_without_those_characters(
    value: dict[str, Any],
) -> None:
    # The card never relies on the gate alone: what reaches it unchecked is escaped, not shown raw.
    shown = visible_json(value)
    assert json.loads(shown) == value
    assert all(showable(char) for char in shown) and "`" not in shown
