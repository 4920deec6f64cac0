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
