"""The ``chatops`` console script.

Subcommands are registered in one place, ``SUBCOMMANDS``: a name, a one-line help, and the
module that implements it. Such a module has two functions::

    def configure_cli(parser: argparse.ArgumentParser) -> None: ...   # add its options
    def run_cli(args: argparse.Namespace, settings: Settings) -> int: ...  # exit status

To add ``web``, ``demo`` or ``doctor``: write those two functions in your module and add one
line below. Settings are read once here (environment, ``.env`` or ``--env-file``), so every
subcommand works from the same configuration.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from pydantic import ValidationError

from bot.logs import configure_logging, redactor_for
from bot.settings import Settings

# name -> (module implementing it, help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "worker": ("bot.ops.worker", "run a worker: start and resume runs, expire approvals, recover dead runs"),
    "web": ("bot.slack.web", "serve Slack over HTTP (Socket Mode when SLACK_APP_TOKEN is set)"),
    "runs": ("bot.ops.runs_cli", "list runs, show a run's transcript (text, Markdown, JSON), cancel a run"),
    "audit": ("bot.ops.audit_cli", "print the newest audit entries; -f follows new ones"),
    "tools": ("bot.ops.tools_cli", "list the tools the model is offered, with category and origin"),
    "runner": ("bot.ops.fleet_cli", "run a runner on a host: one inventory target's tool calls"),
    "targets": ("bot.ops.targets_cli", "list the inventory's targets with each runner's last heartbeat"),
    "policy": ("bot.ops.policy_cli", "check the access policy file; explain what applies to a call and why"),
    "doctor": ("bot.ops.doctor", "check settings, Redis, Slack token and scopes, the LLM, the tool catalog"),
}


def _module(name: str) -> ModuleType:
    module = importlib.import_module(SUBCOMMANDS[name][0])
    for function in ("configure_cli", "run_cli"):
        if not callable(getattr(module, function, None)):
            raise TypeError(f"{module.__name__} must define {function}() to be the {name!r} subcommand")
    return module


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chatops", description="A chat-ops bot for on-call teams.")
    parser.add_argument("--env-file", help="read settings from this file instead of ./.env")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ... (default INFO)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_, help_text) in SUBCOMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        _module(name).configure_cli(sub)
    return parser


def load_settings(env_file: str | None) -> Settings:
    if env_file is None:
        return Settings()
    return Settings(_env_file=env_file)  # type: ignore[call-arg]


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings(args.env_file)
    except ValidationError as error:
        problems = [f"  {'.'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in error.errors()]
        print("chatops: invalid settings (environment or .env):\n" + "\n".join(problems), file=sys.stderr)
        return 2
    configure_logging(args.log_level, settings.chatops_log_format, redactor=redactor_for(settings))
    status: int = _module(args.command).run_cli(args, settings)
    return status


if __name__ == "__main__":
    sys.exit(main())
