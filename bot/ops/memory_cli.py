"""``chatops memory list [-n N] | show ID [--json] | forget ID | forget --before DATE`` (docs/MEMORY.md).

``list``: the newest incidents, one per line, each starting with its id (then its date, channel,
alert or question, conclusion). ``show``: one incident whole. ``forget``: one incident, or every
incident that ended before a date (``YYYY-MM-DD``, UTC), removed from every index too. Everything
printed is the stored (redacted) text, with control characters escaped.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime

from bot.keys import Keys
from bot.memory.incident import Incident
from bot.memory.store import IncidentStore
from bot.observability.findings_view import terminal_text
from bot.ops.runs_cli import cli_errors
from bot.redis_connection import open_redis
from bot.settings import Settings

_FIELD_CHARS = 100


def configure_cli(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="the newest incidents, one per line, each starting with its id")
    listing.add_argument("-n", "--lines", type=int, default=50, help="how many (default 50)")
    show = actions.add_parser("show", help="one incident, whole")
    show.add_argument("id")
    show.add_argument("--json", action="store_true", help="the stored record as JSON")
    forget = actions.add_parser("forget", help="forget one incident, or every one before a date")
    forget.add_argument("id", nargs="?")
    forget.add_argument(
        "--before", metavar="DATE", help="YYYY-MM-DD (UTC): every incident that ended before it"
    )


def _one_line(text: str, limit: int = _FIELD_CHARS) -> str:
    flat = " ".join(text.split())
    return terminal_text(flat[: limit - 1] + "…" if len(flat) > limit else flat)


def _day(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(at))


def list_line(incident_id: str, at: float, incident: Incident | None) -> str:
    if incident is None:
        return f"{incident_id}  {_day(at)}  (expired or unreadable)"
    what = f"alert {incident.alert_name}" if incident.alert_name else incident.question
    scope = "private" if incident.private else "public"
    flag = "  disputed" if incident.disputed else ""
    cause = incident.conclusion or incident.status
    return f"{incident_id}  {_day(at)}  {incident.channel} ({scope})  {cause}{flag}  {_one_line(what)}"


def show_text(incident: Incident) -> str:
    lines = [
        f"incident {incident.id}",
        f"when:       {_day(incident.at)} UTC",
        f"channel:    {incident.channel} ({'private' if incident.private else 'public'}), thread {incident.thread_ts}",
        f"link:       {incident.link or '-'}",
        f"requester:  {incident.requester or '-'}",
        f"question:   {_one_line(incident.question, 500)}",
    ]
    if incident.alert_name:
        labels = ", ".join(f"{k}={v}" for k, v in sorted(incident.labels.items()))
        lines.append(f"alert:      {_one_line(incident.alert_name)} {{{_one_line(labels, 500)}}}")
        lines.append(f"fingerprints: {', '.join(incident.fingerprints) or '-'}")
    lines.append(f"targets:    {', '.join(incident.targets) or '-'}")
    lines.append(f"ended:      {incident.status}; conclusion {incident.conclusion or '-'}")
    for supported in incident.supported:
        lines.append(f"supported:  {_one_line(supported.statement, 500)}")
        lines += [f"  > {_one_line(q, 500)}" for q in supported.quotes]
    for action in incident.actions:
        lines.append(
            f"action:     {action.tool} on {action.target or '-'} approved by {action.approved_by or '-'}"
        )
    if incident.feedback:
        lines.append(f"feedback:   {incident.feedback}{' (disputed)' if incident.disputed else ''}")
    lines.append("answer:")
    lines += [f"  {terminal_text(line)}" for line in incident.answer.splitlines()]
    return "\n".join(lines)


def run_cli(args: argparse.Namespace, settings: Settings) -> int:
    with cli_errors(settings) as status:
        store = IncidentStore(
            open_redis(settings),
            Keys(settings.chatops_redis_prefix),
            retention_days=settings.chatops_memory_days or 1,
        )
        if args.action == "list":
            for item in store.listed(max(0, args.lines)):
                print(list_line(item.id, item.at, item.incident))
        elif args.action == "show":
            incident = store.get(args.id)
            if incident is None:
                print(f"error: no incident {args.id} (never stored, forgotten, or expired)")
                return 1
            print(json.dumps(json.loads(incident.to_json()), indent=2) if args.json else show_text(incident))
        elif args.before and args.id:
            print("error: forget takes an id or --before DATE, not both")
            return 2
        elif args.before:
            try:
                day = datetime.strptime(args.before, "%Y-%m-%d").replace(tzinfo=UTC)
            except ValueError:
                print(f"error: --before {args.before!r} is not a date (YYYY-MM-DD)")
                return 2
            print(
                f"forgot {store.forget_before(day.timestamp())} incident(s) that ended before {args.before}"
            )
        elif args.id:
            if not store.forget(args.id):
                print(f"error: no incident {args.id}")
                return 1
            print(f"forgot incident {args.id}")
        else:
            print("error: forget takes an id or --before DATE")
            return 2
    return status[0]
