"""The ``chatops`` console script.

Subcommands are registered in one place, ``SUBCOMMANDS``: a name, a one-line help, and the
module that implements it. Such a module has two functions::

    def configure_cli(parser: argparse.ArgumentParser) -> None: ...   # add its options
    def run_cli(args: argparse.Namespace, settings: Settings) -> int: ...  # exit status

To add ``web``, ``demo`` or ``doctor``: write those two functions in your module and add one
line below. Settings are read once here (environment, ``.env`` or ``--env-file``), so every
subcommand works from the same configuration.

Configuration errors take one path, here, for every command: a setting the model refuses, a name no
setting knows (``bot.settings_names``), a missing ``--env-file``, and the configuration errors a
command raises (``BotConfigurationError``, ``ToolConfigError``, ``agent`` 's ``ConfigurationError``)
are printed as lines ``chatops: configuration error: SETTING ...: what; fix: ...`` on stderr, no
traceback, and the exit status is 2. Settings warnings (a deprecated name, an unknown variable in the
environment) are logged at start. ``doctor`` sets ``REPORTS_SETTINGS = True``: it gets the problems
as ``args.settings_problems`` and reports them as its first check instead of stopping.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.metadata
import logging
import sys
from collections.abc import Sequence
from types import ModuleType

from agent.errors import ConfigurationError
from bot.errors import BotConfigurationError
from bot.observability.logs import configure_logging, redactor_for
from bot.settings_load import SettingsFileMissingError, load_settings
from tools.errors import ToolConfigError

log = logging.getLogger("bot.settings")

CONFIGURATION_ERROR = "chatops: configuration error: "
EXIT_CONFIGURATION = 2  # documented in docs/OPERATIONS.md, "When chatops refuses to start"
CONFIGURATION_ERRORS = (BotConfigurationError, ToolConfigError, ConfigurationError)

# name -> (module implementing it, help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "worker": ("bot.ops.worker", "run a worker: start and resume runs, expire approvals, recover dead runs"),
    "web": ("bot.ops.web_cli", "serve Slack over HTTP (Socket Mode when SLACK_APP_TOKEN is set)"),
    "runs": ("bot.ops.runs_cli", "list runs, show a run's transcript (text, Markdown, JSON), cancel a run"),
    "audit": ("bot.ops.audit_cli", "print the newest audit entries; -f follows new ones"),
    "memory": ("bot.ops.memory_cli", "list, show and forget the incidents the bot remembers"),
    "postmortem": (
        "bot.ops.postmortem_cli",
        "a finished run's postmortem draft (Markdown or JSON) by run id or thread link",
    ),
    "handoff": (
        "bot.ops.handoff_cli",
        "the shift handoff: what is still open, what changed and who approved it, what was left undecided",
    ),
    "changes": ("bot.ops.changes_cli", "record a deploy marker on a target; list a target's recent changes"),
    "tools": ("bot.ops.tools_cli", "list the tools the model is offered, with category and origin"),
    "runner": ("bot.ops.fleet_cli", "run a runner on a host: one inventory target's tool calls"),
    "targets": ("bot.ops.targets_cli", "list the inventory's targets with each runner's last heartbeat"),
    "policy": ("bot.ops.policy_cli", "check the access policy file; explain what applies to a call and why"),
    "eval": (
        "bot.ops.eval_cli",
        "run fault scenarios through the real processes and score the investigations",
    ),
    "doctor": ("bot.ops.doctor", "check settings, Redis, Slack token and scopes, the LLM, the tool catalog"),
}


def _module(name: str) -> ModuleType:
    module = importlib.import_module(SUBCOMMANDS[name][0])
    for function in ("configure_cli", "run_cli"):
        if not callable(getattr(module, function, None)):
            raise TypeError(f"{module.__name__} must define {function}() to be the {name!r} subcommand")
    return module


def version() -> str:
    """The installed distribution's version: pyproject.toml's ``version``, the one place it is written
    (an editable install reads it at install time: ``make`` installs again when pyproject.toml changes)."""
    try:
        return importlib.metadata.version("chatops")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed: pip install -e .)"


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every subcommand with its options; with ``only``, the options of that one alone (the others
    are listed by name and help): a process imports the module of the command it runs, not the
    web server's and the worker's both, which costs a second of CPU in every ``chatops`` process."""
    parser = argparse.ArgumentParser(prog="chatops", description="A chat-ops bot for on-call teams.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    parser.add_argument("--env-file", help="read settings from this file instead of ./.env")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ... (default INFO)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_, help_text) in SUBCOMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        if only is None or name == only:
            _module(name).configure_cli(sub)
    return parser


def chosen_command(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names (its first word that is not a top-level option or its value),
    or None when it names none (then the whole parser reports the mistake, or the help)."""
    words = iter(argv)
    for word in words:
        if word in ("--env-file", "--log-level"):
            next(words, None)
        elif not word.startswith("-"):
            return word if word in SUBCOMMANDS else None
    return None


def configuration_error(lines: Sequence[str]) -> int:
    """Each line of a configuration error on stderr, with the one prefix; the exit status."""
    for line in lines:
        if line.strip():
            print(CONFIGURATION_ERROR + line.strip().removeprefix("- "), file=sys.stderr)
    return EXIT_CONFIGURATION


def main(argv: Sequence[str] | None = None) -> int:
    status = _main(sys.argv[1:] if argv is None else argv)
    if argv is None:  # the program itself, about to exit (not a caller that goes on)
        # What is left is freed by exiting: without this, the interpreter's last collection walks
        # every object of a process that imported the bot (seconds for a worker on a busy
        # machine, while its service manager or ``make demo`` waits for it to stop).
        gc.freeze()
    return status


def _main(argv: Sequence[str]) -> int:
    args = build_parser(chosen_command(argv)).parse_args(argv)
    module = _module(args.command)
    try:
        loaded = load_settings(args.env_file)
    except SettingsFileMissingError as error:
        return configuration_error(
            [f"{error}; fix: give an existing file, or leave --env-file out to read ./.env"]
        )
    if loaded.errors and not getattr(module, "REPORTS_SETTINGS", False):
        return configuration_error([problem.line() for problem in loaded.errors])
    settings = loaded.settings
    configure_logging(args.log_level, settings.chatops_log_format, redactor=redactor_for(settings))
    for warning in loaded.warnings:
        log.warning("settings: %s", warning.line())
    args.settings_problems = loaded.problems
    args.invalid_settings = loaded.invalid
    try:
        status: int = module.run_cli(args, settings)
    except CONFIGURATION_ERRORS as error:
        return configuration_error(str(error).splitlines())
    return status


if __name__ == "__main__":
    sys.exit(main())
