"""The Findings message and the answer's citations as rendered (pure functions), within Slack's
limits as the strict emulator checks them, whatever the model sends within update_findings' caps."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.findings import (
    Checked,
    Citation,
    Conclusion,
    Confidence,
    Evidence,
    Findings,
    Hypothesis,
    HypothesisStatus,
)
from agent.findings_tool import MAX_EVIDENCE, MAX_HYPOTHESES, MAX_QUOTE, MAX_STATEMENT
from bot.slack.rendering.blockkit import CARD_TEXT, MAX_BLOCKS, SECTION_TEXT, texts
from bot.slack.rendering.citations import Style, cite, fill, finisher, head_lines, plain_answer
from bot.slack.rendering.findings import Choice, choice_value, findings_blocks, parse_choice
from emulator.slack.blocks import block_errors
from emulator.slack.live import live_in_message

RUN = "a" * 32
LINK = "https://example.slack.com/archives/C1/p1?thread_ts=1.2&cid=C1"
_CODE = re.compile(r"`[^`\n]*`")


def evidence(index: int, verified: bool, quote: str) -> Evidence:
    return Evidence(
        ref=f"E{index}",
        quote=quote,
        verified=verified,
        problem=None if verified else f"the quote does not occur in E{index}'s output",
        tool="check_disk",
        call_id=f"c{index}",
    )


def largest(text: str) -> Findings:
    """Everything update_findings accepts at its caps, every text ``text`` at its longest."""
    statement = (text * MAX_STATEMENT)[:MAX_STATEMENT]
    quote = (text * MAX_QUOTE)[:MAX_QUOTE]
    hypotheses = tuple(
        Hypothesis(
            id=f"H{h}",
            statement=statement,
            status=HypothesisStatus.REFUTED if h % 3 == 0 else HypothesisStatus.SUPPORTED,
            claimed_status=HypothesisStatus.SUPPORTED,
            evidence=tuple(evidence(e, e % 2 == 0, quote) for e in range(1, MAX_EVIDENCE + 1)),
        )
        for h in range(1, MAX_HYPOTHESES + 1)
    )
    return Findings(
        conclusion=Conclusion.NO_FAULT_FOUND,
        claimed_conclusion=Conclusion.ROOT_CAUSE_FOUND,
        confidence=Confidence.MEDIUM,
        claimed_confidence=Confidence.HIGH,
        hypotheses=hypotheses,
        checked=tuple(Checked(ref=f"E{i}", tool="check_disk", target="web-03") for i in range(1, 60)),
        version=7,
    )


@settings(max_examples=40, deadline=None)
@given(st.text(min_size=1, max_size=30))
def test_the_largest_findings_fit_slack_and_never_cut_inside_code(text: str) -> None:
    blocks = findings_blocks(largest(text), RUN, LINK)
    assert block_errors(blocks) == [] and len(blocks) <= MAX_BLOCKS
    assert sum(len(t) for t in texts(blocks)) <= CARD_TEXT
    for block in blocks:
        if block.get("type") == "section":
            body = block["text"]["text"]
            assert len(body) <= SECTION_TEXT
            for line in body.split("\n"):
                assert line.count("`") % 2 == 0, line  # whole lines: every code span closed
    shown = {b["block_id"] for b in blocks if b.get("block_id", "").startswith("findings_")}
    assert shown == {f"findings_H{h}" for h in range(1, MAX_HYPOTHESES + 1)}  # none dropped


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=80))
def test_nothing_the_model_writes_is_live_or_outside_code(text: str) -> None:
    findings = largest(text + "<@U1> <!channel> <http://x|verified> *verified* :white_check_mark:")
    blocks = findings_blocks(findings, RUN, LINK)
    live = live_in_message({"text": "", "blocks": blocks})
    assert {(item.kind, item.target) for item in live} <= {("link", LINK.replace("&", "&amp;"))}
    for block in blocks:
        if block.get("block_id", "").startswith("findings_"):
            prose = _CODE.sub("", block["text"]["text"])
            assert "<@" not in prose and "<!" not in prose and "*verified*" not in prose


def test_a_menu_value_names_choice_hypothesis_and_run_and_nothing_else_parses() -> None:
    value = choice_value(Choice.REFUTE, "H12", RUN)
    assert parse_choice(value) == (Choice.REFUTE, "H12", RUN)
    for forged in (
        f"refute:H0:{RUN}",
        f"delete:H1:{RUN}",
        f"refute:H1:{RUN}x",
        "refute:H1",
        f"focus:H1:{RUN[:-1]}G",
    ):
        assert parse_choice(forged) is None, forged


def test_citations_render_by_verdict_and_lookalikes_are_unverified() -> None:
    text = 'Logs [E1: "api.log.4 1.2G"] and [E2] and [E\u200b3: "x"] and \ue000 [E\uff14]'
    verified = Citation(start=5, end=27, ref="E1", quote="api.log.4 1.2G", verified=True, tool="check_disk")
    unknown = Citation(start=32, end=36, ref="E2", problem="E2 names no tool result of this run")
    answer = cite(text, [verified, unknown])
    assert answer.verified and len(answer.citations) == 4
    shown = finisher(answer, None, LINK, Style.MRKDWN)(answer.text)
    assert shown.startswith(f"Logs [<{LINK.replace('&', '&amp;')}|E1 · check_disk> `api.log.4 1.2G`] and ")
    assert "[E2 *unverified*: E2 names no tool result of this run]" in shown
    assert '[E3 *unverified* `[E3: "x"]`: written in a form code could not check]' in shown
    assert shown.endswith("[E4 *unverified* `[E\uff14]`: written in a form code could not check]")
    assert "\ue000" not in shown and "\u200b" not in shown
    plain = plain_answer(answer.text, answer, None, lambda t: t)
    assert plain.startswith('Logs [E1: "api.log.4 1.2G" (verified)] and [E2 (unverified, E2 names')
    assert fill("\ue0009\ue001", answer, lambda c: "x") == ""  # a placeholder naming no citation


def test_a_citation_not_where_code_found_it_stays_text() -> None:
    moved = Citation(start=0, end=4, ref="E1", verified=True)
    answer = cite("no [E1] here", [moved])
    assert answer.citations[0].problem is not None  # the lookalike, not the misplaced verdict
    assert not answer.verified


def test_head_lines_say_no_fault_found_and_a_claimed_cause_without_a_verified_citation() -> None:
    findings = largest("x")
    answer = cite("fine", [])
    mrkdwn = head_lines(findings, answer, Style.MRKDWN)
    assert mrkdwn[0].startswith(":white_check_mark: *No fault found*. Checked: E1 `check_disk` on `web-03`, ")
    assert mrkdwn[0].endswith(", and 29 more results.")
    assert mrkdwn[1].startswith(":warning: _The model says it found the root cause")
    assert head_lines(findings, answer, Style.MARKDOWN)[0].startswith(":white_check_mark: **No fault found**")
