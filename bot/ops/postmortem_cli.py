"""``chatops postmortem RUN_ID_OR_THREAD_LINK [--format md|json]`` (docs/POSTMORTEM.md).

A finished run's postmortem draft on stdout: Markdown (default) or JSON. The run is named by its
id (or a unique prefix of it, as ``chatops runs``) or by a Slack link to its thread (or to a reply
in it): the thread's last run. Links in the timeline are the audit entry ids (the CLI does not ask
Slack for permalinks). The timeline is in UTC, and also in ``--tz`` (an IANA zone name) when
given. Any error is one line on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import sys

import redis

from bot.errors import BotError, RunNotFoundError
from bot.keys import Keys
from bot.observability.audit import AuditLog
from bot.observability.logs import redactor_for
from bot.ops.runs_cli import resolve_run_id
from bot.postmortem.errors import PostmortemError
from bot.postmortem.render import to_json, to_markdown
from bot.postmortem.source import is_link, load_postmortem, parse_thread_link
from bot.postmortem.zone import Zone
from bot.redis_connection import open_redis
from bot.settings import Settings
from bot.slack.continuation import last_run

EXIT_ERROR = 2


def configure_cli(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run", metavar="RUN_ID_OR_THREAD_LINK", help="a run id (or prefix), or a Slack thread link"
    )
    parser.add_argument("--format", choices=("md", "json"), default="md", help="Markdown (default) or JSON")
    parser.add_argument("--tz", default="", help="also show the timeline in this zone (Asia/Kolkata)")


def run_id_for(client: redis.Redis, keys: Keys, given: str) -> str:
    """The run ``given`` names: a run id or prefix, or a thread link (the thread's last run)."""
    if is_link(given):
        thread = parse_thread_link(given)
        found = last_run(client, keys, thread.channel, thread.thread_ts)
        if found is None:
            raise PostmortemError(
                f"no run in thread {thread.channel} {thread.thread_ts} (or its retention expired)"
            )
        return found
    return resolve_run_id(client, keys, given.strip())


def run_cli(args: argparse.Namespace, settings: Settings) -> int:
    redactor = redactor_for(settings)
    zone = Zone.of(args.tz, None) if args.tz else None
    if args.tz and (zone is None or not zone.name):
        return _fail(f"--tz {args.tz[:40]!r} is not a time zone this machine knows (Asia/Kolkata, Etc/UTC)")
    try:
        client = open_redis(settings)
        keys = Keys(settings.chatops_redis_prefix)
        audit = AuditLog(client, keys, max_len=settings.chatops_audit_max_len, redactor=redactor)
        run_id = run_id_for(client, keys, args.run)
        postmortem = load_postmortem(client, keys, audit, run_id, redact=redactor.redact)
    except RunNotFoundError as error:
        return _fail(f"no run {error.run_id} (never created, or its retention expired)")
    except BotError as error:
        return _fail(str(error))
    except redis.RedisError as error:
        return _fail(f"cannot reach Redis at {redactor.redact(settings.redis_url)}: {error}")
    print(to_json(postmortem) if args.format == "json" else to_markdown(postmortem, zone))
    return 0


def _fail(message: str) -> int:
    print(f"error: {' '.join(message.split())}", file=sys.stderr)
    return EXIT_ERROR
