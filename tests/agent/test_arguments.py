"""``parse_arguments``: bounded, plain JSON objects whose every character an approver can see."""

from __future__ import annotations

import json

import pytest

from agent.arguments import (
    CONFIRMED_BY,
    MAX_ARGUMENTS_BYTES,
    MAX_ARGUMENTS_DEPTH,
    MAX_STRING_CHARS,
    canonical_arguments,
    confirmed_by,
    parse_arguments,
    showable,
    unshowable_character,
)
from agent.errors import AgentError, ArgumentsRejected


def rejected(text: str, **limits: int) -> str:
    with pytest.raises(ArgumentsRejected) as caught:
        parse_arguments(text, **limits)  # type: ignore[arg-type]
    return str(caught.value)


def test_a_plain_object_is_parsed_and_empty_text_is_no_arguments() -> None:
    assert parse_arguments('{"service": "nginx", "lines": 50}') == {"service": "nginx", "lines": 50}
    assert parse_arguments("") == {} and parse_arguments("  \n") == {}


def test_the_error_is_part_of_the_agent_tree_and_a_value_error() -> None:
    assert issubclass(ArgumentsRejected, AgentError) and issubclass(ArgumentsRejected, ValueError)


@pytest.mark.parametrize(
    ("char", "named"),
    [
        ("\u202e", "U+202E RIGHT-TO-LEFT OVERRIDE"),
        ("\u2066", "U+2066 LEFT-TO-RIGHT ISOLATE"),
        ("\u2028", "U+2028 LINE SEPARATOR"),
        ("\u2029", "U+2029 PARAGRAPH SEPARATOR"),
        ("\u200b", "U+200B ZERO WIDTH SPACE"),
        ("\u200c", "U+200C ZERO WIDTH NON-JOINER"),
        ("\u200d", "U+200D ZERO WIDTH JOINER"),
        ("\u2060", "U+2060 WORD JOINER"),
        ("\ufeff", "U+FEFF ZERO WIDTH NO-BREAK SPACE"),
        ("\ue000", "U+E000 (a private-use character)"),
        ("\u0378", "U+0378 (an unassigned code point)"),
        ("\x1b", "U+001B (a control character)"),
        ("\x85", "U+0085 (a control character)"),
    ],
)
def test_characters_that_cannot_be_shown_are_refused_naming_argument_and_code_point(
    char: str, named: str
) -> None:
    # The case: a restart whose service name reads differently from what would run.
    message = rejected(json.dumps({"service": f"ngi{char}nx"}))
    assert message.startswith(f'argument "service": {named} cannot be shown on an approval card')


def test_a_lone_surrogate_is_refused_whether_raw_or_escaped() -> None:
    assert "U+D800 (a lone surrogate)" in rejected('{"service": "\\ud800"}')
    assert "U+D800 (a lone surrogate)" in rejected('{"service": "\ud800"}')


def test_the_path_of_a_nested_value_and_of_a_bad_key_is_named() -> None:
    message = rejected(json.dumps({"opts": {"names": ["fine", "b\u200bad"]}}))
    assert message.startswith('argument "opts.names[1]": U+200B ZERO WIDTH SPACE')
    # The key itself is shown with the character escaped: the message must not carry it raw.
    message = rejected(json.dumps({"ser\u202evice": "nginx"}))
    assert message.startswith('argument name "ser\\u202evice": U+202E') and "\u202e" not in message


def test_newlines_tabs_and_ordinary_unicode_are_accepted() -> None:
    value = {"note": "line one\nline\ttwo", "who": "Zoë 王 مرحبا 🚀"}
    assert parse_arguments(json.dumps(value, ensure_ascii=False)) == value


def test_what_the_quick_check_cannot_decide_is_looked_at_character_by_character() -> None:
    # Not printable for Python, yet showable: spaces other than ASCII's (the quick check fails).
    spaced = {"note": "a\u00a0b\u3000c", "lines": ["x\ny\u2003z"]}
    assert parse_arguments(json.dumps(spaced, ensure_ascii=False)) == spaced
    # A newline or tab beside a hidden character does not let it through, in a value, a list or a key.
    assert 'argument "note": U+202E' in rejected(json.dumps({"note": "line\none\u202e"}))
    assert 'argument "n[0]": U+200B' in rejected(json.dumps({"n": ["a\tb\u200b"]}))
    assert 'argument name "k\\x85"' in rejected(json.dumps({"k\x85": 1}))


@pytest.mark.parametrize(
    "text",
    ["", "plain", "tab\tand\nnewline", "\u00a0nbsp", "bidi\u202e", "\n\u200b", "\ud800", "\x7f", "é\u0378"],
)
def test_the_quick_check_finds_the_character_the_walk_finds(text: str) -> None:
    assert unshowable_character(text) == next((char for char in text if not showable(char)), None)


@pytest.mark.parametrize(
    "value",
    [
        {},
        {"b": [1, 2.5, -0.0, 1e300, None, True, False], "a": 'é\n\u202e"\\', "c": {"z": {}, "y": []}},
        {"\u00e9": "x", "e": "\U0001f680", "": ""},
        {"n": 10**30, "f": 0.1},
    ],
)
def test_the_canonical_text_is_the_standard_encoders(value: dict[str, object]) -> None:
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    assert canonical_arguments(value) == expected


def test_a_number_that_is_not_json_has_no_canonical_text() -> None:
    with pytest.raises(ValueError):
        canonical_arguments({"a": float("nan")})


def test_the_size_is_capped_in_bytes() -> None:
    at_limit = json.dumps({"a": "x" * (MAX_ARGUMENTS_BYTES - 10)})
    assert parse_arguments(at_limit, max_string=MAX_ARGUMENTS_BYTES)
    message = rejected(json.dumps({"a": "é" * 40_000}, ensure_ascii=False))  # 80,000 bytes
    assert message == (
        "the arguments are 80,009 bytes (at most 65,536): send less, or do the work in several smaller calls"
    )


def test_a_hundred_thousand_nested_brackets_are_refused_without_recursion() -> None:
    bomb = "[" * 100_000 + "]" * 100_000
    message = rejected(bomb, max_bytes=10**6)
    assert message == (
        f"the arguments nest objects or arrays more than {MAX_ARGUMENTS_DEPTH} levels deep "
        f"(at most {MAX_ARGUMENTS_DEPTH}): flatten them"
    )
    assert "levels deep" in rejected('{"a":' * 100_000, max_bytes=10**6)


def test_depth_counts_only_brackets_outside_strings() -> None:
    deepest = '{"a":' + "[" * (MAX_ARGUMENTS_DEPTH - 1) + "]" * (MAX_ARGUMENTS_DEPTH - 1) + "}"
    assert parse_arguments(deepest)
    assert "levels deep" in rejected('{"a":' + "[" * MAX_ARGUMENTS_DEPTH + "]" * MAX_ARGUMENTS_DEPTH + "}")
    in_strings = json.dumps({"a": "[" * 1000, "b": '\\"[{' * 300})
    assert parse_arguments(in_strings)["a"] == "[" * 1000


def test_each_string_is_capped() -> None:
    assert rejected(json.dumps({"a": "x" * (MAX_STRING_CHARS + 1)})) == (
        f'argument "a" is {MAX_STRING_CHARS + 1:,} characters long (at most {MAX_STRING_CHARS:,}): shorten it'
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[1, 2]", "the arguments must be a JSON object, not an array"),
        ('"x"', "the arguments must be a JSON object, not a string"),
        ("{nope", "the arguments are not valid JSON"),
        ('{"a": 1, "a": 2}', 'argument "a" is given twice'),
        ('{"a": NaN}', "NaN is not a JSON number"),
        ('{"a": 1e999}', "the number 1e999 is too large"),
        ('{"a": ' + "9" * 5000 + "}", "the arguments contain a number too long to read"),
    ],
)
def test_what_is_not_a_plain_object_is_refused_with_a_reason(text: str, expected: str) -> None:
    assert rejected(text).startswith(expected)


def test_canonical_arguments_are_one_text_per_object() -> None:
    first = parse_arguments('{"b": [1, {"d": "é", "c": 2}], "a": true}')
    second = parse_arguments('{"a":true,"b":[1,{"c":2,"d":"\\u00e9"}]}')
    assert canonical_arguments(first) == canonical_arguments(second) == '{"a":true,"b":[1,{"c":2,"d":"é"}]}'


def test_trusted_keys_carry_the_runtimes_plan_but_the_rest_is_still_checked() -> None:
    plan = json.dumps({"files": [{"path": "/var/log/a\x1b.log"}] * 3000})  # > 64 KiB, a control char
    arguments = json.dumps({"older_than_days": 7, "approved_plan": plan})
    assert len(arguments) > MAX_ARGUMENTS_BYTES
    assert "bytes" in rejected(arguments)  # the model cannot send it
    assert parse_arguments(arguments, trusted=("approved_plan",))["approved_plan"] == plan
    hostile = json.dumps({"path": "x\u202e", "approved_plan": plan})
    with pytest.raises(ArgumentsRejected, match='argument "path"'):
        parse_arguments(hostile, trusted=("approved_plan",))
    padded = json.dumps({"path": "x" * 8000, "more": ["y" * 8000] * 8, "approved_plan": "p"})
    with pytest.raises(ArgumentsRejected, match="bytes"):
        parse_arguments(padded, trusted=("approved_plan",))


def test_confirmed_by_is_read_only_as_the_string_the_loop_writes() -> None:
    assert confirmed_by(json.dumps({"service": "nginx", CONFIRMED_BY: "U_APPROVER"})) == "U_APPROVER"
    assert confirmed_by('{"service": "nginx"}') is None  # nobody approved it


@pytest.mark.parametrize(
    "text",
    [
        '{"confirmed_by": 7}',
        '{"confirmed_by": ["U1"]}',
        '{"confirmed_by": {"id": "U1"}}',
        '{"confirmed_by": null}',
        '["confirmed_by", "U1"]',
        '"U1"',
        "",
        "not json",
        "[" * 100_000 + "]" * 100_000,
    ],
)
def test_confirmed_by_of_anything_else_is_nobody(text: str) -> None:
    assert confirmed_by(text) is None
