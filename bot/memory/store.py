"""The incident memory's Redis keys, and the only code that knows them (``memory:*``).

* ``memory:incident:{id}`` (string, JSON, ``EX`` the retention): one incident (``bot.memory.incident``).
* ``memory:time`` (sorted set, id by end time): every incident, for ``list``, ``forget --before``
  and the retention's pruning.
* ``memory:ix:{digest}`` (sorted sets, id by end time, ``EXPIRE`` the retention, refreshed by each
  write): one per *scope* and *term*. A term is ``alert:{name}``, ``label:{k}={v}``,
  ``target:{name}`` or ``*`` (every incident); a scope is ``ch:{channel}`` (every incident of that
  channel) or ``public`` (incidents of public channels only). The digest is a hash of both
  (label values may hold spaces; key length stays bounded).

Why this shape: ``similar_incidents`` must stay fast at 100,000 incidents. A query reads, for each
of its terms in each scope the run may see, only the newest ``PER_TERM`` ids of that index
(``ZREVRANGE``: O(log n + k), whatever the index's size), counts the terms each id shares, keeps the
best ``MAX_CANDIDATES`` (``MAX_TEXT_CANDIDATES`` for words alone) by that count and recency, and only then fetches those records (one
``MGET``) for the text score, computed in Python. The work is bounded by the query, never by how
many incidents are stored; RediSearch would do the text better but is not on every Redis the bot
runs on. The scope is part of the index key, so a private channel's incidents are never even read
for another channel's run, and every record read back is checked against the scope again.

* ``memory:feedback:{id}`` (string, ``EX`` the retention): 👍 / 👎 on the run's answer (``up`` /
  ``down``; a ``down`` is never replaced). A click may come before the run's end stores its incident
  or after: each of ``save`` and ``set_feedback`` writes under ``WATCH`` of what the other writes
  (optimistic locking, retried), so whichever comes second carries the feedback into the record and
  neither can overwrite the other's write with a stale read.
* ``memory:note:{channel}:{ts}`` (set, ``EX`` the retention): the incidents the bot's "Similar:"
  note at that message shows; a Forget click is honoured only for an incident named here for the
  very message clicked (``bot.slack.handlers.forget_clicks``).

Retention: the record's TTL; an index entry older than the retention is removed from each index a
query reads (``ZREMRANGEBYSCORE``) and from ``memory:time`` at every write; an index nobody writes
to expires with its TTL. ``forget`` removes the record, its ``memory:time`` entry and its entry in
every index (from the record's own terms; for a record it cannot read, from every index key).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import redis

from bot.keys import Keys
from bot.memory.errors import MalformedIncident
from bot.memory.incident import Incident

log = logging.getLogger(__name__)

DAY = 86_400
PUBLIC = "public"
ALL = "*"
PER_TERM = 200  # the newest ids read from each index a query names
# Records fetched and scored in Python per query: parsing one costs about 0.1 ms, so this bounds a
# query's time. A query with alert, label or target terms has its candidates ranked by the terms
# they share first; one with words only reads more of the newest, since the text decides alone.
MAX_CANDIDATES = 40
MAX_TEXT_CANDIDATES = 150
PRUNE_BATCH = 500  # expired ids dropped from ``memory:time`` per write


def channel_scope(channel: str) -> str:
    return f"ch:{channel}"


def terms_of(alert_name: str, labels: dict[str, str], targets: Iterable[str]) -> list[str]:
    terms = [f"alert:{alert_name}"] if alert_name else []
    terms += [f"label:{k}={v}" for k, v in sorted(labels.items()) if k != "alertname"]
    terms += [f"target:{t}" for t in targets if t]
    return terms


def _digest(scope: str, term: str) -> str:
    return hashlib.blake2b(f"{scope}\0{term}".encode(), digest_size=12).hexdigest()


@dataclass(frozen=True)
class Listed:
    id: str
    at: float
    incident: Incident | None  # None: expired, or a record this code did not write


class IncidentStore:
    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        retention_days: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._redis = client
        self._keys = keys
        self._ttl = max(1, int(retention_days * DAY))
        self._clock = clock

    def _index(self, scope: str, term: str) -> str:
        return self._keys.memory_index(_digest(scope, term))

    def _indexes_of(self, incident: Incident) -> list[str]:
        scopes = [channel_scope(incident.channel)] + ([] if incident.private else [PUBLIC])
        terms = [ALL, *terms_of(incident.alert_name, incident.labels, incident.targets)]
        return [self._index(scope, term) for scope in scopes for term in terms]

    def cutoff(self) -> float:
        return self._clock() - self._ttl

    # -- writing ----------------------------------------------------------------------------------

    def save(self, incident: Incident) -> None:
        """Store (or replace) one incident and index it, carrying the feedback given on its run so
        far (atomically: see the module); drop what the retention has expired."""
        record, pending = self._keys.memory_incident(incident.id), self._keys.memory_feedback(incident.id)
        with self._redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    pipe.watch(record, pending)  # type: ignore[no-untyped-call]
                    old = _parse(pipe.get(record))
                    feedback = _merged(incident.feedback, _text(pipe.get(pending) or b""))
                    if old is not None:
                        feedback = _merged(feedback, old.feedback)
                    stored = replace(incident, feedback=feedback)
                    pipe.multi()
                    if old is not None:  # a report step run again: its old terms may differ
                        for key in set(self._indexes_of(old)) - set(self._indexes_of(stored)):
                            pipe.zrem(key, stored.id)
                    pipe.set(record, stored.to_json(), ex=self._ttl)
                    pipe.zadd(self._keys.memory_time(), {stored.id: stored.at})
                    cutoff = f"({self.cutoff()}"
                    for key in self._indexes_of(stored):
                        pipe.zremrangebyscore(key, "-inf", cutoff)  # what the retention expired here
                        pipe.zadd(key, {stored.id: stored.at})
                        pipe.expire(key, self._ttl)
                    pipe.execute()
                    break
                except redis.WatchError:
                    continue  # a feedback click (or another save) came in between: read again
        self._prune()

    def import_new(self, incidents: Sequence[Incident]) -> None:
        """Store incidents not stored before, in one pipeline (a benchmark's load, a migration):
        ``save`` without its look for an earlier version and without pruning."""
        pipe = self._redis.pipeline(transaction=False)
        for incident in incidents:
            pipe.set(self._keys.memory_incident(incident.id), incident.to_json(), ex=self._ttl)
            pipe.zadd(self._keys.memory_time(), {incident.id: incident.at})
            for key in self._indexes_of(incident):
                pipe.zadd(key, {incident.id: incident.at})
                pipe.expire(key, self._ttl)
        pipe.execute()

    def set_feedback(self, incident_id: str, value: str) -> bool:
        """👍 / 👎 on the run's answer (``up`` / ``down``; a 👎 stays), kept for the run whether or
        not its incident is stored yet: in the record if it is, else carried by ``save`` when it
        is (atomically: see the module). True: the incident was stored and now carries it."""
        if value not in ("up", "down"):
            raise ValueError(f"feedback is up or down, not {value!r}")
        record, pending = self._keys.memory_incident(incident_id), self._keys.memory_feedback(incident_id)
        with self._redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    pipe.watch(record, pending)  # type: ignore[no-untyped-call]
                    feedback = _merged(value, _text(pipe.get(pending) or b""))
                    raw = pipe.get(record)
                    incident = _parse(raw)
                    ttl = pipe.ttl(record)
                    pipe.multi()
                    pipe.set(pending, feedback, ex=self._ttl)
                    if incident is not None and incident.feedback != _merged(feedback, incident.feedback):
                        kept = replace(incident, feedback=_merged(feedback, incident.feedback))
                        pipe.set(
                            record, kept.to_json(), ex=ttl if isinstance(ttl, int) and ttl > 0 else self._ttl
                        )
                    pipe.execute()
                    return incident is not None
                except redis.WatchError:
                    continue  # the run's incident was stored (or another click counted) meanwhile

    def _prune(self) -> None:
        expired = self._redis.zrangebyscore(
            self._keys.memory_time(), "-inf", self.cutoff(), start=0, num=PRUNE_BATCH
        )
        if expired:
            self._redis.zrem(self._keys.memory_time(), *expired)

    def forget(self, incident_id: str) -> bool:
        """Remove one incident everywhere. True: there was something to remove."""
        key = self._keys.memory_incident(incident_id)
        raw = self._redis.get(key)
        try:
            indexes = self._indexes_of(Incident.from_json(raw)) if raw is not None else None
        except MalformedIncident:
            indexes = None
        if indexes is None:  # no readable record: look in every index (an operator's rare command)
            indexes = [
                k.decode() if isinstance(k, bytes) else str(k)
                for k in self._redis.scan_iter(match=self._keys.memory_index_pattern(), count=1000)
            ]
        pipe = self._redis.pipeline(transaction=True)
        pipe.delete(key)
        pipe.zrem(self._keys.memory_time(), incident_id)
        pipe.delete(self._keys.memory_feedback(incident_id))
        for index in indexes:
            pipe.zrem(index, incident_id)
        results = pipe.execute()
        return bool(results[0]) or bool(results[1])

    def forget_before(self, at: float) -> int:
        """Forget every incident that ended before ``at`` (seconds since the epoch)."""
        ids = [_text(i) for i in self._redis.zrangebyscore(self._keys.memory_time(), "-inf", f"({at}")]
        return sum(1 for incident_id in ids if self.forget(incident_id))

    def remember_note(self, channel: str, ts: str, incident_ids: Sequence[str]) -> None:
        """The bot's "Similar:" note at (``channel``, ``ts``) shows these incidents."""
        if not incident_ids:
            return
        key = self._keys.memory_note(channel, ts)
        pipe = self._redis.pipeline(transaction=True)
        pipe.sadd(key, *incident_ids)
        pipe.expire(key, self._ttl)
        pipe.execute()

    def on_note(self, channel: str, ts: str, incident_id: str) -> bool:
        """Whether the bot's note at (``channel``, ``ts``) shows ``incident_id`` (still)."""
        return bool(self._redis.sismember(self._keys.memory_note(channel, ts), incident_id))

    def forget_from_note(self, channel: str, ts: str, incident_id: str) -> bool:
        """Take ``incident_id`` off the note at (``channel``, ``ts``); True only for the one call
        that found it there (a second click, or a forged one, finds nothing)."""
        return bool(self._redis.srem(self._keys.memory_note(channel, ts), incident_id))

    # -- reading ----------------------------------------------------------------------------------

    def get(self, incident_id: str) -> Incident | None:
        """The incident, or None (expired, unknown, or malformed: logged)."""
        raw = self._redis.get(self._keys.memory_incident(incident_id))
        if raw is None:
            return None
        try:
            return Incident.from_json(raw)
        except MalformedIncident as error:
            log.warning("incident %s: %s; ignored", incident_id, error)
            return None

    def listed(self, limit: int = 100) -> list[Listed]:
        """The newest incidents first."""
        rows: list[Any] = self._redis.zrevrange(
            self._keys.memory_time(), 0, max(0, limit - 1), withscores=True
        )
        ids = [_text(row[0]) for row in rows]
        records = self._redis.mget([self._keys.memory_incident(i) for i in ids]) if ids else []
        return [
            Listed(incident_id, float(row[1]), _parse(raw))
            for incident_id, row, raw in zip(ids, rows, records, strict=True)
        ]

    def candidates(self, scopes: Sequence[str], terms: Sequence[str]) -> list[tuple[Incident, int]]:
        """The incidents of ``scopes`` sharing most of ``terms`` (newest first among equals), each
        with how many it shares, at most ``MAX_CANDIDATES``; plus the newest ones when few do."""
        cutoff = self.cutoff()
        pipe = self._redis.pipeline(transaction=False)
        asked: list[str] = []
        for scope in scopes:
            for term in [*terms, ALL]:
                key = self._index(scope, term)
                pipe.zremrangebyscore(key, "-inf", f"({cutoff}")
                pipe.zrevrange(key, 0, PER_TERM - 1, withscores=True)
                asked.append(term)
        answers = pipe.execute()[1::2]
        shared: dict[str, set[str]] = {}
        newest: dict[str, float] = {}
        for term, rows in zip(asked, answers, strict=True):
            for row in rows:
                incident_id = _text(row[0])
                newest[incident_id] = float(row[1])
                if term != ALL:
                    shared.setdefault(incident_id, set()).add(term)
        bound = MAX_CANDIDATES if terms else MAX_TEXT_CANDIDATES
        ranked = sorted(newest, key=lambda i: (len(shared.get(i, ())), newest[i]), reverse=True)[:bound]
        if not ranked:
            return []
        records = self._redis.mget([self._keys.memory_incident(i) for i in ranked])
        found = []
        for incident_id, raw in zip(ranked, records, strict=True):
            incident = _parse(raw)
            if incident is not None and incident.id == incident_id:
                found.append((incident, len(shared.get(incident_id, ()))))
        return found


def _merged(one: str, other: str) -> str:
    """Two feedbacks as one: a 👎 stays, a 👍 only over none."""
    if "down" in (one, other):
        return "down"
    return "up" if "up" in (one, other) else ""


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _parse(raw: Any) -> Incident | None:
    if raw is None:
        return None
    try:
        return Incident.from_json(raw)
    except MalformedIncident as error:
        log.warning("%s; ignored", error)
        return None
