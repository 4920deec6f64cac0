"""``chatops changes add --target T --what TEXT [--who --url --at] | list --target T [--since 2h] [--json]``.

``add``: a deploy marker written straight into the change journal (source ``cli``), sealed with
the target's key from ``CHATOPS_RUNNER_SECRET``: for an operator's script on a box that holds the
settings (CI without it posts to ``POST /changes`` instead, docs/CHANGES.md "Deploy markers").
``--target`` may be repeated; every one must be a target of the inventory. ``list``: the target's
changes since ``--since`` (a duration, ``90s``, ``30m``, ``2h``, ``7d``, or an RFC 3339 time;
default 24h), **oldest first**, one per line (time UTC, kind, what, who, source), control
characters escaped; ``--json``: a JSON array of the same changes.

A mistake (no secret, a target the inventory does not have, a ``--since`` or ``--at`` that is
not a time) is one line on stderr and exit status 2, as is an unreachable Redis.
"""

from __future__ import annotations

import argparse
import dataclasses
import getpass
import json
import re
import sys
import time

from bot.changes.markers import deploys, not_future, rfc3339, web_url
from bot.errors import BotConfigurationError, MarkerError
from bot.observability.findings_view import terminal_text
from bot.ops.compose_changes import change_journal
from bot.ops.fleet import load_fleet_inventory
from bot.ops.runs_cli import cli_errors
from bot.redis_connection import open_redis
from bot.settings import Settings
from tools.changes.record import Change
from tools.inventory_types import Inventory, Target

_DURATION = re.compile(r"(\d{1,7})([smhdw])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
DEFAULT_SINCE = "24h"


def configure_cli(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="record a deploy marker on one or more targets")
    add.add_argument("--target", action="append", required=True, help="an inventory target (repeatable)")
    add.add_argument("--what", required=True, help='what changed: "deploy api 1.4.2"')
    add.add_argument("--who", default=None, help="who did it (default: your login name)")
    add.add_argument("--url", default="", help="a link: the pipeline, the release")
    add.add_argument("--at", default=None, help="when, RFC 3339 (default: now)")
    listing = actions.add_parser("list", help="a target's changes, oldest first, one per line")
    listing.add_argument("--target", required=True, help="an inventory target")
    listing.add_argument(
        "--since", default=DEFAULT_SINCE, help="90s, 30m, 2h, 7d or an RFC 3339 time (default 24h)"
    )
    listing.add_argument("-n", "--limit", type=int, default=200, help="at most this many, the newest (200)")
    listing.add_argument("--json", action="store_true", help="a JSON array of the changes")


def since_of(text: str, now: float) -> float:
    """Unix seconds: ``now`` minus a duration, or an RFC 3339 time. ``MarkerError`` otherwise."""
    found = _DURATION.fullmatch(text.strip())
    if found:
        return now - int(found.group(1)) * _UNIT[found.group(2)]
    try:
        return rfc3339(text, "--since")
    except MarkerError as error:
        raise MarkerError(
            2, f"--since {text[:40]!r} is neither a duration (90s, 30m, 2h, 7d) nor an RFC 3339 time"
        ) from error


def change_line(change: Change) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(change.at))
    who = f"by {change.who}" if change.who else "by -"
    seen = " (seen)" if change.seen else ""
    return terminal_text(f"{when}Z{seen}  {change.kind:<8} {change.what}  [{who}, {change.source or '-'}]")


def run_cli(args: argparse.Namespace, settings: Settings) -> int:
    if not settings.chatops_runner_secret:
        raise BotConfigurationError(
            "CHATOPS_RUNNER_SECRET is empty, and the change journal is sealed with each target's key; "
            "fix: run this where the settings hold it (the web process's or the workers')"
        )
    inventory = load_fleet_inventory(settings)
    now = time.time()
    try:
        targets = _targets(inventory, args.target if args.action == "add" else [args.target])
        if args.action == "add":
            at = not_future(rfc3339(args.at, "--at"), now, "--at") if args.at is not None else now
            who = args.who if args.who is not None else _login()
            if not args.what.strip():
                raise MarkerError(2, "--what is empty: say what changed")
            changes = deploys(
                targets, what=args.what, at=at, source="cli", who=who, url=web_url(args.url, "--url")
            )
        else:
            since = since_of(args.since, now)
    except MarkerError as error:
        print(f"error: {error.reason}", file=sys.stderr)
        return 2
    with cli_errors(settings) as status:
        journal = change_journal(open_redis(settings), settings, inventory)
        if args.action == "add":
            added = journal.append(changes)
            print(f"recorded on {', '.join(t.name for t in targets)}" + ("" if added else " (already there)"))
        else:
            found = journal.between(targets[0].name, since, now + 60, limit=max(1, args.limit))
            if args.json:
                print(
                    json.dumps([dataclasses.asdict(change) | {"id": change.id} for change in found], indent=2)
                )
            else:
                for change in found:
                    print(change_line(change))
    return status[0]


def _targets(inventory: Inventory, names: list[str]) -> list[Target]:
    found = []
    for name in names:
        target = inventory.get(name)
        if target is None:
            known = ", ".join(inventory.names()[:10])
            raise MarkerError(2, f"no target {name[:60]!r} in the inventory (its targets: {known})")
        found.append(target)
    return found


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container's arbitrary uid)
        return ""
