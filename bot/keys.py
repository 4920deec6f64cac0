"""Every Redis key chatops uses, built from one configurable prefix (``CHATOPS_REDIS_PREFIX``).

Nothing else in the code base spells a key: grep this module (and ``agent.keys``, which it extends
with the bot's keys) to learn what lives in Redis. ``docs/ARCHITECTURE.md`` names the one module
that owns each key family.

Per run (``run_id`` is ours, a uuid hex), from ``agent.keys.MemoryKeys``:

* ``{p}run:{id}``            hash: the run record (``bot.runs.record``) and the loop's ``RunState``
* ``{p}run:{id}:messages``   list: the history, one JSON ``Message`` per item, append-only
* ``{p}run:{id}:inbox``      list: injected thread replies not yet in the history
* ``{p}run:{id}:lease``      string: the fencing token of the worker that owns the run (PX TTL)

and the bot's:

* ``{p}run:{id}:fence``      counter: the last fencing token handed out (INCR)
* ``{p}run:{id}:approvals``  hash: tool call id -> approval id
* ``{p}run:{id}:budget``     hash: the run's budget card, asked at its token budget, decided once (``bot.runs.budget_asks``)
* ``{p}run:{id}:similar_note``  string: the run's "Similar:" note is posted, claimed once by its first job (``bot.runs.first_similar``, EX a week)
* ``{p}run:{id}:month_counted``  string: the run's paid tokens already counted into its channel's month (``bot.runs.monthly_tokens``)

Shared:

* ``{p}approval:{id}``       hash: one approval record
* ``{p}undo:{id}``           hash: one executed change's undo offer, sealed, claimed once (``bot.runs.undo_offers``)
* ``{p}thread:{channel}:{thread_ts}``  string: the id of the thread's active run
* ``{p}runs:active``         sorted set: ids of runs not yet finished, scored by creation time
* ``{p}runs:reporting``      sorted set: ids of runs whose job has not yet told the thread how they ended
* ``{p}audit``               stream: the audit log
* ``{p}seen:...``            strings: dedupe claims (Slack event ids, message timestamps)
* ``{p}metrics:{name}``      hash: one metric's values by labels (and buckets), from all processes
* ``{p}slack:{kind}:...``    the Slack layer's caches and flags
* ``{p}tokens:month:{channel}:{yyyymm}``  string: a channel's paid tokens in one UTC calendar month
  (INCRBY, expires a day past the month's end; ``bot.runs.monthly_tokens``)
* ``{p}limits:{kind}:{id}``  sorted sets of ``bot.runs.limits``: recent runs per user and channel, a channel's runs
* ``{p}durability:probe``   string: ``bot.runs.durability``'s write that ``WAIT`` / ``WAITAOF`` wait on (PX 60 s)
* ``{p}data_marker``        string: written once (``SET NX``, no TTL) by the lost-run sweep
  (``bot/runs/lost_runs.py``); finding it gone means Redis lost its data, so the sweep looks in Slack
  for cards of runs Redis no longer knows
* ``{p}lost:scan``          string: the lock of the one worker scanning Slack for lost cards (PX)
* ``{p}lost:notice:{channel}:{thread_ts}``  string: the thread was told its run was lost (EX 2 days)

The fleet's (``bot.fleet``; a runner's Redis ACL user may touch only its own target's, and RQ's
keys of its own queue and jobs: ``bot.fleet.runner_acl``):

* ``{p}fleet:runner:{target}``   string: the target runner's last heartbeat, JSON (``bot.fleet.heartbeats``)
* ``{p}fleet:exec:{target}:{id}``  string: one remote execution's mark, ``executing`` or ``abandoned``
  (``SET NX``: exactly one of the runner and the dispatcher who gave up wins; ``bot.fleet.executions``)
* ``{p}fleet:exec:{target}:{id}:result``  list: its result, pushed once by the runner, popped by the dispatcher
* ``{p}fleet:changes:{target}``  sorted set: the target's change journal, sealed changes by time
  (``bot.changes.journal``; written by its runner's scans and by deploy markers)

The alerts' (``bot.alerts.store``, their one owner):

* ``{p}alerts:notification:{id}``  string: one accepted webhook notification, JSON, until its job ran (EX 1 day)
* ``{p}alerts:group:{id}``  hash: one alert group's thread (channel, root message, run, status, fingerprints)
* ``{p}alerts:lock:{id}``   string: the worker handling the group's notification now (PX, token)
* ``{p}alerts:storm:{route}``  sorted set: automatic runs the route started, by time (storm control)
* ``{p}alerts:run:{run_id}``  string: the alert group a run investigates (for its summary on the root)
* ``{p}alerts:delivery:{source}:{digest}``  string: one webhook delivery's claim, ``pending`` while it is
  stored, then ``done`` for the sender's retry window (PX; ``bot.alerts.replay``): a replay does nothing;
  the deploy markers' webhooks claim theirs here too (``bot.web.change_receiver``)

The incident memory's (``bot.memory.store``, their one owner; docs/MEMORY.md):

* ``{p}memory:incident:{id}``  string: one finished run's incident, JSON, redacted (EX the retention)
* ``{p}memory:time``        sorted set: every incident by end time (list, forget --before, pruning)
* ``{p}memory:ix:{digest}`` sorted sets: one index per scope and term (EXPIRE the retention)
* ``{p}memory:feedback:{id}``  string: 👍 / 👎 on the run's answer (``up`` / ``down``), given before or
  after the incident was stored; the record carries it (EX the retention)
* ``{p}memory:note:{channel}:{ts}``  set: the incidents the bot's "Similar:" note at that message
  shows, which its Forget buttons may forget (EX the retention)

Multi-key scripts touch keys of one run plus shared keys, so chatops needs a single Redis
primary (as RQ does); it does not use cluster hash tags.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.keys import MemoryKeys, key_part


@dataclass(frozen=True)
class Keys(MemoryKeys):
    """The bot's key builder: the memory's keys of a run, and everything else the bot keeps."""

    # -- the incident memory (bot/memory/store.py) -------------------------------------------------

    def memory_incident(self, incident_id: str) -> str:
        return f"{self.prefix}memory:incident:{key_part(incident_id, 'incident id')}"

    def memory_time(self) -> str:
        return f"{self.prefix}memory:time"

    def memory_index(self, digest: str) -> str:
        """One index's sorted set; ``digest``: its scope and term, hashed (label values hold spaces)."""
        return f"{self.prefix}memory:ix:{key_part(digest, 'index digest')}"

    def memory_index_pattern(self) -> str:
        return f"{self.prefix}memory:ix:*"

    def memory_feedback(self, incident_id: str) -> str:
        return f"{self.prefix}memory:feedback:{key_part(incident_id, 'incident id')}"

    def memory_note(self, channel: str, ts: str) -> str:
        return f"{self.prefix}memory:note:{key_part(channel, 'channel')}:{key_part(ts, 'message ts')}"

    # -- one run, beyond its memory ---------------------------------------------------------------

    def fence(self, run_id: str) -> str:
        return f"{self.run(run_id)}:fence"

    def approvals(self, run_id: str) -> str:
        return f"{self.run(run_id)}:approvals"

    def budget_ask(self, run_id: str) -> str:
        """The run's budget card (``bot.runs.budget_asks``)."""
        return f"{self.run(run_id)}:budget"

    def similar_note_claim(self, run_id: str) -> str:
        return f"{self.run(run_id)}:similar_note"

    def month_counted(self, run_id: str) -> str:
        """The run's tokens counted into its channel's month (``bot.runs.monthly_tokens``)."""
        return f"{self.run(run_id)}:month_counted"

    def month_tokens(self, channel: str, month: str) -> str:
        """A channel's paid tokens in one UTC month, ``month`` as ``YYYYMM`` (``bot.runs.monthly_tokens``)."""
        return f"{self.prefix}tokens:month:{key_part(channel, 'channel')}:{key_part(month, 'month')}"

    # -- the fleet (a runner's ACL: ``bot.fleet.runner_acl``) -----------------------------------

    def fleet_pattern(self) -> str:
        """Every fleet key (what ``chatops doctor`` and operators look at; no runner holds it)."""
        return f"{self.prefix}fleet:*"

    def runner_heartbeat(self, target: str) -> str:
        return f"{self.prefix}fleet:runner:{key_part(target, 'target')}"

    def changes(self, target: str) -> str:
        """The target's change journal (``bot.changes.journal``), in its runner's ACL."""
        return f"{self.prefix}fleet:changes:{key_part(target, 'target')}"

    def executions_of(self, target: str) -> str:
        """The common start of one target's execution keys: its runner's ACL pattern ends here."""
        return f"{self.prefix}fleet:exec:{key_part(target, 'target')}:"

    def runner_refusals(self, target: str) -> str:
        """The jobs ``target``'s runner refused (a stream under its own ACL pattern; ids are hex)."""
        return f"{self.executions_of(target)}refusals"

    def execution(self, target: str, execution_id: str) -> str:
        return f"{self.executions_of(target)}{key_part(execution_id, 'execution id')}"

    def execution_result(self, target: str, execution_id: str) -> str:
        return f"{self.execution(target, execution_id)}:result"

    # -- alerts ---------------------------------------------------------------------------------

    def alert_notification(self, notification_id: str) -> str:
        return f"{self.prefix}alerts:notification:{key_part(notification_id, 'notification id')}"

    def alert_group(self, group_id: str) -> str:
        return f"{self.prefix}alerts:group:{key_part(group_id, 'alert group id')}"

    def alert_lock(self, group_id: str) -> str:
        return f"{self.prefix}alerts:lock:{key_part(group_id, 'alert group id')}"

    def alert_storm(self, route: str) -> str:
        return f"{self.prefix}alerts:storm:{key_part(route, 'alert route')}"

    def alert_storm_held(self, route: str) -> str:
        return f"{self.prefix}alerts:storm-held:{key_part(route, 'alert route')}"

    def alert_run(self, run_id: str) -> str:
        return f"{self.prefix}alerts:run:{key_part(run_id, 'run id')}"

    def alert_delivery(self, source: str, digest: str) -> str:
        """One webhook delivery's claim (``bot.alerts.store``): its replays are ignored."""
        return (
            f"{self.prefix}alerts:delivery:{key_part(source, 'alert source')}:{key_part(digest, 'delivery')}"
        )

    # -- shared -------------------------------------------------------------------------------

    def approval(self, approval_id: str) -> str:
        return f"{self.prefix}approval:{key_part(approval_id, 'approval id')}"

    def undo_offer(self, offer_id: str) -> str:
        """One executed change's undo offer (``bot.runs.undo_offers``)."""
        return f"{self.prefix}undo:{key_part(offer_id, 'undo offer id')}"

    def approval_votes(self, approval_id: str) -> str:
        """The distinct people who approved one record needing several (``bot.runs.approval_votes``)."""
        return f"{self.approval(approval_id)}:votes"

    def break_glass(self, user: str) -> str:
        """One person's active break-glass (``bot.policy.break_glass``)."""
        return f"{self.prefix}policy:break_glass:{key_part(user, 'user id')}"

    def thread(self, channel: str, thread_ts: str) -> str:
        return f"{self.prefix}thread:{key_part(channel, 'channel')}:{key_part(thread_ts, 'thread ts')}"

    def active_runs(self) -> str:
        return f"{self.prefix}runs:active"

    def reporting(self) -> str:
        return f"{self.prefix}runs:reporting"

    def audit(self) -> str:
        return f"{self.prefix}audit"

    def seen_event(self, event_id: str) -> str:
        return f"{self.prefix}seen:event:{key_part(event_id, 'event id')}"

    def early_replies(self, channel: str, thread_ts: str) -> str:
        """Replies to a thread whose run is not created yet (``bot.runs.early_replies``)."""
        return f"{self.prefix}early:{key_part(channel, 'channel')}:{key_part(thread_ts, 'thread ts')}"

    def seen_message(self, channel: str, ts: str) -> str:
        return f"{self.prefix}seen:message:{key_part(channel, 'channel')}:{key_part(ts, 'message ts')}"

    def metrics(self, name: str) -> str:
        """One Prometheus metric's values, pushed by every process (``bot/observability/metrics.py``)."""
        return f"{self.prefix}metrics:{key_part(name, 'metric name')}"

    def limits(self, kind: str, ident: str) -> str:
        """``bot.runs.limits``' sets: ``user`` / ``channel`` windows and a channel's ``active`` runs."""
        return f"{self.prefix}limits:{key_part(kind, 'kind')}:{key_part(ident, kind)}"

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
        return f"{self.prefix}lost:notice:{key_part(channel, 'channel')}:{key_part(thread_ts, 'thread ts')}"

    def slack(self, kind: str, *parts: str) -> str:
        """Caches and flags of the Slack layer (``identity``, ``no_status:{team}``, ...)."""
        return ":".join([f"{self.prefix}slack", key_part(kind, "kind"), *(key_part(p, kind) for p in parts)])
