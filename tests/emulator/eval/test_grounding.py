"""``grounding``: the share of required facts found in verified evidence quotes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emulator.eval.scoring.grounding import score_grounding
from emulator.eval.scoring.inputs import read_findings

from .builders import findings, hypothesis, truth

FACTS = truth(
    root_causes=["web-03:service:api"],
    facts=["No space left on device", "/var/log/api/api.log.9", {"matches": r"9\d% /var/log"}, "#compress"],
)


def grounding(*evidence: tuple[str, str, bool], status: str = "supported") -> float:
    return score_grounding(FACTS, read_findings(findings(hypothesis("h", status, evidence)))).value


@pytest.mark.parametrize(
    ("evidence", "expected"),
    [
        ([("E1", "No space left on device", True)], 0.25),
        (
            [("E1", "[Errno 28] no   space left\non device: '/var/log/api/api.log'", True)],
            0.25,
        ),  # whitespace, case
        ([("E1", "No space left on device", False)], 0.0),  # claimed, not verified: nothing
        (
            [("E2", "/var/log/api/api.log.9", True), ("E2", "/dev/vdb ext4 55M 54M 1.0M 99% /var/log", True)],
            0.5,
        ),
        ([("E2", "/dev/vdb 55M 80% /var/log", True)], 0.0),  # the pattern wants 90% or more
        # a fact must be within one quote: two halves in two quotes do not make it
        ([("E1", "No space left", True), ("E1", "on device", True)], 0.0),
        (
            [
                ("E1", "No space left on device", True),
                ("E2", "/var/log/api/api.log.9", True),
                ("E3", "#compress", True),
                ("E4", "99% /var/log", True),
            ],
            1.0,
        ),
        ([], 0.0),
    ],
)
def test_facts_in_verified_quotes(evidence: list[tuple[str, str, bool]], expected: float) -> None:
    assert grounding(*evidence) == pytest.approx(expected)


def test_facts_cited_to_refute_something_count_too() -> None:
    assert grounding(("E1", "No space left on device", True), status="refuted") == 0.25


def test_no_findings_ground_nothing() -> None:
    score = score_grounding(FACTS, None)
    assert score.value == 0.0 and len(score.missing) == 4


def test_the_report_names_found_and_missing_facts() -> None:
    score = score_grounding(
        FACTS, read_findings(findings(hypothesis("h", evidence=[("E3", "#compress", True)])))
    )
    assert score.found == ("#compress",)
    assert score.missing == ("No space left on device", "/var/log/api/api.log.9", r"/9\d% /var/log/")


evidence_items = st.lists(
    st.tuples(
        st.sampled_from(["E1", "E2", "E9"]),
        st.sampled_from(
            ["No space left on device", "/var/log/api/api.log.9", "98% /var/log", "#compress", "noise"]
        ),
        st.booleans(),
    ),
    max_size=8,
)


@given(evidence_items)
def test_unverified_evidence_never_grounds_anything(evidence: list[tuple[str, str, bool]]) -> None:
    with_claims = grounding(*evidence)
    only_verified = grounding(*[item for item in evidence if item[2]])
    assert with_claims == only_verified
    assert grounding(*[(ref, quote, False) for ref, quote, _ in evidence]) == 0.0


@given(evidence_items, evidence_items)
def test_more_verified_evidence_never_lowers_grounding(first: list[Any], more: list[Any]) -> None:
    assert grounding(*first, *more) >= grounding(*first)
