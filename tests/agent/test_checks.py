"""``agent.checks``: a check retried with growing pauses until it passes or its time is spent."""

from __future__ import annotations

from typing import cast

from agent.checks import RunCall, read_before, run_check
from agent.tooling import Tool, ToolResult
from agent.verification import PlannedCall


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.pauses: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds


def answers(clock: Clock, *outputs: tuple[str, bool], takes: float = 0.1) -> RunCall:
    remaining = list(outputs)

    def run(tool: Tool, arguments: str, timeout: float) -> ToolResult:
        clock.now += min(takes, timeout)
        output, error = remaining.pop(0) if len(remaining) > 1 else remaining[0]
        return ToolResult(output, is_error=error)

    return run


CHECK = PlannedCall("pool_status", '{"pool":"web"}', expect='"state": "running"')
TOOL = cast(Tool, object())  # the runner given never looks at it


def test_a_check_that_settles_passes_after_pauses_that_grow() -> None:
    clock = Clock()
    run = answers(
        clock,
        ('{"state": "starting"}', False),
        ('{"state": "starting"}', False),
        ('{"state": "running"}', False),
    )
    outcome = run_check(CHECK, TOOL, run, seconds=60, action_started=0, clock=clock, sleep=clock.sleep)
    assert outcome.passed and outcome.attempts == 3 and clock.pauses == [0.5, 1.0]
    assert outcome.headline() == 'Verified: pool_status {"pool":"web"}'


def test_a_check_that_never_passes_fails_when_its_time_is_spent() -> None:
    clock = Clock()
    outcome = run_check(
        CHECK,
        TOOL,
        answers(clock, ('{"state": "failed"}', False)),
        seconds=10,
        action_started=0,
        clock=clock,
        sleep=clock.sleep,
    )
    assert not outcome.passed and not outcome.timed_out and clock.now <= 10.0
    assert outcome.headline().startswith('Check failed: pool_status {"pool":"web"} (')


def test_a_check_cut_off_by_its_budget_did_not_finish() -> None:
    clock = Clock()
    run = answers(clock, ("Error: pool_status timed out", True), takes=1000)
    outcome = run_check(CHECK, TOOL, run, seconds=5, action_started=0, clock=clock, sleep=clock.sleep)
    assert outcome.timed_out and outcome.attempts == 1
    assert outcome.headline() == 'Check did not finish in 5 s: pool_status {"pool":"web"}'


def timed(clock: Clock, *calls: tuple[str, bool, float]) -> tuple[RunCall, list[float]]:
    """Each call's answer and how long it takes (at most its timeout: a cut-off call is given
    what was left and answers as the runner does then); the timeouts given, in order."""
    remaining = list(calls)
    timeouts: list[float] = []

    def run(tool: Tool, arguments: str, timeout: float) -> ToolResult:
        timeouts.append(timeout)
        output, error, takes = remaining.pop(0)
        clock.now += min(takes, timeout)
        return ToolResult(output, is_error=error)

    return run, timeouts


LATE = ("Error: [web-03] the call arrived after its deadline; it was not run", True, 1000.0)


def test_a_last_attempt_cut_off_by_the_budget_leaves_the_verdict_to_the_last_reading() -> None:
    """Under load the last try, given only what was left, reached the runner after its deadline:
    the check failed on what it read before, not "did not finish" with the runner's excuse."""
    clock = Clock()
    run, timeouts = timed(
        clock, ("api.service: failed", False, 0.6), ("api.service: failed", False, 0.6), LATE
    )
    outcome = run_check(CHECK, TOOL, run, seconds=4, action_started=0, clock=clock, sleep=clock.sleep)
    assert len(timeouts) == 3 and abs(timeouts[2] - 1.3) < 1e-9  # after 0.6 + 0.5 + 0.6 + 1.0 s
    assert not outcome.passed and not outcome.timed_out
    assert outcome.output == "api.service: failed" and outcome.attempts == 2
    assert outcome.headline() == 'Check failed: pool_status {"pool":"web"} (2 tries in 4 s)'


def test_no_attempt_starts_with_less_time_left_than_the_last_one_took() -> None:
    clock = Clock()
    run, timeouts = timed(clock, ("api.service: failed", False, 1.8), ("api.service: failed", False, 1.8))
    outcome = run_check(CHECK, TOOL, run, seconds=4, action_started=0, clock=clock, sleep=clock.sleep)
    assert timeouts == [4]  # after 1.8 s and a 0.5 s pause, 1.7 s left: less than the 1.8 s it took
    assert not outcome.timed_out and outcome.attempts == 1 and outcome.output == "api.service: failed"


def test_an_answer_that_passes_at_the_end_of_the_budget_still_passes() -> None:
    clock = Clock()
    run, _ = timed(clock, ('{"state": "starting"}', False, 0.1), ('{"state": "running"}', False, 1000.0))
    outcome = run_check(CHECK, TOOL, run, seconds=2, action_started=0, clock=clock, sleep=clock.sleep)
    assert outcome.passed and outcome.attempts == 2


def test_a_before_read_that_is_no_json_object_gives_no_fields() -> None:
    clock = Clock()
    assert read_before(CHECK, TOOL, answers(clock, ('{"replicas": 2}', False)), 5).fields == {"replicas": 2}
    assert read_before(CHECK, TOOL, answers(clock, ("[1, 2]", False)), 5).fields is None
    assert read_before(CHECK, None, answers(clock, ("{}", False)), 5).fields is None


def test_a_check_whose_tool_the_run_does_not_offer_is_not_run_and_says_so() -> None:
    clock = Clock()
    outcome = run_check(CHECK, None, answers(clock, ("{}", False)), seconds=5, action_started=0, clock=clock)
    assert outcome.refused is not None and outcome.attempts == 0
    assert outcome.headline() == "Check not run: pool_status is not offered in this run; verify by hand"
