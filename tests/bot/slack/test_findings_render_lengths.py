"""The Findings message counts its head and footer where they keep their text (issue 30's cost):
the same count as ``texts``, which every other check of Slack's limits uses."""

from __future__ import annotations

from agent.findings import Checked, Conclusion, Confidence, Findings
from bot.slack.rendering import findings as rendering
from bot.slack.rendering.blockkit import context, texts
from bot.slack.rendering.findings import FOOTER, findings_blocks


def test_the_head_and_footer_are_counted_as_texts_counts_them() -> None:
    findings = Findings(
        conclusion=Conclusion.NO_FAULT_FOUND,
        claimed_conclusion=Conclusion.ROOT_CAUSE_FOUND,
        confidence=Confidence.MEDIUM,
        claimed_confidence=Confidence.HIGH,
        checked=tuple(Checked(ref=f"E{i}", tool="check_disk", target="web-03") for i in range(1, 40)),
    )
    blocks = findings_blocks(findings, "a" * 32, "https://example.slack.com/archives/C1/p1")
    assert [b["type"] for b in blocks] == ["section", "context", "section", "context"]  # head, footer
    for block in blocks:
        assert rendering._text_length(block) == sum(len(t) for t in texts([block]))
    assert sum(len(t) for t in texts([context(FOOTER)])) == rendering._FOOTER_TEXT
