"""What is worked out once per run for findings (issue 30's cost): never a different verdict.

A hypothesis resent unchanged is verified once against the results it cites, and a quote is checked
once against a result; a claim citing a result not indexed yet is judged again when it arrives,
and a reloaded history, or a result indexed again under an id it already had (a hostile Redis
writer), is judged against what the index holds now. The argument checks' quick path refuses
exactly what the walk by string refuses.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from agent.arguments import MAX_STRING_CHARS, parse_arguments, unshowable_character
from agent.errors import ArgumentsRejected
from agent.evidence import EvidenceIndex
from agent.findings_tool import parse_claim, verified_findings
from agent.types import Message, ToolCall


def _result(n: int, output: str) -> list[Message]:
    call = ToolCall(id=f"c{n}", name="disk_usage", arguments="{}")
    return [
        Message.assistant(None, [call]),
        Message.tool(f"c{n}", output, evidence=f"E{n}", tool="disk_usage"),
    ]


def _claim(*evidence: tuple[str, str]) -> str:
    hypothesis = {
        "id": "H1",
        "statement": "logs fill /",
        "status": "supported",
        "evidence": [{"ref": ref, "quote": quote} for ref, quote in evidence],
    }
    return json.dumps({"hypotheses": [hypothesis], "conclusion": "root_cause_found", "confidence": "high"})


def test_a_hypothesis_resent_unchanged_is_verified_once_and_shown_the_same() -> None:
    messages = _result(1, "/dev/sda1 95% /") + _result(2, "api.log.4 1.2G")
    index = EvidenceIndex().sync(messages)
    claim = parse_claim(_claim(("E1", "95%"), ("E2", "api.log.4")))
    first = verified_findings(claim, index, 1)
    messages += _result(3, "unrelated")
    second = verified_findings(claim, index.sync(messages), 2)
    assert second.hypotheses[0] is first.hypotheses[0]  # kept, not verified again
    assert [e.verified for e in second.hypotheses[0].evidence] == [True, True]
    changed = verified_findings(parse_claim(_claim(("E1", "95%"), ("E2", "1.3G"))), index, 3)
    assert [e.verified for e in changed.hypotheses[0].evidence] == [True, False]


def test_a_claim_citing_a_result_before_it_exists_is_judged_again_when_it_arrives() -> None:
    """A hostile model cites an id ahead of its result: unverified then, not remembered as such."""
    messages = _result(1, "/dev/sda1 95% /")
    index = EvidenceIndex().sync(messages)
    claim = parse_claim(_claim(("E1", "95%"), ("E2", "api.log.4")))
    early = verified_findings(claim, index, 1).hypotheses[0]
    assert early.evidence[1].problem == "E2 names no tool result of this run"
    messages += _result(2, "api.log.4 1.2G")
    late = verified_findings(claim, index.sync(messages), 2).hypotheses[0]
    assert [e.verified for e in late.evidence] == [True, True] and late is not early


def test_a_result_indexed_again_under_its_id_is_judged_as_it_is_now() -> None:
    """A hostile Redis writer repeats an id with another output, in the history or in a reloaded
    one: what was remembered of the first output is not shown for the second."""
    messages = _result(1, "/dev/sda1 95% /")
    index = EvidenceIndex().sync(messages)
    claim = parse_claim(_claim(("E1", "95%")))
    assert verified_findings(claim, index, 1).hypotheses[0].evidence[0].verified
    messages += _result(1, "/dev/sda1 12% /")
    again = verified_findings(claim, index.sync(messages), 2).hypotheses[0]
    assert again.evidence[0].problem == "the quote does not occur in E1's output"
    assert index.problem_with("E1", "95%") == "the quote does not occur in E1's output"
    reloaded = EvidenceIndex().sync(_result(1, "/dev/sda1 95% /"))
    assert verified_findings(claim, reloaded, 3).hypotheses[0].evidence[0].verified
    rewritten = list(_result(1, "/dev/sda1 40% /"))  # a new list: the index starts over
    assert not verified_findings(claim, reloaded.sync(rewritten), 4).hypotheses[0].evidence[0].verified


_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)


@given(st.dictionaries(_TEXT, st.one_of(_TEXT, st.lists(_TEXT, max_size=3)), max_size=4), st.booleans())
def test_the_quick_path_accepts_exactly_what_every_string_passes(
    value: dict[str, object], escaped: bool
) -> None:
    """Raw or escaped, every key and string is checked: accepted exactly when each is short enough
    and showable (here the limit is small, so some strings are over it)."""
    text = json.dumps(value, ensure_ascii=escaped)
    strings = [*value, *(s for v in value.values() for s in (v if isinstance(v, list) else [v]))]
    expected = all(len(s) <= 8 and unshowable_character(str(s)) is None for s in strings)
    try:
        parse_arguments(text, max_string=8)
    except ArgumentsRejected:
        accepted = False
    else:
        accepted = True
    assert accepted is expected


def test_the_quick_path_never_hides_a_refusal() -> None:
    for text in ('{"a": "x\\u202ey"}', '{"a\\u200b": 1}', '{"a": "\\"' + "x" * 9000 + '"}'):
        try:
            parse_arguments(text)
        except ArgumentsRejected:
            continue
        raise AssertionError(text)
    assert parse_arguments('{"a": "x\u00a0y", "b": ["' + "x" * MAX_STRING_CHARS + '"]}')["a"] == "x\u00a0y"
    try:
        parse_arguments('{"a": 1, "b": 2, "a": 3}')
    except ArgumentsRejected as rejected:
        assert str(rejected) == 'argument "a" is given twice: give each argument once'
    else:
        raise AssertionError("a repeated key was accepted")
