"""Alertmanager's matcher syntax, case for case with its own parser tests; regexes on RE2."""

from __future__ import annotations

import time

import pytest

from tools.alert_matchers import MAX_MATCHER_CHARS, Matcher, parse_matcher, parse_matcher_list, parse_matchers
from tools.errors import MatcherSyntaxError, ToolArgumentError

# prometheus/alertmanager pkg/labels/parse_test.go, TestMatchers: input -> (name, op, value) each.
ALERTMANAGER_CASES: list[tuple[str, list[tuple[str, str, str]]]] = [
    ("{}", []),
    ("{foo='}", [("foo", "=", "'")]),
    ("{foo=`}", [("foo", "=", "`")]),
    ('{foo=\\"}', [("foo", "=", '"')]),
    ("{foo=bar}", [("foo", "=", "bar")]),
    ('{foo="bar"}', [("foo", "=", "bar")]),
    ("{foo=~bar.*}", [("foo", "=~", "bar.*")]),
    ('{foo=~"bar.*"}', [("foo", "=~", "bar.*")]),
    ("{foo!=bar}", [("foo", "!=", "bar")]),
    ('{foo!="bar"}', [("foo", "!=", "bar")]),
    ("{foo!~bar.*}", [("foo", "!~", "bar.*")]),
    ('{foo!~"bar.*"}', [("foo", "!~", "bar.*")]),
    ('{foo="bar", baz!="quux"}', [("foo", "=", "bar"), ("baz", "!=", "quux")]),
    ('{foo="bar", baz!~"quux.*"}', [("foo", "=", "bar"), ("baz", "!~", "quux.*")]),
    (
        '{foo="bar",baz!~".*quux", derp="wat"}',
        [("foo", "=", "bar"), ("baz", "!~", ".*quux"), ("derp", "=", "wat")],
    ),
    (
        '{foo="bar", baz!="quux", derp="wat"}',
        [("foo", "=", "bar"), ("baz", "!=", "quux"), ("derp", "=", "wat")],
    ),
    (
        '{foo="bar", baz!~".*quux.*", derp="wat"}',
        [("foo", "=", "bar"), ("baz", "!~", ".*quux.*"), ("derp", "=", "wat")],
    ),
    ('{foo="bar", instance=~"some-api.*"}', [("foo", "=", "bar"), ("instance", "=~", "some-api.*")]),
    ('{foo=""}', [("foo", "=", "")]),
    ('{foo="bar,quux", job="job1"}', [("foo", "=", "bar,quux"), ("job", "=", "job1")]),
    ('{foo = "bar", dings != "bums", }', [("foo", "=", "bar"), ("dings", "!=", "bums")]),
    ("foo=bar,dings!=bums", [("foo", "=", "bar"), ("dings", "!=", "bums")]),
    (
        r"""{quote="She said: \"Hi, ladies! That's gender-neutral…\""}""",
        [("quote", "=", 'She said: "Hi, ladies! That\'s gender-neutral…"')],
    ),
    ('statuscode=~"5.."', [("statuscode", "=~", "5..")]),
    ("tricky=~~~", [("tricky", "=~", "~~")]),
    (r"trickier==\\=\=\"", [("trickier", "=", r'=\=\="')]),
    (
        r'contains_quote != "\"" , contains_comma !~ "foo,bar" , ',
        [("contains_quote", "!=", '"'), ("contains_comma", "!~", "foo,bar")],
    ),
    ("{foo=bar}}", [("foo", "=", "bar}")]),
    ("{foo=bar}},}", [("foo", "=", "bar}}")]),
    ("{foo=,bar=}}", [("foo", "=", ""), ("bar", "=", "}")]),
    (r"{foo=bar\t}", [("foo", "=", r"bar\t")]),
    (r"{foo=bar\n}", [("foo", "=", "bar\n")]),
    ("{foo=bar\\}", [("foo", "=", "bar\\")]),
    (r"{foo=bar\\}", [("foo", "=", "bar\\")]),
    (r"{foo=bar\"}", [("foo", "=", 'bar"')]),
    ("job=", [("job", "=", "")]),
    ("{foo=", [("foo", "=", "")]),
    ("{foo=}b", [("foo", "=", "}b")]),
]

ALERTMANAGER_ERRORS: list[tuple[str, str]] = [
    (",", "bad matcher format"),
    ("{,}", "bad matcher format"),
    ('job="value', "matcher value contains unescaped double quote"),
    ('job=value"', "matcher value contains unescaped double quote"),
    (r'trickier==\\=\=\""', "matcher value contains unescaped double quote"),
    ('contains_unescaped_quote = foo"bar', "matcher value contains unescaped double quote"),
    ('{invalid-name = "valid label"}', "bad matcher format"),
    ('{foo=~"invalid[regexp"}', "bad regex"),
    # Double escaped strings.
    (r'"{foo=\"bar"}', "bad matcher format"),
    (r'"foo=\"bar"', "bad matcher format"),
    (r'"foo=\"bar\""', "bad matcher format"),
    (r'"foo=\"bar\"', "bad matcher format"),
    (r'"{foo=\"bar\"}"', "bad matcher format"),
    ('"foo="bar""', "bad matcher format"),
    ("{{foo=", "bad matcher format"),
]


def triples(matchers: list[Matcher]) -> list[tuple[str, str, str]]:
    return [(matcher.name, matcher.op, matcher.value) for matcher in matchers]


@pytest.mark.parametrize(("text", "expected"), ALERTMANAGER_CASES)
def test_alertmanagers_parse_cases(text: str, expected: list[tuple[str, str, str]]) -> None:
    assert triples(parse_matcher_list(text)) == expected


@pytest.mark.parametrize(("text", "expected"), ALERTMANAGER_ERRORS)
def test_alertmanagers_error_cases(text: str, expected: str) -> None:
    with pytest.raises(MatcherSyntaxError, match=expected) as caught:
        parse_matcher_list(text)
    assert isinstance(caught.value, ToolArgumentError) and isinstance(caught.value, ValueError)


def test_a_list_of_texts_is_every_matcher_in_order() -> None:
    matchers = parse_matchers(['team="sre"', 'severity=~"critical|warning"', "{env=prod, dc!=eu}"])

    assert triples(matchers) == [
        ("team", "=", "sre"),
        ("severity", "=~", "critical|warning"),
        ("env", "=", "prod"),
        ("dc", "!=", "eu"),
    ]
    assert triples(parse_matchers('team="sre"')) == [("team", "=", "sre")]  # one text, not its letters


@pytest.mark.parametrize(
    ("matcher", "value", "expected"),
    [
        ('severity="critical"', "critical", True),
        ('severity="critical"', "Critical", False),
        ('severity!="critical"', "warning", True),
        ('severity=~"critical|warning"', "warning", True),
        ('severity=~"critical|warning"', "critical-ish", False),  # anchored: the whole value
        ('severity=~"crit"', "xcritx", False),
        ('severity=~"crit.*"', "critical", True),
        ('severity!~"critical|warning"', "info", True),
        ('severity!~"critical|warning"', "warning", False),
        ('instance=~"web-\\\\d+:9100"', "web-03:9100", True),
        ('a=~"a|b"', "ab", False),  # ^(?:a|b)$, not ^a|b$
        ('a=~"foo"', "foo\n", False),  # $ is the end of the text, not before a final newline
        ('a=~".*"', "line1\nline2", False),  # . does not cross lines, as in Go
        ('a=~"(?s).*"', "line1\nline2", True),
    ],
)
def test_matching_a_value(matcher: str, value: str, expected: bool) -> None:
    assert parse_matcher(matcher).matches({"a": value, "severity": value, "instance": value}) is expected


def test_a_missing_label_matches_as_the_empty_string() -> None:
    labels = {"team": "sre"}

    assert parse_matcher('severity=""').matches(labels)
    assert parse_matcher('severity!="critical"').matches(labels)
    assert parse_matcher('severity=~"|critical"').matches(labels)
    assert not parse_matcher('severity=~".+"').matches(labels)
    assert not parse_matcher('severity="critical"').matches(labels)


def test_a_matcher_prints_as_alertmanager_writes_it_and_reads_back() -> None:
    for text in ['quote="a \\"b\\" \\\\ c\\nd"', 'sev=~"crit|warn"', "x!=y"]:
        matcher = parse_matcher(text)
        assert parse_matcher(str(matcher)) == matcher
    assert str(parse_matcher("x!=y")) == 'x!="y"'


@pytest.mark.parametrize(
    "regex",
    ["(a+)+$", "(a|aa)+$", "(.*a){20}", "(a*)*b", "((a+)+)+c", "(x+x+)+y"],
)
def test_catastrophic_regexes_finish_at_once(regex: str) -> None:
    matcher = parse_matcher(f'path=~"{regex}"')
    hostile = "a" * 100_000 + "!"

    started = time.monotonic()
    assert not matcher.matches({"path": hostile})
    assert time.monotonic() - started < 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r'a=~"(x)\1"', "bad regex"),  # backreference: not RE2
        ('a=~"(?=x)"', "bad regex"),  # lookahead: not RE2
        ('a=~"x{1001}"', "bad regex"),  # beyond RE2's repetition limit
        ('a=~"(((((((((((x{1000}){1000}){1000})))))))))"', "bad regex"),  # too big a program
        ("", "bad matcher format"),
        ("   ", "bad matcher format"),
        ("team", "bad matcher format"),
        ("team==", None),  # allowed: team = "=" (Alertmanager agrees)
        ("=sre", "bad matcher format"),
        ("9team=sre", "bad matcher format"),
        ("te am=sre", "bad matcher format"),
        ("team~=sre", "bad matcher format"),
        ("team:=sre", None),  # ':' is a label-name character: name "team:", value "sre"
        ('"team"="sre"', "bad matcher format"),  # quoted names are the newer UTF-8 syntax
        ("$(rm -rf /)=x", "bad matcher format"),
        ("team=`rm -rf /`", None),  # a value is only ever compared, never run
    ],
)
def test_hostile_and_mistyped_matchers(text: str, expected: str | None) -> None:
    if expected is None:
        parse_matcher(text)
        return
    with pytest.raises(MatcherSyntaxError, match=expected):
        parse_matcher(text)


def test_an_absurdly_long_matcher_text_is_refused_before_parsing() -> None:
    with pytest.raises(MatcherSyntaxError, match="longer than"):
        parse_matcher_list("a=" + "b" * MAX_MATCHER_CHARS)


def test_a_hostile_value_is_cut_short_in_the_message() -> None:
    with pytest.raises(MatcherSyntaxError) as caught:
        parse_matcher("!" * 3000)
    assert len(str(caught.value)) < 300


def test_matchers_built_in_code_obey_the_same_rules() -> None:
    assert Matcher("sev", "=~", "crit.*").matches({"sev": "critical"})
    with pytest.raises(MatcherSyntaxError):
        Matcher("bad name", "=", "x")
    with pytest.raises(MatcherSyntaxError):
        Matcher("sev", "==", "x")  # type: ignore[arg-type]
    with pytest.raises(MatcherSyntaxError):
        Matcher("sev", "=~", "(")
