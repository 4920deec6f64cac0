"""``chatops audit tail [-n N] [-f] [--run ID] [--kind KIND] [--actor U…] [--target T] [--json]``.

The newest audit entries; ``--actor`` keeps those a person acted in (started, approved, declined,
superseded, stopped, confirmed, wrote), ``--target`` those about one inventory target.

One line per entry, oldest first: time, kind, run id, then its fields (``key=value``, values on
one line, long ones cut, secrets redacted, control characters escaped); a ``findings_updated``
entry shows its update, conclusion, confidence and each hypothesis with its evidence's verdicts.
``-f`` then waits for new entries (``XREAD BLOCK``) until interrupted. ``--json`` prints one JSON
object per entry instead.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterable
from typing import cast

import redis

from agent.findings import Findings
from agent.redis_util import as_text, as_text_dict
from bot.keys import Keys
from bot.observability.audit import AuditEntry, AuditKind
from bot.observability.findings_view import findings_summary, terminal_text
from bot.observability.logs import redactor_for
from bot.observability.transcript import stamp
from bot.ops.runs_cli import cli_errors
from bot.redis_connection import open_redis
from bot.settings import Settings

VALUE_CHARS = 200
_PAGE = 500
_BLOCK_MS = 1000

RawEntry = tuple[bytes | str, dict[bytes | str, bytes | str]]


def parse_entry(entry_id: bytes | str, raw: dict[bytes | str, bytes | str]) -> AuditEntry:
    fields = as_text_dict(raw)
    kind = AuditKind(fields.pop("kind"))
    run_id = fields.pop("run_id", "")
    at = float(fields.pop("at", "0"))
    return AuditEntry(as_text(entry_id) or "", kind, run_id, at, fields)


# The fields naming who acted in an entry (``bot.observability.audit``).
ACTOR_FIELDS = ("requester", "decided_by", "approved_by", "confirmed_by", "stopped_by", "user")


def matches(
    entry: AuditEntry,
    run_id: str | None,
    kinds: set[str],
    actor: str | None = None,
    target: str | None = None,
) -> bool:
    if actor is not None and actor not in {entry.fields.get(name) for name in ACTOR_FIELDS}:
        return False
    if target is not None and entry.fields.get("target") != target:
        return False
    return (run_id is None or entry.run_id.startswith(run_id)) and (not kinds or entry.kind.value in kinds)


def newest(
    client: redis.Redis,
    key: str,
    count: int,
    run_id: str | None = None,
    kinds: Iterable[str] = (),
    actor: str | None = None,
    target: str | None = None,
) -> list[AuditEntry]:
    """The ``count`` newest matching entries, oldest first (pages backwards through the stream)."""
    wanted, end = set(kinds), "+"
    found: list[AuditEntry] = []
    while len(found) < count:
        page = cast("list[RawEntry]", client.xrevrange(key, max=end, count=_PAGE))
        if not page:
            break
        for entry_id, raw in page:
            entry = parse_entry(entry_id, raw)
            if matches(entry, run_id, wanted, actor, target):
                found.append(entry)
                if len(found) == count:
                    break
        if len(page) < _PAGE:
            break
        end = f"({as_text(page[-1][0])}"
    return list(reversed(found))


def format_entry(entry: AuditEntry, redact: Callable[[str], str]) -> str:
    parts = [stamp(entry.at), f"{entry.kind.value:<18}", entry.run_id[:12] or "-"]
    findings = _findings(entry) if entry.kind is AuditKind.FINDINGS_UPDATED else None
    if findings is not None:  # every hypothesis and verdict, where key=value would cut the JSON
        return terminal_text("  ".join([*parts, redact(findings_summary(findings))]))
    for name, value in entry.fields.items():
        text = " ".join(redact(value).split())
        if len(text) > VALUE_CHARS:
            text = text[: VALUE_CHARS - 1] + "…"
        parts.append(f"{name}={text}")
    return terminal_text("  ".join(parts[:3]) + ("  " + " ".join(parts[3:]) if parts[3:] else ""))


def _findings(entry: AuditEntry) -> Findings | None:
    """A ``findings_updated`` entry's findings (``None`` when the field was cut: shown as fields)."""
    try:
        return Findings.model_validate_json(entry.fields.get("findings", ""))
    except ValueError:
        return None


def entry_json(entry: AuditEntry, redact: Callable[[str], str]) -> str:
    fields = {name: redact(value) for name, value in entry.fields.items()}
    return json.dumps(
        {"id": entry.id, "kind": entry.kind.value, "run_id": entry.run_id, "at": entry.at, **fields}
    )


def configure_cli(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    tail = actions.add_parser("tail", help="the newest entries; -f to keep printing new ones")
    tail.add_argument("-n", "--lines", type=int, default=20, help="how many entries first (default 20)")
    tail.add_argument("-f", "--follow", action="store_true", help="wait for new entries until Ctrl-C")
    tail.add_argument("--run", help="only entries of this run (id or prefix)")
    tail.add_argument(
        "--kind", action="append", choices=[k.value for k in AuditKind], help="only this kind (repeatable)"
    )
    tail.add_argument("--actor", help="only entries this Slack user acted in (started, approved, stopped...)")
    tail.add_argument("--target", help="only entries about this inventory target")
    tail.add_argument("--json", action="store_true", help="one JSON object per entry")


def run_cli(args: argparse.Namespace, settings: Settings) -> int:
    redact = redactor_for(settings).redact

    def show(entry: AuditEntry) -> str:
        return entry_json(entry, redact) if args.json else format_entry(entry, redact)

    kinds = set(args.kind or [])
    with cli_errors(settings) as status:
        client = open_redis(settings, blocking_seconds=_BLOCK_MS / 1000)  # --follow's XREAD
        key = Keys(settings.chatops_redis_prefix).audit()
        last = "0-0"
        for entry in newest(client, key, max(0, args.lines), args.run, kinds, args.actor, args.target):
            print(show(entry), flush=True)
            last = entry.id
        if args.follow:
            if last == "0-0":
                latest = client.xrevrange(key, count=1)
                last = as_text(latest[0][0]) or "0-0" if latest else "0-0"
            if sys.stderr.isatty():
                print("following the audit log (Ctrl-C to stop)…", file=sys.stderr)
            with contextlib.suppress(KeyboardInterrupt):
                _follow(
                    client, key, last, lambda e: matches(e, args.run, kinds, args.actor, args.target), show
                )
    return status[0]


def _follow(
    client: redis.Redis,
    key: str,
    last: str,
    wanted: Callable[[AuditEntry], bool],
    show: Callable[[AuditEntry], str],
) -> None:
    while True:
        reply = cast(
            "list[tuple[bytes, list[RawEntry]]]", client.xread({key: last}, block=_BLOCK_MS, count=100)
        )
        for _stream, entries in reply or []:
            for entry_id, raw in entries:
                last = as_text(entry_id) or last
                entry = parse_entry(entry_id, raw)
                if wanted(entry):
                    print(show(entry), flush=True)
