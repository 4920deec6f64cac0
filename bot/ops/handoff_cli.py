"""``chatops handoff [--since 12h] [--channel C…] [--json]``: the shift handoff (docs/POSTMORTEM.md).

What is still open (alert groups firing, runs in progress, approvals waiting and for how long,
follow-ups asked for in threads), what changed during the shift and who approved it (and the
change journal's entries of the inventory's targets, with ``CHATOPS_RUNNER_SECRET``), and the
approvals left undecided (expired or declined). Every item names the record, audit entry or change
it comes from. ``--channel`` (repeatable) keeps those channels only (and the targets they may
name). ``--since`` is parsed as ``/ops handoff --since`` is (``bot.postmortem.handoff``). Errors
are one line on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import redis

from bot.errors import BotError
from bot.keys import Keys
from bot.observability.audit import AuditLog
from bot.observability.findings_view import terminal_text
from bot.observability.logs import redactor_for
from bot.ops.compose_changes import change_journal
from bot.ops.fleet import load_fleet_inventory
from bot.postmortem.handoff import handoff_text, load_handoff, shift_seconds
from bot.redis_connection import open_redis
from bot.runs.approvals import Approvals
from bot.settings import Settings
from bot.slack.handlers.help import TargetList

EXIT_ERROR = 2


def configure_cli(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--since", default="12h", help="how far back the shift goes: 90m, 12h, 2d (default 12h)"
    )
    parser.add_argument("--channel", action="append", default=[], help="only this channel (repeatable)")
    parser.add_argument("--json", action="store_true", help="JSON instead of text")


def run_cli(args: argparse.Namespace, settings: Settings) -> int:
    back = shift_seconds(args.since)
    if back is None:
        print(f"error: --since {args.since[:40]!r} is not a duration (90m, 12h, 2d)", file=sys.stderr)
        return EXIT_ERROR
    redactor = redactor_for(settings)
    wanted = set(args.channel)
    try:
        client = open_redis(settings)
        keys = Keys(settings.chatops_redis_prefix)
        inventory = load_fleet_inventory(settings)
        listed = TargetList(inventory, settings.chatops_channel_targets)
        targets = (
            {t.name for c in wanted for t in listed.for_channel(c)} if wanted else {t.name for t in inventory}
        )
        journal = change_journal(client, settings, inventory) if settings.chatops_runner_secret else None
        handoff = load_handoff(
            client,
            keys,
            AuditLog(client, keys, max_len=settings.chatops_audit_max_len, redactor=redactor),
            Approvals(client, keys, retention_seconds=settings.chatops_retention_days * 86400),
            since=time.time() - back,
            redact=redactor.redact,
            may_see=lambda channel: not wanted or channel in wanted,
            journal=journal,
            targets=sorted(targets),
        )
    except BotError as error:
        print(f"error: {' '.join(str(error).split())}", file=sys.stderr)
        return EXIT_ERROR
    except redis.RedisError as error:
        print(f"error: cannot reach Redis at {redactor.redact(settings.redis_url)}: {error}", file=sys.stderr)
        return EXIT_ERROR
    print(json.dumps(handoff.as_json(), indent=2) if args.json else terminal_text(handoff_text(handoff)))
    return 0
