"""Every Redis key chatops uses, built from one configurable prefix (``CHATOPS_REDIS_PREFIX``).

Nothing else in the code base spells a key: grep this module to learn what lives in Redis.

Per run (``run_id`` is ours, a uuid hex):

* ``{p}run:{id}``            hash: the run record and its resumable ``RunState`` (one hash)
* ``{p}run:{id}:messages``   list: the history, one JSON ``Message`` per item, append-only
* ``{p}run:{id}:inbox``      list: injected thread replies not yet in the history
* ``{p}run:{id}:lease``      string: the fencing token of the worker that owns the run (PX TTL)
* ``{p}run:{id}:fence``      counter: the last fencing token handed out (INCR)
* ``{p}run:{id}:approvals``  hash: tool call id -> approval id

Shared:

* ``{p}approval:{id}``       hash: one approval record
* ``{p}thread:{channel}:{thread_ts}``  string: the id of the thread's active run
* ``{p}runs:active``         sorted set: ids of runs not yet finished, scored by creation time
* ``{p}runs:reporting``      sorted set: ids of runs whose job has not yet told the thread how they ended
* ``{p}audit``               stream: the audit log
* ``{p}seen:...``            strings: dedupe claims (Slack event ids, message timestamps)
* ``{p}metrics:{name}``      hash: one metric's values by labels (and buckets), from all processes
* ``{p}slack:{kind}:...``    the Slack layer's caches and flags
* ``{p}limits:{kind}:{id}``  sorted sets of ``bot.runs.limits``: recent runs per user and channel, a channel's runs
* ``{p}durability:probe``   string: ``bot.runs.durability``'s write that ``WAIT`` / ``WAITAOF`` wait on (PX 60 s)
* ``{p}data_marker``        string: written once (``SET NX``, no TTL) by the lost-run sweep
  (``bot/runs/lost_runs.py``); finding it gone means Redis lost its data, so the sweep looks in Slack
  for cards of runs Redis no longer knows
* ``{p}lost:scan``          string: the lock of the one worker scanning Slack for lost cards (PX)
* ``{p}lost:notice:{channel}:{thread_ts}``  string: the thread was told its run was lost (EX 2 days)

Multi-key scripts touch keys of one run plus shared keys, so chatops needs a single Redis
primary (as RQ does); it does not use cluster hash tags.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.errors import ConfigurationError

DEFAULT_PREFIX = "chatops:"
_SPACE = re.compile(r"\s")


def _part(value: str, what: str) -> str:
    """A key component: non-empty and free of whitespace (Slack ids and our uuids always are)."""
    if not value or _SPACE.search(value):
        raise ConfigurationError(f"invalid {what} for a Redis key: {value!r}")
    return value


@dataclass(frozen=True)
class Keys:
    """Key builder. ``prefix`` separates deployments (and tests) sharing one Redis."""

    prefix: str = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        if not self.prefix:
            raise ConfigurationError("the Redis key prefix must not be empty")

    # -- one run ------------------------------------------------------------------------------

    def run(self, run_id: str) -> str:
        return f"{self.prefix}run:{_part(run_id, 'run id')}"

    def messages(self, run_id: str) -> str:
        return f"{self.run(run_id)}:messages"

    def inbox(self, run_id: str) -> str:
        return f"{self.run(run_id)}:inbox"

    def lease(self, run_id: str) -> str:
        return f"{self.run(run_id)}:lease"

    def fence(self, run_id: str) -> str:
        return f"{self.run(run_id)}:fence"

    def approvals(self, run_id: str) -> str:
        return f"{self.run(run_id)}:approvals"

    def run_keys(self, run_id: str) -> tuple[str, ...]:
        """Every key owned by one run (they all expire together once it finishes)."""
        return (
            self.run(run_id),
            self.messages(run_id),
            self.inbox(run_id),
            self.lease(run_id),
            self.fence(run_id),
            self.approvals(run_id),
        )

    # -- shared -------------------------------------------------------------------------------

    def approval(self, approval_id: str) -> str:
        return f"{self.prefix}approval:{_part(approval_id, 'approval id')}"

    def thread(self, channel: str, thread_ts: str) -> str:
        return f"{self.prefix}thread:{_part(channel, 'channel')}:{_part(thread_ts, 'thread ts')}"

    def active_runs(self) -> str:
        return f"{self.prefix}runs:active"

    def reporting(self) -> str:
        return f"{self.prefix}runs:reporting"

    def audit(self) -> str:
        return f"{self.prefix}audit"

    def seen_event(self, event_id: str) -> str:
        return f"{self.prefix}seen:event:{_part(event_id, 'event id')}"

    def seen_message(self, channel: str, ts: str) -> str:
        return f"{self.prefix}seen:message:{_part(channel, 'channel')}:{_part(ts, 'message ts')}"

    def metrics(self, name: str) -> str:
        """One Prometheus metric's values, pushed by every process (``bot/runs/metrics.py``)."""
        return f"{self.prefix}metrics:{_part(name, 'metric name')}"

    def limits(self, kind: str, ident: str) -> str:
        """``bot.runs.limits``' sets: ``user`` / ``channel`` windows and a channel's ``active`` runs."""
        return f"{self.prefix}limits:{_part(kind, 'kind')}:{_part(ident, kind)}"

    def durability_probe(self) -> str:
        """A connection's own write, so ``WAIT`` / ``WAITAOF`` cover everything written before it."""
        return f"{self.prefix}durability:probe"

    def data_marker(self) -> str:
        """Present while Redis keeps its data; its absence tells the lost-run sweep to look in Slack."""
        return f"{self.prefix}data_marker"

    def lost_scan(self) -> str:
        """The lock of the worker scanning Slack for cards of lost runs."""
        return f"{self.prefix}lost:scan"

    def lost_notice(self, channel: str, thread_ts: str) -> str:
        """Set once a thread has been told its run's state was lost (so it is told once)."""
        return f"{self.prefix}lost:notice:{_part(channel, 'channel')}:{_part(thread_ts, 'thread ts')}"

    def slack(self, kind: str, *parts: str) -> str:
        """Caches and flags of the Slack layer (``identity``, ``no_status:{team}``, ...)."""
        return ":".join([f"{self.prefix}slack", _part(kind, "kind"), *(_part(p, kind) for p in parts)])
