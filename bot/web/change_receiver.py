"""The deploy markers' webhooks: ``POST /changes``, ``/changes/github``, ``/changes/argocd``.

Each request is authenticated first, as the alert webhooks are (``bot.alerts.auth``): the bearer
token ``CHATOPS_CHANGES_TOKEN`` for ours and Argo CD's, GitHub's ``X-Hub-Signature-256`` under
``CHATOPS_CHANGES_GITHUB_SECRET`` for GitHub's; a bad or missing one, or an unset setting, is
401 and nothing is stored. The body is then parsed (``bot.changes.markers``, ``.github``,
``.argocd``): malformed 400, too large 413, targets the inventory does not have 422, each with
the reason; a ping or a deployment not yet finished is 200 "ignored".

Deliveries are single-use, with the alerts' claims (``AlertStore.claim``, ``bot.alerts.replay``'s
``Delivery``): a delivery is named by its source and, for GitHub, the status id inside the signed
body; otherwise by the body's SHA-256 and the ``Idempotency-Key`` header when the sender gives
one. It is claimed before it is stored, marked done in the same ``MULTI`` that appends its changes
to the journal, and remembered ``REMEMBER_SECONDS``: a replay is 200 "already received" and does
nothing; one being stored right now is 503. Underneath, the journal stores a change once by its
content (target, time, what): a replay after the claim expired adds nothing either, as long as
the marker's time came from the body (GitHub's and Argo CD's always do; ours when it has ``at``).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial

from bot.alerts.auth import bearer_ok, github_signature_ok
from bot.alerts.receiver import Answer, store_once
from bot.alerts.replay import Delivery
from bot.alerts.store import AlertStore
from bot.changes.argocd import parse_argocd
from bot.changes.github import parse_github
from bot.changes.journal import ChangeJournal
from bot.changes.markers import Markers, parse_marker
from bot.errors import MarkerError
from bot.observability.run_metrics import RunMetrics
from tools.changes.record import Change
from tools.inventory_types import Inventory

log = logging.getLogger(__name__)

PATHS = {"/changes": "changes", "/changes/github": "changes-github", "/changes/argocd": "changes-argocd"}
REMEMBER_SECONDS = 24 * 3600.0
IDEMPOTENCY_HEADER = "idempotency-key"
MAX_SHOWN_TARGETS = 10


@dataclass
class ChangeReceiver:
    """``store``: the alerts' store, for its delivery claims only."""

    store: AlertStore
    journal: ChangeJournal
    inventory: Inventory
    token: str
    github_secret: str
    metrics: RunMetrics = field(default_factory=lambda: RunMetrics(None))
    clock: Callable[[], float] = time.time

    def receive(self, path: str, headers: Mapping[str, str], body: bytes) -> Answer:
        """``headers`` by lower-case name."""
        source = PATHS.get(path)
        if source is None:
            return Answer(404, "no such change receiver")
        if not self._authentic(source, headers, body):
            log.warning("refused a deploy marker on %s: bad credentials", path)
            return Answer(401, "unauthorized")
        try:
            markers = self._parsed(source, headers, body)
        except MarkerError as error:
            log.warning("refused a deploy marker on %s: %s", path, error.reason)
            return Answer(error.status, error.reason)
        if markers.ignored:
            return Answer(200, f"ignored: {markers.ignored}")
        return self._store_once(markers.changes, delivery_of(source, markers, headers, body))

    def _parsed(self, source: str, headers: Mapping[str, str], body: bytes) -> Markers:
        now = self.clock()
        if source == "changes-github":
            return parse_github(headers.get("x-github-event", ""), body, self.inventory, now)
        if source == "changes-argocd":
            return parse_argocd(body, self.inventory, now)
        return parse_marker(body, self.inventory, now)

    def _store_once(self, changes: tuple[Change, ...], delivery: Delivery) -> Answer:
        added: list[int] = []

        def save() -> None:
            added.append(self.journal.append(changes, then=partial(self.store.delivered, delivery, "stored")))

        refused = store_once(self.store, delivery, save, self.metrics, "deploy marker")
        if refused is not None:
            return refused
        names = [change.target for change in changes]
        shown = ", ".join(names[:MAX_SHOWN_TARGETS]) + (" ..." if len(names) > MAX_SHOWN_TARGETS else "")
        log.info("stored a deploy marker (%s) on %d target(s), %d new", delivery.source, len(names), added[0])
        return Answer(200, f"accepted: a deploy on {len(names)} target(s) ({shown}), {added[0]} new")

    def _authentic(self, source: str, headers: Mapping[str, str], body: bytes) -> bool:
        if source == "changes-github":
            return github_signature_ok(body, headers.get("x-hub-signature-256"), self.github_secret)
        return bearer_ok(headers.get("authorization"), self.token)


def delivery_of(source: str, markers: Markers, headers: Mapping[str, str], body: bytes) -> Delivery:
    """The delivery a request is: the signed identity in the body when there is one (GitHub's),
    else the sender's ``Idempotency-Key`` and the body's digest."""
    if markers.identity:
        identity = markers.identity
    else:
        given = headers.get(IDEMPOTENCY_HEADER, "")[:200]
        identity = f"{given}\n{hashlib.sha256(body).hexdigest()}"
    digest = hashlib.sha256(f"{source}\n{identity}".encode()).hexdigest()
    return Delivery(source, digest, REMEMBER_SECONDS)
