"""``chatops eval run ...`` and ``chatops eval capture ...``: measure investigations on fault scenarios (docs/EVAL.md).

The harness lives in ``emulator.eval``, built from the emulator (simulated hosts, the scripted
model server, the Slack emulator), and production code never imports the emulator (the
import-linter contract in pyproject.toml). So this command runs ``python -m emulator.eval`` as a
child process, with the same interpreter and the options as given, and returns its exit status.
Why a child rather than an exception to the contract: the harness starts a whole deployment per
scenario (web, worker, runners, Redis, servers in threads) and must tear every piece of it down;
in a process of its own nothing of it can leak into the CLI's, and a crash of the harness is an
exit status, not a half-stopped server in ``chatops``. The options are named here and checked by
the harness (the families and agents it knows).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys

from bot.settings import Settings

HARNESS = "emulator.eval"
EXIT_NO_HARNESS = 2


def configure_cli(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    run = actions.add_parser(
        "run",
        help="run scenarios through the real processes and score them",
        description="Run scenarios through the real processes and score them; write DIR/results.json "
        "and DIR/report.md (docs/EVAL.md). Runs go in parallel up to --jobs, with a progress bar on a terminal.",
    )
    run.add_argument(
        "--scenario", action="append", default=[], help="a shipped scenario's name or a YAML file"
    )
    run.add_argument("--tag", action="append", default=[], help="every scenario of a family (docs/EVAL.md)")
    run.add_argument(
        "--agent",
        default="reference",
        help="who investigates (default reference; model: the configured LLM_* settings)",
    )
    run.add_argument("--repeat", type=int, default=1, help="runs per scenario (default 1)")
    recorded = run.add_mutually_exclusive_group()
    recorded.add_argument("--record", help="record every model request and answer under this folder")
    recorded.add_argument("--replay", help="answer the model's requests from this recording (no network)")
    run.add_argument("--system-prompt", help="the system prompt file to measure (default: the shipped one)")
    run.add_argument("--jobs", type=int, help="runs at a time (default: the cores)")
    run.add_argument("--redis-url", help="use this Redis (keys prefixed, removed after each run)")
    run.add_argument("--out", required=True, help="where results.json and report.md are written")
    capture = actions.add_parser(
        "capture",
        help="turn a finished real run into a scenario file",
        description="Turn a finished run of this bot (read from its Redis with its settings) into a "
        "scenario that 'chatops eval run --scenario FILE' accepts: its tool outputs frozen, a reference "
        "agent replaying its calls, and its supported hypotheses as the truth only with --confirm "
        "(docs/EVAL.md, 'Capturing a real run').",
    )
    capture.add_argument("run_id", help="the run's id (or a unique prefix of it)")
    capture.add_argument("--out", required=True, help="the scenario file to write (NAME.yaml)")
    capture.add_argument(
        "--confirm", action="store_true", help="you vouch that its supported hypotheses are the truth"
    )


def capture_command(args: argparse.Namespace) -> list[str]:
    """``python -m emulator.eval capture`` with the run, the file and the CLI's own settings file."""
    command = [sys.executable, "-m", HARNESS, "capture", args.run_id, "--out", args.out]
    if args.confirm:
        command.append("--confirm")
    if getattr(args, "env_file", None):
        command += ["--env-file", args.env_file]
    return command


def harness_command(args: argparse.Namespace) -> list[str]:
    """``python -m emulator.eval run`` with the options as given (the harness checks them)."""
    command = [sys.executable, "-m", HARNESS, args.action, "--out", args.out, "--agent", args.agent]
    command += ["--repeat", str(args.repeat)]
    if args.jobs is not None:
        command += ["--jobs", str(args.jobs)]
    for name in args.scenario:
        command += ["--scenario", name]
    for tag in args.tag:
        command += ["--tag", tag]
    if args.redis_url:
        command += ["--redis-url", args.redis_url]
    if args.record:
        command += ["--record", args.record]
    if args.replay:
        command += ["--replay", args.replay]
    if args.system_prompt:
        command += ["--system-prompt", args.system_prompt]
    return command


def run_cli(args: argparse.Namespace, settings: Settings) -> int:
    if importlib.util.find_spec("emulator") is None:  # a top-level look-up imports nothing
        print(
            f"chatops eval: the harness ({HARNESS}) is not installed with this chatops; "
            "run it from a source checkout (pip install -e .)",
            file=sys.stderr,
        )
        return EXIT_NO_HARNESS
    command = capture_command(args) if args.action == "capture" else harness_command(args)
    with subprocess.Popen(command) as harness:
        while True:
            try:
                return harness.wait()
            except KeyboardInterrupt:  # the harness got the same Ctrl-C: it stops its runs, then exits
                continue
