"""``python -m emulator.eval run ...``: what ``chatops eval run`` runs (``bot.ops.eval_cli``).

::

    python -m emulator.eval run (--scenario NAME_OR_FILE | --tag TAG)... [--agent AGENT]
                                [--repeat K] [--jobs N] [--record DIR | --replay DIR]
                                [--system-prompt FILE] [--redis-url URL] --out DIR

Runs each chosen scenario (``--scenario`` and ``--tag`` add up; none: every shipped scenario)
``--repeat`` times, up to ``--jobs`` runs at a time (default: the cores; ``emulator.eval.suite``),
each in ``DIR/runs/NAME-REPEAT`` with its own processes, Redis keys and queues, and writes
``DIR/results.json``, ``DIR/report.md`` and ``DIR/report.html`` (runs in scenario order, then
repeat). A line per finished run; on a terminal, a progress bar (``emulator.eval.progress``).
``--record`` / ``--replay`` record the model's requests and answers, or answer from them
(``recording``). Exit status: 0 when every run passed (a stale replay is neither passed nor
failed), 1 when one did not, 2 when a scenario or an option cannot be used or a run could not be
carried to its end (then the others are stopped and nothing is written).

``python -m emulator.eval capture RUN_ID --out FILE [--confirm] [--env-file F]``: a finished run
of the bot (read from its Redis with its settings) as a scenario file (``emulator.eval.capture``).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from emulator.eval.agents import AGENTS, agent_script
from emulator.eval.capture import add_capture_options, capture_cli
from emulator.eval.errors import EvalError, ScenarioFileError
from emulator.eval.loading import find_scenario, shipped_scenarios
from emulator.eval.model_agent import MODEL_AGENT
from emulator.eval.progress import Progress
from emulator.eval.recording import RecordingError, RecordingPlan
from emulator.eval.results import write_results
from emulator.eval.runner import ScenarioOutcome, run_scenario
from emulator.eval.spec import FAMILIES, EvalScenario
from emulator.eval.suite import PlannedRun, RunOne, default_jobs, plan, run_suite, suite_redis

EXIT_FAILED, EXIT_ERROR = 1, 2


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``run`` (``chatops eval run`` offers the same)."""
    parser.add_argument(
        "--scenario", action="append", default=[], help="a shipped scenario's name or a YAML file"
    )
    parser.add_argument(
        "--tag", action="append", default=[], choices=sorted(FAMILIES), help="every scenario of a family"
    )
    parser.add_argument(
        "--agent",
        default="reference",
        choices=(*AGENTS, MODEL_AGENT),
        help="who investigates (default reference; model: the configured LLM_* settings)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per scenario (default 1)")
    recorded = parser.add_mutually_exclusive_group()
    recorded.add_argument("--record", help="record every model request and answer under this folder")
    recorded.add_argument("--replay", help="answer the model's requests from this recording (no network)")
    parser.add_argument(
        "--system-prompt",
        help="the worker's system prompt file (CHATOPS_SYSTEM_PROMPT_FILE); default: shipped",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=default_jobs(),
        help="runs at a time (default: the cores, here %(default)s)",
    )
    parser.add_argument(
        "--redis-url", help="use this Redis (keys prefixed, removed after each run); default: embedded"
    )
    parser.add_argument("--out", required=True, help="where results.json and report.md are written")


def chosen(names: Sequence[str], tags: Sequence[str]) -> list[EvalScenario]:
    picked = [find_scenario(name) for name in names]
    if tags or not names:
        shipped = shipped_scenarios()
        picked += [s for s in shipped if not tags or set(tags) & set(s.tags)]
    unique: dict[str, EvalScenario] = {}
    for scenario in picked:
        unique.setdefault(scenario.name, scenario)
    return list(unique.values())


def run(args: argparse.Namespace) -> int:
    if args.repeat < 1:
        print("chatops eval: --repeat must be at least 1", file=sys.stderr)
        return EXIT_ERROR
    try:
        scenarios = chosen(args.scenario, args.tag)
        for scenario in scenarios:  # a reference a bad agent cannot be derived from: said before any run
            if args.agent != MODEL_AGENT:
                agent_script(scenario, args.agent)
    except ScenarioFileError as error:
        print(error, file=sys.stderr)
        return EXIT_ERROR
    if not scenarios:
        print("chatops eval: no scenario has those tags", file=sys.stderr)
        return EXIT_ERROR
    if args.jobs < 1:
        print("chatops eval: --jobs must be at least 1", file=sys.stderr)
        return EXIT_ERROR
    system_prompt = Path(args.system_prompt) if args.system_prompt else None
    if system_prompt is not None and not system_prompt.is_file():
        print(f"chatops eval: --system-prompt {system_prompt}: no such file", file=sys.stderr)
        return EXIT_ERROR
    out = Path(args.out)
    began = time.monotonic()
    planned = plan(scenarios, args.repeat)
    progress = Progress(len(planned), sys.stdout)
    try:
        with suite_redis(args.redis_url, out / "redis") as redis_url:
            outcomes = run_suite(
                planned,
                _runner(args, out, system_prompt),
                jobs=args.jobs,
                redis_url=redis_url,
                progress=progress,
            )
    except EvalError as error:
        progress.close()
        print(f"chatops eval: {error}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        progress.close()
        print("chatops eval: interrupted; every run was stopped", file=sys.stderr)
        return EXIT_ERROR
    progress.close()
    written = write_results(out, outcomes, time.monotonic() - began)
    print(f"wrote {written} and {out / 'report.md'}")
    return 0 if all(o.score.passed or o.replay == "stale" for o in outcomes) else EXIT_FAILED


def recording_plan(args: argparse.Namespace, name: str, repeat: int) -> RecordingPlan | None:
    """``--record`` / ``--replay``'s plan for one run (a replay reads its recording here)."""
    if args.record:
        return RecordingPlan.for_run("record", Path(args.record), name, repeat)
    if args.replay:
        plan = RecordingPlan.for_run("replay", Path(args.replay), name, repeat)
        if plan.meta is not None and plan.meta.agent != args.agent:  # results name who answered
            raise RecordingError(f"{plan.folder} records --agent {plan.meta.agent}; replay it with that")
        return plan
    return None


def _runner(args: argparse.Namespace, out: Path, system_prompt: Path | None) -> RunOne:
    """One planned run with the command's options, in ``DIR/runs/NAME-REPEAT``."""

    def run_one(run: PlannedRun, redis_url: str | None, cancel: threading.Event) -> ScenarioOutcome:
        directory = out / "runs" / run.label
        recording = recording_plan(args, run.scenario.name, run.repeat)
        return run_scenario(
            run.scenario,
            directory,
            args.agent,
            run.repeat,
            redis_url,
            recording,
            system_prompt,
            cancel=cancel,
        )

    return run_one


def _stop_on_sigterm() -> None:
    """SIGTERM stops the suite as Ctrl-C does: every run torn down, not left running."""

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m emulator.eval", description="chatops eval's harness")
    commands = parser.add_subparsers(dest="command", required=True)
    add_run_options(commands.add_parser("run", help="run scenarios and score them"))
    add_capture_options(commands.add_parser("capture", help="a finished real run as a scenario file"))
    args = parser.parse_args(argv)
    return capture_cli(args) if args.command == "capture" else run(args)


if __name__ == "__main__":
    _stop_on_sigterm()
    sys.exit(main())
