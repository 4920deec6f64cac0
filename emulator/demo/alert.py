"""The demo's alert: a page button that fires an Alertmanager notification at the bot.

The demo starts ``chatops web`` with an alerts token (``CHATOPS_ALERTS_TOKEN``, random per
session) and a routes file (``write_alert_routes``: every notification to #incident,
investigated at once, its ``instance`` label naming the target). The page's **Fire an alert**
button (``emulator.slack.page_buttons``) first starts db-01's incident (``start_incident``:
``emulator.demo.incident``, a report query that saturates the orders database; db-01 is healthy
until then), then does what Alertmanager does: it POSTs a webhook (payload version 4) with
``Authorization: Bearer <token>`` to ``/alerts/alertmanager``. The bot posts the alert as the root
of a new thread in #incident and starts a run in it, which the scripted model answers with
db-01's busy story (its load, processes, load chart and log: the scenario ``db-alert``, chosen by
the alert's text in ``demo.yaml``), the truth about the simulated db-01 from the press on.

Each press is a fresh delivery: a new alert group (its own ``groupKey`` and fingerprint) firing
now (``startsAt`` is the moment of the press), as if Alertmanager had seen a new incident, so a
second press is a second thread and never a replay of the first.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from emulator.slack.page_buttons import PageButton

ALERT_CHANNEL = "C0INCIDENT"  # #incident in the demo's workspace
ALERT_HOST = "db-01"  # the host the alert is about, whose incident the button starts
ALERT_LABELS = {
    "alertname": "PostgresHighLoad",
    "instance": "db-01:9100",
    "job": "node",
    "severity": "critical",
    "team": "sre",
}
ALERT_ANNOTATIONS = {
    "summary": "db-01: load above 10 on the orders primary",
    "description": "The orders primary is saturated; the orders API's queries are slowing down.",
}
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def write_alert_routes(path: Path, channel: str = ALERT_CHANNEL) -> Path:
    """``CHATOPS_ALERTS_FILE``: every notification to ``channel``, investigated at once."""
    route = {
        "name": "demo",
        "matchers": [],
        "channel": channel,
        "investigate": "auto",
        "target_label": "instance",
    }
    path.write_text(
        "# The chatops demo's alert routes (python -m emulator.demo.main): every alert to #incident, with a run.\n"
        + yaml.safe_dump({"alerts": {"routes": [route]}}, sort_keys=False)
    )
    return path


def alertmanager_payload(number: int, now: datetime) -> dict[str, Any]:
    """An Alertmanager webhook (version 4): one alert firing since ``now``, group ``number``."""
    starts = now.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    group_labels = {"alertname": ALERT_LABELS["alertname"], "instance": ALERT_LABELS["instance"]}
    group_key = (
        '{}/{demo="alert-button"}:{alertname="PostgresHighLoad", instance="db-01:9100"}' + f"#{number}"
    )
    fingerprint = hashlib.sha256(f"{group_key}\n{starts}".encode()).hexdigest()[:16]
    alert = {
        "status": "firing",
        "labels": ALERT_LABELS,
        "annotations": ALERT_ANNOTATIONS,
        "startsAt": starts,
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": "http://prometheus.demo:9090/graph?g0.expr=node_load5%7Binstance%3D%22db-01%3A9100%22%7D+%3E+10",
        "fingerprint": fingerprint,
    }
    return {
        "receiver": "chatops",
        "status": "firing",
        "alerts": [alert],
        "groupLabels": group_labels,
        "commonLabels": ALERT_LABELS,
        "commonAnnotations": ALERT_ANNOTATIONS,
        "externalURL": "http://alertmanager.demo:9093",
        "version": "4",
        "groupKey": group_key,
        "truncatedAlerts": 0,
    }


class AlertButton:
    """What the page's **Fire an alert** button does: one fresh webhook per press."""

    def __init__(
        self,
        webhook_url: str,
        token: str,
        clock: Callable[[], datetime] | None = None,
        start_incident: Callable[[], bool] | None = None,
    ) -> None:
        self.webhook_url = webhook_url
        self._token = token
        self._clock = clock or (lambda: datetime.now(UTC))
        self._start_incident = start_incident
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()

    def page_button(self) -> PageButton:
        return PageButton(
            id="fire-alert",
            label="🔔 Fire an alert (db-01)",
            title=(
                "Start db-01's incident (a report query saturates it), then POST an Alertmanager webhook "
                "to the bot's /alerts/alertmanager: a new alert thread in #incident"
            ),
            press=self.press,
        )

    def press(self, _user: str) -> str:
        with self._lock:
            number = next(self._numbers)
        incident = ""
        if self._start_incident is not None:  # the fault first: the alert is about it
            started = self._start_incident()
            incident = (
                "Incident started on db-01 (its report query): " if started else "db-01's incident runs: "
            )
        status, answer = self.send(alertmanager_payload(number, self._clock()))
        if status is None:
            said = f"the alert was not delivered: {answer}"
        elif 200 <= status < 300:
            said = (
                f"alert #{number} (PostgresHighLoad on db-01) posted to /alerts/alertmanager as Alertmanager "
                f"would: the bot answered {status} {answer}; its thread opens in #incident"
            )
        else:
            said = f"the bot answered {status} to the alert: {answer}"
        return incident + said if incident else said[0].upper() + said[1:]

    def send(self, payload: dict[str, Any]) -> tuple[int | None, str]:
        """POST ``payload`` with the bearer token; the status (None: no answer) and the body."""
        request = urllib.request.Request(
            self.webhook_url,
            data=json.dumps(payload).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self._token}"},
            method="POST",
        )
        try:
            with _OPENER.open(request, timeout=10) as response:
                return int(response.status), response.read(300).decode(errors="replace").strip()
        except urllib.error.HTTPError as error:
            return error.code, error.read(300).decode(errors="replace").strip()
        except OSError as error:
            return None, str(error)
