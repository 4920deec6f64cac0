"""``rca``: 0 when a root cause is missing from the supported hypotheses, else their precision;
a no-fault control scores 1 only for no_fault_found with nothing supported."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emulator.eval.scoring.inputs import read_findings
from emulator.eval.scoring.rca import cause_patterns, named_by, normalised, score_rca
from emulator.eval.truth import Cause

from .builders import findings, hypothesis, truth

TARGETS = ("web-03", "db-01")
TWO_CAUSES = truth(
    root_causes=[
        {"id": "web-03:service:api", "match": [r"\bapi\b", "oom|memory"]},
        {"id": "db-01:service:pgbouncer", "match": ["pgbouncer"]},
    ],
    suspects=[{"id": "web-03:service:nginx", "match": ["nginx"]}],
)
API = hypothesis("the api on web-03 was killed for memory")
PGBOUNCER = hypothesis("pgbouncer on db-01 did not come back from its reload")
NGINX = hypothesis("nginx on web-03 is misconfigured")
UNKNOWN = hypothesis("the moon is in the wrong phase")


@pytest.mark.parametrize(
    ("hypotheses", "expected", "named"),
    [
        ([API, PGBOUNCER], 1.0, {"web-03:service:api", "db-01:service:pgbouncer"}),
        ([API], 0.0, {"web-03:service:api"}),
        ([PGBOUNCER], 0.0, {"db-01:service:pgbouncer"}),
        (
            [API, PGBOUNCER, NGINX],
            2 / 3,
            {"web-03:service:api", "db-01:service:pgbouncer", "web-03:service:nginx"},
        ),
        ([API, PGBOUNCER, UNKNOWN], 2 / 3, {"web-03:service:api", "db-01:service:pgbouncer", "H3?"}),
        # one statement naming both causes names both, and one naming a suspect beside a cause names it too
        (
            [hypothesis("the api ran out of memory and pgbouncer is down")],
            1.0,
            {"web-03:service:api", "db-01:service:pgbouncer"},
        ),
        ([hypothesis("api out of memory, pgbouncer and nginx down")], 2 / 3, None),
        # restating a cause in a second hypothesis names it once
        ([API, PGBOUNCER, hypothesis("memory pressure killed the api")], 1.0, None),
        # refuted and open hypotheses are never counted
        ([API, PGBOUNCER, {**NGINX, "status": "refuted"}, {**UNKNOWN, "status": "open"}], 1.0, None),
        # claimed supported, shown open (no verified evidence): the cause is missing
        ([API, {**PGBOUNCER, "status": "open", "claimed_status": "supported"}], 0.0, None),
        ([], 0.0, set()),
    ],
)
def test_two_causes(hypotheses: list[dict[str, Any]], expected: float, named: set[str] | None) -> None:
    score = score_rca(TWO_CAUSES, read_findings(findings(*hypotheses)), TARGETS)
    assert score.value == pytest.approx(expected)
    if named is not None:
        assert set(score.named) == named
    assert (score.value == 0.0) == bool(score.missing)


NO_FAULT = truth(root_causes=[], suspects=["db-01:service:postgresql"])


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (findings(hypothesis("postgresql is overloaded", "refuted"), conclusion="no_fault_found"), 1.0),
        (findings(conclusion="no_fault_found"), 1.0),
        # the model claimed no fault but code showed inconclusive (nothing checked, or a supported one)
        ({**findings(conclusion="inconclusive"), "claimed_conclusion": "no_fault_found"}, 0.0),
        (findings(hypothesis("postgresql on db-01 is overloaded"), conclusion="root_cause_found"), 0.0),
        (findings(hypothesis("something odd"), conclusion="no_fault_found"), 0.0),
        (findings(conclusion="investigating"), 0.0),
        (None, 0.0),
    ],
)
def test_no_fault_control(document: dict[str, Any] | None, expected: float) -> None:
    assert score_rca(NO_FAULT, read_findings(document), ("db-01",)).value == expected


def test_a_run_without_findings_named_nothing() -> None:
    score = score_rca(TWO_CAUSES, None, TARGETS)
    assert score.value == 0.0 and set(score.missing) == {"web-03:service:api", "db-01:service:pgbouncer"}


def test_a_structured_cause_is_taken_as_it_is_and_the_statement_ignored() -> None:
    document = findings(
        hypothesis("something about nginx", cause="WEB-03:service:api.service"),
        hypothesis("no words that match", cause="db-01:service:pgbouncer"),
    )
    assert score_rca(TWO_CAUSES, read_findings(document), TARGETS).value == 1.0
    wrong = findings(hypothesis("the api ran out of memory, pgbouncer too", cause="web-03:service:nginx"))
    assert score_rca(TWO_CAUSES, read_findings(wrong), TARGETS).value == 0.0


@pytest.mark.parametrize(
    ("cause", "targets", "statement", "named"),
    [
        ("web-03:service:api", ("web-03",), "the api is down", True),
        ("web-03:service:api", ("web-03",), "rapid growth", False),  # a word, not a substring
        ("web-03:service:api", ("web-03",), "The API is down", True),  # case does not matter
        ("web-03:service:api", ("web-03", "db-01"), "the api is down", False),  # which host's?
        ("web-03:service:api", ("web-03", "db-01"), "web-03's api is down", True),
        ("web-03:file:/var/log/api.log", ("web-03",), "/var/log/api.log fills the disk", True),
        ("db-01:query:report.v2", ("db-01",), "the reportXv2 query", False),  # a dot is a dot
    ],
)
def test_default_match_is_the_name_as_a_word_and_the_target_when_several(
    cause: str, targets: tuple[str, ...], statement: str, named: bool
) -> None:
    one = truth(root_causes=[cause])
    hypo = read_findings(findings(hypothesis(statement)))
    assert hypo is not None
    assert (normalised(cause) in named_by(hypo.hypotheses[0], one, targets)) is named
    assert cause_patterns(Cause(id=cause), targets)


def test_statements_are_matched_in_linear_time_whatever_the_text() -> None:
    hostile = truth(root_causes=[{"id": "web-03:service:api", "match": ["(a+)+$"]}])
    document = findings(hypothesis("a" * 400 + "!"))
    assert score_rca(hostile, read_findings(document), ("web-03",)).value == 0.0


# -- properties -------------------------------------------------------------------------------------

STATEMENTS = [API, PGBOUNCER, NGINX, UNKNOWN, hypothesis("the api ran out of memory and nginx too")]
chosen = st.lists(st.sampled_from(STATEMENTS), max_size=6)
statuses = st.lists(st.sampled_from(["supported", "refuted", "open"]), min_size=6, max_size=6)


def _with(hypotheses: list[dict[str, Any]], status: list[str]) -> dict[str, Any]:
    return findings(*[{**h, "status": s} for h, s in zip(hypotheses, status, strict=False)])


@given(chosen, statuses)
def test_rca_is_a_share_and_order_does_not_matter(
    hypotheses: list[dict[str, Any]], status: list[str]
) -> None:
    forward = score_rca(TWO_CAUSES, read_findings(_with(hypotheses, status)), TARGETS).value
    backward = score_rca(
        TWO_CAUSES, read_findings(_with(hypotheses[::-1], status[: len(hypotheses)][::-1])), TARGETS
    ).value
    assert 0.0 <= forward <= 1.0 and forward == backward


@given(chosen, statuses)
def test_blaming_a_suspect_too_never_raises_rca(hypotheses: list[dict[str, Any]], status: list[str]) -> None:
    before = score_rca(TWO_CAUSES, read_findings(_with(hypotheses, status)), TARGETS).value
    after = score_rca(
        TWO_CAUSES,
        read_findings(_with([*hypotheses, NGINX], [*status[: len(hypotheses)], "supported"])),
        TARGETS,
    ).value
    assert after <= before


@given(chosen, statuses)
def test_only_supported_hypotheses_count(hypotheses: list[dict[str, Any]], status: list[str]) -> None:
    document = _with(hypotheses, status)
    kept = [h for h in document["hypotheses"] if h["status"] == "supported"]
    assert (
        score_rca(TWO_CAUSES, read_findings(document), TARGETS).value
        == score_rca(TWO_CAUSES, read_findings(findings(*kept)), TARGETS).value
    )
