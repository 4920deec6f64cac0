"""Alertmanager's webhook notifications as the alert benchmark sends them (``bench.alerts``), and
what each alert group should look like once every accepted one was applied.

Each notification is a version-4 body as Alertmanager 0.25 posts it for a route with
``group_by: [alertname]``: every firing alert of the group, its ``groupKey``, group and common
labels, ``Authorization: Bearer`` and Alertmanager's own headers. The schedule is seeded, so every
run sends the same traffic. Notification ``i`` is due at ``i / rate``; it

* opens a new group (one to three alerts) with probability ``open_chance`` while groups remain,
* else notifies a group last notified at least ``MIN_INTERVAL`` seconds earlier (Alertmanager's
  ``group_interval``: a group is never notified more often), which gains one new alert (a *join*)
  with probability ``JOIN_CHANCE``, up to ``MAX_ALERTS`` alerts, and otherwise sends the same
  alerts again (a *repeat*; their ``value`` annotation says the notification's number, as a
  templated ``$value`` would change, so a repeat is not a byte-for-byte replay, which the web
  process answers 200 and ignores: docs/ALERTS.md, Replays);
* and when no group is due yet, opens one (if none remain, the longest-waiting group is due).

``expectations`` says, for the notifications the web process accepted, what each group's record
and thread must hold: the union of the fingerprints sent, one notification counted per accepted
delivery, and at most one thread note per delivery that brought a new alert.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from bench import loadgen

PATH = "/alerts/alertmanager"
LABEL = 'bench="alerts"'  # every generated alert carries it; the benchmark's route matches it
MIN_INTERVAL = 1.0
JOIN_CHANCE = 1 / 3
MAX_ALERTS = 12
STARTS_AT = "2026-12-01T10:00:00.000Z"
_NEVER = "0001-01-01T00:00:00Z"  # Go's zero time: Alertmanager's endsAt of a firing alert


@dataclass
class PlannedGroup:
    name: str  # its alertname, which is also what it is grouped by
    alerts: list[dict[str, Any]] = field(default_factory=list)  # firing now, as Alertmanager lists them
    last_due: float = -1e9

    @property
    def group_key(self) -> str:
        return f'{{}}:{{alertname="{self.name}"}}'

    def add_alert(self) -> None:
        number = len(self.alerts)
        instance = f"node-{self.name[-3:]}-{number:02d}:9100"
        labels = {
            "alertname": self.name,
            "bench": "alerts",
            "instance": instance,
            "job": "node",
            "severity": "warning",
        }
        self.alerts.append(
            {
                "status": "firing",
                "labels": labels,
                "annotations": {"summary": f"{self.name} on {instance}", "runbook_url": "https://runbooks/x"},
                "startsAt": STARTS_AT,
                "endsAt": _NEVER,
                "generatorURL": f"http://prometheus.bench:9090/graph?g0.expr=up%7Binstance%3D%22{instance}%22%7D",
                "fingerprint": fingerprint(labels),
            }
        )


@dataclass(frozen=True)
class Delivery:
    """One notification of the plan: its group and the fingerprints it carried."""

    group: int
    fingerprints: tuple[str, ...]


@dataclass
class AlertPlan:
    groups: list[PlannedGroup]
    deliveries: list[Delivery]
    requests: list[bytes]  # the HTTP requests, one per delivery, pre-built


@dataclass
class Expected:
    """What one group must hold after the drain (from the deliveries the web process accepted)."""

    group_key: str
    name: str
    fingerprints: list[str] = field(default_factory=list)
    notifications: int = 0
    notes: int = 0  # thread notes: one per delivery that brought a new alert after the first


def fingerprint(labels: dict[str, str]) -> str:
    """A stable 16-hex-digit fingerprint of a label set (Alertmanager's is a hash of them too)."""
    return hashlib.sha256(json.dumps(sorted(labels.items())).encode()).hexdigest()[:16]


def plan(
    port: int, token: str, count: int, rate: float, groups: int, *, prefix: str = "BenchAlert", seed: int = 16
) -> AlertPlan:
    """``count`` notifications due at ``rate`` per second over at most ``groups`` groups, named
    ``<prefix>000``, ``<prefix>001``..."""
    rng = random.Random(seed)
    open_chance = min(1.0, 1.5 * groups / max(count, 1))  # every group open by about two thirds in
    planned: list[PlannedGroup] = []
    deliveries: list[Delivery] = []
    requests: list[bytes] = []
    for index in range(count):
        due = index / rate
        waiting = [number for number, g in enumerate(planned) if due - g.last_due >= MIN_INTERVAL]
        if len(planned) < groups and (not waiting or rng.random() < open_chance):
            planned.append(PlannedGroup(f"{prefix}{len(planned):03d}"))
            number = len(planned) - 1
            for _ in range(rng.randint(1, 3)):
                planned[number].add_alert()
        else:
            number = (
                rng.choice(waiting)
                if waiting
                else min(range(len(planned)), key=lambda n: planned[n].last_due)
            )
            if len(planned[number].alerts) < MAX_ALERTS and rng.random() < JOIN_CHANCE:
                planned[number].add_alert()
        group = planned[number]
        group.last_due = due
        deliveries.append(Delivery(number, tuple(a["fingerprint"] for a in group.alerts)))
        requests.append(notification_request(port, token, group, index))
    return AlertPlan(planned, deliveries, requests)


def notification_request(port: int, token: str, group: PlannedGroup, sequence: int) -> bytes:
    """The group's notification now: all its firing alerts, as Alertmanager posts them, their
    ``value`` annotation the notification's ``sequence`` number."""
    common = {
        name: value
        for name, value in group.alerts[0]["labels"].items()
        if all(alert["labels"].get(name) == value for alert in group.alerts)
    }
    body = {
        "receiver": "chatops",
        "status": "firing",
        "alerts": [{**a, "annotations": {**a["annotations"], "value": str(sequence)}} for a in group.alerts],
        "groupLabels": {"alertname": group.name},
        "commonLabels": common,
        "commonAnnotations": {"runbook_url": "https://runbooks/x"},
        "externalURL": "http://alertmanager.bench:9093",
        "version": "4",
        "groupKey": group.group_key,
        "truncatedAlerts": 0,
    }
    headers = {
        "User-Agent": "Alertmanager/0.25.0",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {token}",
    }
    return loadgen.post("127.0.0.1", port, PATH, json.dumps(body).encode(), headers)


def expectations(alert_plan: AlertPlan, accepted: Collection[int]) -> dict[str, Expected]:
    """Per group (by its key), what the accepted deliveries (by index) must have made of it."""
    expected: dict[str, Expected] = {}
    for index, delivery in enumerate(alert_plan.deliveries):
        if index not in accepted:
            continue  # answered non-2xx: Alertmanager would send it again; nothing to find
        group = alert_plan.groups[delivery.group]
        state = expected.setdefault(group.group_key, Expected(group.group_key, group.name))
        new = [f for f in delivery.fingerprints if f not in state.fingerprints]
        if state.notifications and new:
            state.notes += 1
        state.fingerprints += new
        state.notifications += 1
    return expected
