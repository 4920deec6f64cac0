"""The postmortem's facts read from Redis through their owners, and a Slack thread link parsed."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import redis

from bot.alerts.store import AlertStore
from bot.keys import Keys
from bot.observability.audit import AuditLog
from bot.postmortem.errors import BadThreadLink, PostmortemError
from bot.postmortem.facts import Permalink, Postmortem, build_postmortem
from bot.runs.record import RunRecords

_ARCHIVES = re.compile(r"/archives/([CGD][A-Z0-9_]{1,30})/p(\d{10})(\d{6})/?")
_TS = re.compile(r"\d{10}\.\d{6}")
CLOCK_MARGIN_SECONDS = 3600.0  # the stream's ids are Redis's clock, a record's time the web process's


@dataclass(frozen=True)
class ThreadRef:
    channel: str
    thread_ts: str


def is_link(text: str) -> bool:
    return text.strip().lstrip("<").startswith(("https://", "http://"))


def parse_thread_link(text: str) -> ThreadRef:
    """The thread a Slack message link names (a reply's link names its thread: ``thread_ts``)."""
    link = text.strip().removeprefix("<").removesuffix(">").split("|", 1)[0]
    parts = urlsplit(link)
    found = _ARCHIVES.fullmatch(parts.path)
    if parts.scheme != "https" or found is None:
        raise BadThreadLink(f"{link[:120]!r} is not a Slack message link (https://…/archives/C…/p…)")
    thread = parse_qs(parts.query).get("thread_ts", [""])[0]
    if thread and not _TS.fullmatch(thread):
        raise BadThreadLink(f"thread_ts {thread[:40]!r} is not a Slack timestamp")
    return ThreadRef(found.group(1), thread or f"{found.group(2)}.{found.group(3)}")


def load_postmortem(
    client: redis.Redis,
    keys: Keys,
    audit: AuditLog,
    run_id: str,
    *,
    redact: Callable[[str], str],
    permalink: Permalink = lambda channel, ts: None,
    clock: Callable[[], float] = time.time,
) -> Postmortem:
    """The postmortem of a run that has ended (a run still going has no postmortem yet), as of
    ``clock()`` (an undo offered until before then has expired)."""
    record = RunRecords(client, keys).get(run_id)
    if record is None:
        raise PostmortemError(f"no run {run_id} (never created, or its retention expired)")
    if not record.status.terminal:
        raise PostmortemError(f"run {run_id} has not ended ({record.status.value}): no postmortem yet")
    group = AlertStore(client, keys).group_of_run(run_id)
    # Only the stream from the run's creation on (less a margin for clocks): not a scan of all of it.
    # Every run's entries: the builder keeps this run's and those of its changes' undos.
    entries = audit.since(record.created_at - CLOCK_MARGIN_SECONDS)
    return build_postmortem(record, entries, group, redact=redact, permalink=permalink, now=clock())
