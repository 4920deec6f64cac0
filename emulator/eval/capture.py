"""``chatops eval capture RUN_ID --out FILE [--confirm]``: a finished real run as a scenario.

The run is read from the bot's Redis with the bot's settings (the environment, ``./.env`` or the
``--env-file`` the CLI was given), the way ``chatops runs show`` reads it: its record, its saved
state (the findings as shown) and its history (``bot.runs.service.RunService``). The file is
built by ``emulator.eval.capture_build`` (what becomes what, and why), redacted with the bot's own
redactor, checked by the scenario loader before it is written, and checked once more for the
bot's secret values (the runner secret, tokens) as they are: none may be in it.

Without ``--confirm`` the truth is marked ``unconfirmed:``; ``eval run`` refuses the file, naming
it and what to check, until a person removes that line. Exit status: 0 written, 2 not.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import redis
import yaml

from bot.alerts.store import AlertStore
from bot.errors import BotError
from bot.keys import Keys
from bot.observability.logs import redactor_for
from bot.ops.runs_cli import resolve_run_id, service_for
from bot.redis_connection import open_redis
from bot.runs.presenter import AlertView
from bot.settings import Settings
from bot.settings_load import SettingsFileMissingError, load_settings
from emulator.eval.capture_build import CapturedAlert, CapturedRun, CaptureError, Redact, scenario_data
from emulator.eval.errors import ScenarioFileError
from emulator.eval.loading import parse_eval_scenario

EXIT_ERROR = 2
_NAME = r"^[a-z0-9][a-z0-9-]{1,62}$"


def add_capture_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", help="the finished run's id (or a unique prefix of it)")
    parser.add_argument("--out", required=True, help="the scenario file to write (NAME.yaml)")
    parser.add_argument(
        "--confirm",
        action="store_true",
        help="a person vouches that the run's supported hypotheses are the truth",
    )
    parser.add_argument("--env-file", help="the bot's settings file (default: ./.env)")


def read_run(settings: Settings, given: str) -> CapturedRun:
    """The finished run ``given`` (an id or a unique prefix) from the bot's Redis."""
    client = open_redis(settings)
    try:
        service = service_for(settings, client)
        run_id = resolve_run_id(client, service.keys, given)
        record = service.get(run_id)
        state = record.state() if record is not None else None
        if record is None or state is None:
            raise CaptureError(f"run {run_id} has no saved state (gone, or never started)")
        if not record.status.terminal:
            raise CaptureError(f"run {run_id} is {record.status.value}; capture it once it has ended")
        if state.condense_count:
            raise CaptureError(
                f"run {run_id}'s history was condensed: its early calls are gone, it cannot be replayed"
            )
        return CapturedRun(
            run_id=run_id,
            history=service.history(run_id),
            findings=state.findings,
            alert=_alert_of(client, service.keys, run_id),
        )
    finally:
        client.close()


def render(data: dict[str, Any]) -> str:
    """The file's text; every string is YAML-quoted as it needs, so hostile text loads back as text."""
    note = (
        "# Captured from a real run (chatops eval capture, docs/EVAL.md). The tool outputs it read are\n"
        "# frozen under fleet.targets.*.frozen; reference replays its own calls.\n"
    )
    if "unconfirmed" in data["truth"]:
        note += (
            "# The truth is UNCONFIRMED: it is what the run claimed. Check root_causes, facts and fixes\n"
            "# against what really happened, then delete the truth's unconfirmed: line.\n"
        )
    return note + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def check_written(text: str, source: str, secrets: list[str]) -> None:
    """The text loads back as the scenario it says (the unconfirmed mark aside) and holds no secret."""
    data = yaml.safe_load(text)
    data["truth"].pop("unconfirmed", None)
    parse_eval_scenario(data, source)
    leaked = [secret for secret in secrets if len(secret) >= 6 and secret in text]
    if leaked:
        raise CaptureError(
            f"{source}: a secret of the bot's settings would be written in it; nothing written"
        )


def _alert_of(client: redis.Redis, keys: Keys, run_id: str) -> CapturedAlert | None:
    """The alert that started the run, as its group's root showed it (``None``: a mention)."""
    group = AlertStore(client, keys).group_of_run(run_id)
    view = AlertView.decode(group.view) if group is not None and group.view else None
    if group is None or view is None:
        return None
    return CapturedAlert(labels=dict(view.labels), title=group.title, summary=view.summary)


def capture(settings: Settings, given: str, out: Path, confirmed: bool, redact: Redact | None = None) -> Path:
    name = out.stem
    if out.suffix != ".yaml" or not re.fullmatch(_NAME, name):
        raise CaptureError(
            f"--out {out}: a scenario file is NAME.yaml, NAME lower case letters, digits and -"
        )
    run = read_run(settings, given)
    data = scenario_data(run, name, confirmed, redact or redactor_for(settings).redact)
    text = render(data)
    check_written(text, str(out), [s for s in settings.secret_values() if s])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return out


def capture_cli(args: argparse.Namespace) -> int:
    try:
        loaded = load_settings(args.env_file)
    except SettingsFileMissingError as error:
        print(f"chatops eval capture: {error}", file=sys.stderr)
        return EXIT_ERROR
    try:
        written = capture(loaded.settings, args.run_id, Path(args.out), args.confirm)
    except (CaptureError, ScenarioFileError, BotError, redis.RedisError) as error:
        print(f"chatops eval capture: {error}", file=sys.stderr)
        return EXIT_ERROR
    state = "with its truth confirmed" if args.confirm else "with its truth UNCONFIRMED (eval run refuses it)"
    print(f"wrote {written} {state}")
    return 0
