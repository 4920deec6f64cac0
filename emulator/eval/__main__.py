"""``python -m emulator.eval run ...``: what ``chatops eval run`` runs (``bot.ops.eval_cli``).

::

    python -m emulator.eval run (--scenario NAME_OR_FILE | --tag TAG)... [--agent AGENT]
                                [--repeat K] [--record DIR | --replay DIR] [--redis-url URL] --out DIR

Runs each chosen scenario (``--scenario`` and ``--tag`` add up; none: every shipped scenario)
``--repeat`` times, one after the other, each in ``DIR/runs/NAME-REPEAT`` with its own processes,
Redis keys and queues, and writes ``DIR/results.json`` and ``DIR/report.md``. ``--record`` /
``--replay`` record the model's requests and answers, or answer from them (``recording``). Exit
status: 0 when every run passed (a stale replay is neither passed nor failed), 1 when one did not,
2 when a scenario or an option cannot be used or a run could not be carried to its end.

``python -m emulator.eval capture RUN_ID --out FILE [--confirm] [--env-file F]``: a finished run
of the bot (read from its Redis with its settings) as a scenario file (``emulator.eval.capture``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from emulator.eval.agents import AGENTS, agent_script
from emulator.eval.capture import add_capture_options, capture_cli
from emulator.eval.errors import EvalError, ScenarioFileError
from emulator.eval.loading import find_scenario, shipped_scenarios
from emulator.eval.model_agent import MODEL_AGENT
from emulator.eval.recording import RecordingError, RecordingPlan
from emulator.eval.results import write_results
from emulator.eval.runner import ScenarioOutcome, run_scenario
from emulator.eval.spec import FAMILIES, EvalScenario

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
    system_prompt = Path(args.system_prompt) if args.system_prompt else None
    if system_prompt is not None and not system_prompt.is_file():
        print(f"chatops eval: --system-prompt {system_prompt}: no such file", file=sys.stderr)
        return EXIT_ERROR
    out = Path(args.out)
    began = time.monotonic()
    outcomes: list[ScenarioOutcome] = []
    for scenario in scenarios:
        for repeat in range(1, args.repeat + 1):
            try:
                plan = recording_plan(args, scenario.name, repeat)
                outcome = run_scenario(
                    scenario,
                    out / "runs" / f"{scenario.name}-{repeat}",
                    args.agent,
                    repeat,
                    args.redis_url,
                    plan,
                    system_prompt,
                )
            except EvalError as error:
                print(f"chatops eval: {error}", file=sys.stderr)
                return EXIT_ERROR
            outcomes.append(outcome)
            verdict = "stale" if outcome.replay == "stale" else "passed" if outcome.score.passed else "FAILED"
            print(
                f"{scenario.name} #{repeat}: {verdict} {outcome.score.scores()} "
                f"({outcome.seconds:.1f} s run, {outcome.total_seconds:.1f} s in all)",
                flush=True,
            )
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m emulator.eval", description="chatops eval's harness")
    commands = parser.add_subparsers(dest="command", required=True)
    add_run_options(commands.add_parser("run", help="run scenarios and score them"))
    add_capture_options(commands.add_parser("capture", help="a finished real run as a scenario file"))
    args = parser.parse_args(argv)
    return capture_cli(args) if args.command == "capture" else run(args)


if __name__ == "__main__":
    sys.exit(main())
