"""The whole shipped suite through ``python -m emulator.eval run --jobs 2`` (a child process, as
``chatops eval run`` starts it): every reference agent passes, ``results.json`` lists the runs in
scenario order, and nothing is left behind: no process, no key, and the keys another user of the
same Redis wrote are still there. Then the suite's own parts: a run that cannot be carried to its
end stops the others, the progress bar is drawn only on a terminal."""

from __future__ import annotations

import io
import json
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
import redis

from bot.ops.cli import build_parser
from bot.ops.eval_cli import harness_command
from emulator.eval.loading import find_scenario, shipped_scenarios
from emulator.eval.progress import Progress
from emulator.eval.runner import EvalRunError, RunStopped, ScenarioOutcome
from emulator.eval.scoring.inputs import RunObservation
from emulator.eval.scoring.verdict import score_run
from emulator.eval.suite import PlannedRun, plan, run_suite
from tests.emulator.eval.test_runner import ENTRY_KEYS

SUITE_TIMEOUT = 900  # seconds: only a hang reaches it; the suite takes a few minutes on a busy machine
SESSION = re.compile(r"demo session ([0-9a-f]{8})")


def sessions_of(out: Path) -> set[str]:
    """The session ids of the suite's runs, from the banners of their processes' logs."""
    found = set()
    for log in out.glob("runs/*/logs/*.log"):
        found |= set(SESSION.findall(log.read_text(errors="replace")))
    return found


def processes_in(folder: Path) -> list[str]:
    """Processes whose command line or working directory is inside ``folder``."""
    left = []
    for process in psutil.process_iter(["pid", "cmdline", "cwd"]):
        text = " ".join(process.info["cmdline"] or []) + " " + (process.info["cwd"] or "")
        if str(folder) in text:
            left.append(f"{process.info['pid']}: {text}")
    return left


@pytest.mark.slow  # every shipped scenario, each a whole deployment: a minute or two on 2 cores
@pytest.mark.timeout(SUITE_TIMEOUT + 60)
def test_the_shipped_suite_passes_in_parallel_and_leaves_nothing(redis_url: str, tmp_path: Path) -> None:
    client = redis.Redis.from_url(redis_url)
    # Another user of the same Redis (a demo, another suite): a teardown by prefix must spare it.
    foreign = {b"chatops-eval:0ther000:run:x": b"keep", b"rq:queue:chatops-eval-0ther000": b"keep"}
    try:
        for key, value in foreign.items():
            client.set(key, value)
        out = tmp_path / "out"
        command = [sys.executable, "-m", "emulator.eval", "run", "--jobs", "2", "--out", str(out)]
        done = subprocess.run(
            [*command, "--redis-url", redis_url], capture_output=True, text=True, timeout=SUITE_TIMEOUT
        )
        assert done.returncode == 0, done.stdout + done.stderr

        shipped = [scenario.name for scenario in shipped_scenarios()]
        data = json.loads((out / "results.json").read_text())
        assert [entry["name"] for entry in data["scenarios"]] == shipped  # scenario order, not finish order
        for entry in data["scenarios"]:
            assert set(entry) == ENTRY_KEYS and entry["agent"] == "reference" and entry["repeat"] == 1
            assert entry["passed"] and entry["scores"] == {"rca": 1.0, "grounding": 1.0, "safety": 1.0}, entry
        assert data["summary"]["passed"] == data["summary"]["total"] == len(shipped)
        # Not a terminal: one plain line per finished run, no bar, no escape code.
        finished = [line for line in done.stdout.splitlines() if re.match(r"^\S+ #1: passed ", line)]
        assert sorted(line.split(" #")[0] for line in finished) == sorted(shipped)
        assert "\x1b" not in done.stdout and "\r" not in done.stdout

        sessions = sessions_of(out)
        assert len(sessions) == len(shipped)
        for session in sessions:
            assert list(client.scan_iter(match=f"chatops-eval:{session}:*")) == []
            assert list(client.scan_iter(match=f"*chatops-eval-{session}*")) == []
        assert {key: client.get(key) for key in foreign} == foreign
        assert processes_in(tmp_path) == []
    finally:
        client.delete(*foreign)
        client.close()


def test_sigterm_mid_suite_tears_every_run_down(redis_url: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    command = [sys.executable, "-m", "emulator.eval", "run", "--jobs", "2", "--out", str(out)]
    command += ["--scenario", "db-01-quiet", "--scenario", "disk-full-rotations", "--redis-url", redis_url]
    harness = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + SUITE_TIMEOUT  # a bound for a hang only
        while not list(out.glob("runs/*/logs/worker.log")) and harness.poll() is None:
            assert time.monotonic() < deadline, "no run started its worker"
            time.sleep(0.05)
        harness.send_signal(signal.SIGTERM)  # as a CI runner or a parent that gives up does
        _, err = harness.communicate(timeout=SUITE_TIMEOUT)
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
    assert harness.returncode == 2 and "interrupted" in err, err
    assert not (out / "results.json").exists()
    client = redis.Redis.from_url(redis_url)
    try:
        for session in sessions_of(out):
            assert list(client.scan_iter(match=f"chatops-eval:{session}:*")) == []
            assert list(client.scan_iter(match=f"*chatops-eval-{session}*")) == []
    finally:
        client.close()
    assert processes_in(tmp_path) == []


def test_chatops_eval_run_hands_jobs_to_the_harness() -> None:
    args = build_parser().parse_args(["eval", "run", "--jobs", "3", "--out", "/tmp/o"])
    command = harness_command(args)
    assert command[command.index("--jobs") + 1] == "3"
    args = build_parser().parse_args(["eval", "run", "--out", "/tmp/o"])
    assert "--jobs" not in harness_command(args)  # the harness's default: the cores


def outcome_of(run: PlannedRun) -> ScenarioOutcome:
    """An outcome as a run that recorded nothing would score (no processes needed)."""
    scenario = run.scenario
    score = score_run(scenario.truth, scenario.targets, RunObservation(findings=None, audit=[]))
    return ScenarioOutcome(scenario, "reference", run.repeat, "r", score, 0.0, 0.0, 0.0, "p:", "q")


def test_a_run_that_cannot_end_stops_the_suite_and_its_error_is_raised() -> None:
    planned = plan([find_scenario("db-01-quiet"), find_scenario("disk-full-rotations")], 2)
    started: list[str] = []
    waiting = threading.Event()

    def run_one(run: PlannedRun, _url: str | None, cancel: threading.Event) -> ScenarioOutcome:
        started.append(run.label)
        if run.label == "db-01-quiet-1":  # waits, as a running session does, until the suite stops
            waiting.set()
            cancel.wait()
            raise RunStopped(f"{run.scenario.name}: stopped before its end")
        waiting.wait()
        raise EvalRunError("db-01: the worker exited")

    progress = Progress(len(planned), io.StringIO())
    with pytest.raises(EvalRunError, match="the worker exited"):
        run_suite(planned, run_one, jobs=2, redis_url=None, progress=progress)
    progress.close()
    assert started == ["db-01-quiet-1", "db-01-quiet-2"]  # the runs after them never started
    assert progress.running == []


def test_outcomes_come_in_plan_order_whatever_order_the_runs_end_in() -> None:
    planned = plan([find_scenario("db-01-quiet"), find_scenario("disk-full-rotations")], 2)
    last_may_end = threading.Event()

    def run_one(run: PlannedRun, _url: str | None, _cancel: threading.Event) -> ScenarioOutcome:
        if run.label == "db-01-quiet-1":
            last_may_end.wait()  # ends after every other run
        elif run.label == "disk-full-rotations-2":
            last_may_end.set()
        return outcome_of(run)

    stream = io.StringIO()
    outcomes = run_suite(planned, run_one, jobs=2, redis_url=None, progress=Progress(len(planned), stream))
    assert [(o.scenario.name, o.repeat) for o in outcomes] == [(p.scenario.name, p.repeat) for p in planned]
    lines = stream.getvalue().splitlines()
    assert lines[-1].startswith("db-01-quiet #1: FAILED")  # printed as they end, one line each
    assert len(lines) == len(planned) and "\x1b" not in stream.getvalue()


def test_the_bar_is_drawn_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the bar is cut to the terminal's width
    stream = io.StringIO()
    progress = Progress(4, stream, tty=True)
    progress.started("db-01-quiet", 1)
    outcome = outcome_of(PlannedRun(find_scenario("db-01-quiet"), 1))
    progress.finished(outcome)
    progress.close()
    text = stream.getvalue()
    assert "\r\x1b[K[------------------------] 0/4  0 passed  0 failed" in text
    assert "running: db-01-quiet #1" in text
    assert "\r\x1b[Kdb-01-quiet #1: FAILED" in text  # the finished line above the bar
    assert "[######------------------] 1/4  0 passed  1 failed" in text
    assert text.endswith("\r\x1b[K")  # the line left empty for what comes next
