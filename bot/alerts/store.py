"""The alerts' Redis records, their one owner: accepted notifications, groups, locks, storm counts.

* A notification the web process accepted is stored (``alerts:notification:{id}``, with the route
  it matched) before the sender gets its 2xx, and handled by a worker job (``bot.alerts.jobs``).
* An alert *group* (Alertmanager's ``groupKey``, a PagerDuty incident) has one record while its
  thread lives (``alerts:group:{id}``, ``id`` a digest of source and key): the channel and root
  message of its thread, the run investigating it, its status and the fingerprints seen.
* Notifications of one group are handled one at a time under the group's lock (``SET NX PX`` with
  a token, released by compare-and-delete), so two workers never open two threads for one group.
* Storm control counts the automatic runs a route started in a sliding window, in one script.
* A webhook delivery is claimed before it is stored (``alerts:delivery:{source}:{digest}``,
  ``bot.claims``' two-phase ``SET NX PX``): ``pending`` while this request stores it, ``done`` in
  the same ``MULTI`` as the notification and its job, released if that fails, so a replay does
  nothing and a retry after a failed store still lands (``bot.alerts.replay``). The deploy markers'
  webhooks (``bot.web.change_receiver``) claim theirs the same way, ``delivered`` in the ``MULTI``
  that appends their changes to the journal.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from datetime import datetime
from typing import Any

import redis
from redis.client import Pipeline

from agent.redis_util import NOW_LUA, as_text, as_text_dict
from bot.alerts.payloads import Alert, Notification
from bot.alerts.replay import Delivery
from bot.claims import Claims, ClaimState, release_lock, take_lock
from bot.keys import Keys

NOTIFICATION_TTL_SECONDS = 24 * 3600
GROUP_TTL_SECONDS = 14 * 24 * 3600  # a thread is reopened, not recreated, within this
LOCK_SECONDS = 60.0

# Allow one more automatic run for the route unless max_runs started within the window.
_STORM = (
    NOW_LUA
    + """
local at = now()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', at - tonumber(ARGV[2]))
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], at, ARGV[3])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])) + 60)
return 1
"""
)

# The groups a route's storm limit held back within its window, each once (the root's count).
_HOLD = (
    NOW_LUA
    + """
local at = now()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', at - tonumber(ARGV[1]))
redis.call('ZADD', KEYS[1], at, ARGV[2])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[1])) + 60)
return redis.call('ZCARD', KEYS[1])
"""
)


@dataclass(frozen=True)
class RoutedNotification:
    """An accepted notification and the route it matched (decided by the web process)."""

    id: str
    notification: Notification
    route: str
    channel: str
    investigate: str  # auto | button
    target: str | None  # the inventory target its alerts name, if any
    max_runs: int
    window_seconds: float


@dataclass
class Group:
    """One alert group's thread, field for field as stored."""

    id: str
    source: str
    group_key: str
    channel: str = ""
    root_ts: str = ""
    run_id: str = ""
    status: str = "firing"
    title: str = ""
    fingerprints: list[str] = field(default_factory=list)
    resolved_fingerprints: list[str] = field(default_factory=list)  # of a firing group: alerts that ended
    notifications: int = 0
    last_notified_at: float = 0.0
    resolved_at: float = 0.0
    held: int = 0  # when the storm limit held this group back: the route's groups held in its window
    view: str = ""  # the root message as last shown (JSON of ``AlertView``), to redraw it later
    brief: str = ""  # the last firing's message for a run (``threads.alert_message``): the button's run
    source_url: str = ""  # the last firing's link to its source, for that run's card
    asked: str = (
        ""  # what the operator's route asks of that run (``threads.alert_request``): its target, labels
    )

    def fields(self) -> dict[str, str]:
        values = asdict(self)
        values["fingerprints"] = json.dumps(self.fingerprints)
        values["resolved_fingerprints"] = json.dumps(self.resolved_fingerprints)
        return {name: str(value) for name, value in values.items()}

    @classmethod
    def from_hash(cls, raw: Mapping[Any, Any]) -> Group:
        data: dict[str, Any] = dict(as_text_dict(raw))
        for name in ("fingerprints", "resolved_fingerprints"):
            data[name] = json.loads(data.get(name) or "[]")
        for name in ("notifications", "held"):
            data[name] = int(data.get(name) or 0)
        for name in ("last_notified_at", "resolved_at"):
            data[name] = float(data.get(name) or 0)
        known = set(cls.__dataclass_fields__)
        return cls(**{key: value for key, value in data.items() if key in known})


def group_id(source: str, group_key: str) -> str:
    """A key-safe id of the group (Alertmanager's group keys hold spaces, braces and quotes)."""
    return hashlib.sha256(f"{source}\n{group_key}".encode()).hexdigest()[:32]


class AlertStore:
    """``redact``: what is stored passes through it (an alert's annotations may quote a secret)."""

    def __init__(self, client: redis.Redis, keys: Keys, redact: Callable[[str], str] | None = None) -> None:
        self._redis = client
        self._keys = keys
        self._redact = redact or (lambda text: text)
        self._storm = client.register_script(_STORM)
        self._hold = client.register_script(_HOLD)
        self._claims = Claims(lambda: client)

    # -- deliveries and notifications -------------------------------------------------------------

    def claim(self, delivery: Delivery) -> ClaimState:
        """``NEW``: this request stores the delivery (then ``accept`` or ``release``); ``DONE``:
        it was stored before (a replay); ``IN_PROGRESS``: another request is storing it now."""
        return self._claims.take(self._delivery_key(delivery))

    def release(self, delivery: Delivery) -> None:
        """After a failed ``accept``: the sender's retry must find the delivery unclaimed."""
        self._claims.release(self._delivery_key(delivery))

    def accept(
        self,
        routed: RoutedNotification,
        then: Callable[[Pipeline], None] | None = None,
        delivery: Delivery | None = None,
    ) -> None:
        """Store the notification and, in the same round trip (one ``MULTI``), whatever ``then``
        adds to the pipeline (its job) and the delivery's claim marked done."""
        stored = self._redact(encode(routed))
        with self._redis.pipeline(transaction=True) as pipe:
            if then is not None:
                then(pipe)  # first: RQ opens the MULTI itself (the two land together either way)
            pipe.set(self._keys.alert_notification(routed.id), stored, ex=NOTIFICATION_TTL_SECONDS)
            if delivery is not None:
                key = self._delivery_key(delivery)
                self._claims.confirm(key, routed.id, pipeline=pipe, seconds=delivery.remember_seconds)
            pipe.execute()

    def delivered(self, delivery: Delivery, value: str, pipeline: Pipeline) -> None:
        """Mark a claimed delivery done in ``pipeline`` (the caller's ``MULTI`` that stores it):
        the deploy markers' receiver (``bot.web.change_receiver``) claims its deliveries here too."""
        key = self._delivery_key(delivery)
        self._claims.confirm(key, value, pipeline=pipeline, seconds=delivery.remember_seconds)

    def _delivery_key(self, delivery: Delivery) -> str:
        return self._keys.alert_delivery(delivery.source, delivery.digest)

    def notification(self, notification_id: str) -> RoutedNotification | None:
        raw = as_text(self._redis.get(self._keys.alert_notification(notification_id)))
        return decode(raw) if raw else None

    def forget(self, notification_id: str) -> None:
        self._redis.delete(self._keys.alert_notification(notification_id))

    # -- groups -----------------------------------------------------------------------------------

    def group(self, group: str) -> Group | None:
        raw = self._redis.hgetall(self._keys.alert_group(group))
        return Group.from_hash(raw) if raw else None

    def save(self, group: Group) -> None:
        key = self._keys.alert_group(group.id)
        fields = {name: self._redact(value) for name, value in group.fields().items()}
        with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping=fields)  # type: ignore[arg-type]
            pipe.expire(key, GROUP_TTL_SECONDS)
            if group.run_id:
                pipe.set(self._keys.alert_run(group.run_id), group.id, ex=GROUP_TTL_SECONDS)
            pipe.execute()

    def groups(self) -> list[Group]:
        """Every alert group kept (a SCAN: for the shift handoff and support, not a hot path)."""
        found = (
            self.group((as_text(key) or "").rsplit(":", 1)[-1])
            for key in self._redis.scan_iter(self._keys.alert_group("*"))
        )
        return [group for group in found if group is not None]

    def group_of_run(self, run_id: str) -> Group | None:
        found = as_text(self._redis.get(self._keys.alert_run(run_id)))
        return self.group(found) if found else None

    def lock(self, group: str) -> str | None:
        """A token if this worker now handles the group's notifications (``None``: another does)."""
        return take_lock(self._redis, self._keys.alert_lock(group), LOCK_SECONDS)

    def unlock(self, group: str, token: str) -> None:
        release_lock(self._redis, self._keys.alert_lock(group), token)

    def storm_allows(self, route: str, max_runs: int, window_seconds: float) -> bool:
        """True (and counted) if the route may start one more automatic run now."""
        allowed = self._storm(
            keys=[self._keys.alert_storm(route)], args=[max_runs, window_seconds, uuid.uuid4().hex]
        )
        return bool(allowed)

    def held_back(self, route: str, group: str, window_seconds: float) -> int:
        """Count ``group`` as held back by the route's storm limit; how many groups are, in its window."""
        held = self._hold(keys=[self._keys.alert_storm_held(route)], args=[window_seconds, group])
        return int(held)


# -- (de)serialising a notification -----------------------------------------------------------------


def encode(routed: RoutedNotification) -> str:
    return json.dumps(_plain(routed))


def decode(text: str) -> RoutedNotification:
    data = json.loads(text)
    raw = data.pop("notification")
    alerts = tuple(_alert(item) for item in raw.pop("alerts"))
    occurred = raw.pop("occurred_at", None)
    occurred_at = datetime.fromisoformat(occurred) if occurred else None
    notification = Notification(**raw, alerts=alerts, occurred_at=occurred_at)
    return RoutedNotification(notification=notification, **data)


def _alert(raw: dict[str, Any]) -> Alert:
    raw["starts_at"] = datetime.fromisoformat(raw["starts_at"])
    raw["ends_at"] = datetime.fromisoformat(raw["ends_at"]) if raw.get("ends_at") else None
    return Alert(**raw)


def _plain(value: Any) -> Any:
    """JSON-ready: dataclasses by field (their mappings are read-only proxies ``asdict`` cannot copy)."""
    if is_dataclass(value) and not isinstance(value, type):
        return {item.name: _plain(getattr(value, item.name)) for item in fields(value)}
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value
