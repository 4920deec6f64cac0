"""``chatops runs list | show | cancel``: what runs exist, what one did, and stopping one.

Run ids may be shortened to any unique prefix (the run card shows the first 12 characters).
``list`` scans Redis for run records (retention keeps finished ones for ``CHATOPS_RETENTION_DAYS``);
on a terminal it shows its progress on stderr. Exit status: 0 done, 1 the run is missing or
already ended, 2 Redis cannot be reached.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TextIO

import redis

from agent.types import RunStatus
from bot.errors import BotError, RunNotFoundError
from bot.keys import Keys
from bot.observability.logs import redactor_for
from bot.observability.transcript import RENDERERS, stamp
from bot.redis_connection import open_redis
from bot.runs.record import ACTIVE_STATUSES, RunRecord, RunRecords
from bot.runs.service import RunOptions, RunService
from bot.runs.transcript_source import load_transcript
from bot.settings import Settings


class Progress:
    """A one-line progress note on stderr, only when it is a terminal (pipes and logs stay clean)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stderr
        self._shown = False
        isatty = getattr(self._stream, "isatty", None)
        self.enabled = bool(callable(isatty) and isatty())

    def update(self, text: str) -> None:
        if self.enabled:
            self._stream.write(f"\r\033[K{text}")
            self._stream.flush()
            self._shown = True

    def done(self) -> None:
        if self._shown:
            self._stream.write("\r\033[K")
            self._stream.flush()
            self._shown = False


def service_for(settings: Settings, client: redis.Redis) -> RunService:
    return RunService(client, Keys(settings.chatops_redis_prefix), RunOptions.from_settings(settings))


@contextmanager
def cli_errors(settings: Settings, stderr: TextIO | None = None) -> Iterator[list[int]]:
    """Turn a missing run or an unreachable Redis into a message and an exit status (the yielded list)."""
    status = [0]
    err = stderr or sys.stderr
    try:
        yield status
    except RunNotFoundError as error:
        err.write(f"error: no run {error.run_id} (never created, or its retention expired)\n")
        status[0] = 1
    except redis.RedisError as error:
        where = redactor_for(settings).redact(settings.redis_url)
        err.write(f"error: cannot reach Redis at {where}: {error}\n")
        status[0] = 2


# -- finding runs ------------------------------------------------------------------------------------


def _run_ids(records: RunRecords, prefix: str, progress: Progress) -> list[str]:
    """Ids of run records whose id starts with ``prefix`` (a SCAN: cost grows with the keyspace)."""

    def scanned(seen: int, found: int) -> None:
        progress.update(f"scanning Redis for runs… {seen:,} keys, {found:,} runs")

    found = records.scan_ids(prefix, scanned)
    progress.done()
    return found


def resolve_run_id(client: redis.Redis, keys: Keys, given: str) -> str:
    """``given`` if such a run exists, else the one run whose id starts with it."""
    records = RunRecords(client, keys)
    if records.exists(given):
        return given
    matches = _run_ids(records, given, Progress()) if len(given) >= 4 else []
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise BotError(
            f"{given} matches {len(matches)} runs: {', '.join(sorted(matches)[:5])}; give more of the id"
        )
    raise RunNotFoundError(given)


@dataclass(frozen=True)
class RunRow:
    record: RunRecord
    iterations: int
    paid_tokens: int

    def as_dict(self) -> dict[str, object]:
        return {
            **self.record.created_fields(),
            "iterations": self.iterations,
            "paid_tokens": self.paid_tokens,
        }


def list_runs(
    client: redis.Redis,
    keys: Keys,
    *,
    statuses: set[str] | None = None,
    channel: str | None = None,
    limit: int = 20,
    progress: Progress | None = None,
) -> list[RunRow]:
    """Runs, newest first, filtered by status and channel."""
    records = RunRecords(client, keys)
    run_ids = _run_ids(records, "", progress or Progress())
    rows = []
    for record in records.get_many(run_ids):
        if statuses and record.status.value not in statuses:
            continue
        if channel and record.channel != channel:
            continue
        state = record.state()
        rows.append(RunRow(record, state.iteration if state else 0, state.usage.paid_tokens if state else 0))
    rows.sort(key=lambda row: row.record.created_at, reverse=True)
    return rows[:limit]


def format_rows(rows: list[RunRow]) -> str:
    header = f"{'RUN':<32}  {'STATUS':<17}  {'CREATED':<23}  {'CHANNEL':<12}  {'REQUESTER':<10}  ITER  TOKENS  TEXT"
    lines = [header]
    for row in rows:
        r = row.record
        text = " ".join(r.text.split())[:40]
        lines.append(
            f"{r.run_id:<32}  {r.status.value:<17}  {stamp(r.created_at):<23}  {r.channel:<12}  "
            f"{r.requester:<10}  {row.iterations:>4}  {row.paid_tokens:>6}  {text}"
        )
    return "\n".join(lines)


# -- ``chatops runs`` ----------------------------------------------------------------------------------


def configure_cli(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="runs, newest first")
    statuses = [s.value for s in RunStatus]
    listing.add_argument(
        "--status",
        action="append",
        choices=[*statuses, "active", "finished"],
        help="only runs in this status (repeatable; 'active' and 'finished' group them)",
    )
    listing.add_argument("--channel", help="only runs in this channel ID")
    listing.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    show = actions.add_parser(
        "show", help="a run's transcript: messages, tool calls, decisions, timing, tokens"
    )
    show.add_argument("run_id", help="the run id or a unique prefix of it")
    show.add_argument("--format", choices=sorted(RENDERERS), default="text", help="default: text")
    show.add_argument(
        "--json",
        action="store_true",
        help="the transcript as JSON (--format json): steps with evidence ids, findings, checked citations",
    )
    cancel = actions.add_parser("cancel", help="stop a run after its current step (like the Stop button)")
    cancel.add_argument("run_id", help="the run id or a unique prefix of it")
    cancel.add_argument(
        "--by", default=f"cli:{getpass.getuser()}", help="who stopped it (shown in the audit)"
    )
    cancel.add_argument("--wait", type=float, default=0.0, metavar="SECONDS", help="wait for the run to end")


def run_cli(args: argparse.Namespace, settings: Settings) -> int:
    commands: dict[str, Callable[[argparse.Namespace, Settings, RunService], int]] = {
        "list": _list,
        "show": _show,
        "cancel": _cancel,
    }
    with cli_errors(settings) as status:
        service = service_for(settings, open_redis(settings))
        try:
            status[0] = commands[args.action](args, settings, service)
        except RunNotFoundError:
            raise
        except BotError as error:
            sys.stderr.write(f"error: {error}\n")
            status[0] = 1
    return status[0]


def _list(args: argparse.Namespace, settings: Settings, service: RunService) -> int:
    wanted: set[str] = set()
    for status in args.status or []:
        if status == "active":
            wanted.update(ACTIVE_STATUSES)
        elif status == "finished":
            wanted.update(s.value for s in RunStatus if s.terminal)
        else:
            wanted.add(status)
    rows = list_runs(
        service.redis, service.keys, statuses=wanted or None, channel=args.channel, limit=args.limit
    )
    if args.json:
        for row in rows:
            print(json.dumps(row.as_dict()))
    elif rows:
        print(format_rows(rows))
    else:
        print("no runs", file=sys.stderr)
    return 0


def _show(args: argparse.Namespace, settings: Settings, service: RunService) -> int:
    run_id = resolve_run_id(service.redis, service.keys, args.run_id)
    transcript = load_transcript(service, run_id, redactor_for(settings).redact)
    sys.stdout.write(RENDERERS["json" if args.json else args.format](transcript))
    return 0


def _cancel(args: argparse.Namespace, settings: Settings, service: RunService) -> int:
    run_id = resolve_run_id(service.redis, service.keys, args.run_id)
    if not service.request_stop(run_id, args.by):
        record = service.get(run_id)
        ended = record.status.value if record else "gone"
        print(f"run {run_id} already ended ({ended}); nothing to stop", file=sys.stderr)
        return 1
    print(f"asked run {run_id} to stop; it ends after the step in progress")
    if args.wait <= 0:
        return 0
    progress, started = Progress(), time.monotonic()
    while time.monotonic() - started < args.wait:
        record = service.get(run_id)
        if record is None or record.status.terminal:
            progress.done()
            print(f"run {run_id} ended: {record.status.value if record else 'gone'}")
            return 0
        progress.update(f"waiting for run {run_id[:12]} to stop… {time.monotonic() - started:.0f}s")
        time.sleep(0.2)
    progress.done()
    print(f"run {run_id} has not ended after {args.wait:g}s (is a worker running?)", file=sys.stderr)
    return 1
