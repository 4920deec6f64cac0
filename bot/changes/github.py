"""GitHub's ``deployment_status`` webhook as GitHub sends it, as deploy markers.

The body is the event's payload (``action``, ``deployment_status``, ``deployment``,
``repository``, ``sender``: octokit/webhooks' ``payload-examples/api.github.com/deployment_status``).
Only a final state is a marker: ``success`` ("deployed"), ``failure`` and ``error`` ("deploy
failed", so a failed rollout that left half the hosts changed is in the journal too); ``pending``,
``queued``, ``in_progress`` and ``inactive`` are acknowledged and ignored, and so is every other
event (``ping`` answers "pong").

Which targets (docs/CHANGES.md "Deploy markers"):

1. the deployment's ``payload.targets``, a list of target names (``gh api .../deployments -f
   'payload[targets][]=web-03'``, or the ``payload`` of the action that creates the deployment);
2. else every target whose label ``env`` is the deployment's environment (``production``);
3. else nothing is stored and the answer is 422 saying so (GitHub shows it in the delivery's log).

The delivery is named by ``deployment_status.id``, inside the signed body: the
``X-GitHub-Delivery`` header is not signed, so a replayer could change it at will. The marker's
time is the status's ``created_at`` (also signed), so the journal stores a replay once however old.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bot.changes.markers import (
    Markers,
    deploys,
    json_object,
    labelled_targets,
    mapping,
    named_targets,
    not_future,
    refuse,
    rfc3339,
    text,
    web_url,
)
from bot.errors import MarkerError
from tools.inventory_types import Inventory, Target

EVENT = "deployment_status"
MARKED = {"success": "deployed", "failure": "deploy failed", "error": "deploy failed (error)"}
ENV_LABEL = "env"


def parse_github(event: str, body: bytes, inventory: Inventory, now: float) -> Markers:
    """``event``: the ``X-GitHub-Event`` header (the body is already authenticated)."""
    if event == "ping":
        return Markers(ignored="pong")
    if event != EVENT:
        return Markers(ignored=f"event {' '.join(event.split())[:40]!r} is not a deployment_status")
    raw = json_object(body, limit=None)  # the web server bounds it (GitHub's payloads run to tens of KB)
    status = mapping(raw, "deployment_status")
    deployment = mapping(raw, "deployment")
    state = text(status, "state", required=True, where="deployment_status.")
    if state not in MARKED:
        return Markers(ignored=f"state {state[:20]!r}: only success, failure and error are markers")
    status_id = status.get("id")
    if isinstance(status_id, bool) or not isinstance(status_id, int):
        raise refuse("deployment_status.id: required, a number")
    environment = text(status, "environment", where="deployment_status.") or text(
        deployment, "environment", where="deployment."
    )
    targets = _targets(inventory, deployment, environment)
    at = not_future(
        rfc3339(
            text(status, "created_at", required=True, where="deployment_status."),
            "deployment_status.created_at",
        ),
        now,
        "deployment_status.created_at",
    )
    return Markers(
        deploys(
            targets,
            what=_what(MARKED[state], raw, deployment, status, environment),
            at=at,
            source="github",
            who=_login(status) or _login(deployment) or _login(raw, "sender"),
            url=_url(status, raw),
        ),
        identity=f"deployment_status {status_id}",
    )


def _targets(inventory: Inventory, deployment: Mapping[str, Any], environment: str) -> list[Target]:
    payload = deployment.get("payload")
    if isinstance(payload, str) and payload.strip().startswith("{"):
        try:
            payload = json.loads(payload)  # the REST API takes the payload as an object or a JSON string
        except ValueError:
            payload = None
    if isinstance(payload, dict) and payload.get("targets") is not None:
        return named_targets(inventory, payload["targets"], "deployment.payload.targets")
    if not environment:
        raise refuse("no targets: the deployment has no payload.targets and no environment", 422)
    try:
        return labelled_targets(inventory, {ENV_LABEL: environment}, "deployment.environment")
    except MarkerError as error:  # say the whole rule
        raise refuse(
            f"no targets: the deployment has no payload.targets, and no target of the inventory has "
            f"the label {ENV_LABEL}={environment[:60]!r}: nothing stored",
            422,
        ) from error


def _what(
    verb: str,
    raw: Mapping[str, Any],
    deployment: Mapping[str, Any],
    status: Mapping[str, Any],
    environment: str,
) -> str:
    repository = text(mapping(raw, "repository"), "full_name", where="repository.")
    ref = text(deployment, "ref", where="deployment.")
    sha = text(deployment, "sha", where="deployment.")[:12]
    described = text(status, "description", where="deployment_status.") or text(
        deployment, "description", where="deployment."
    )
    what = " ".join(part for part in (verb, repository, ref, f"({sha})" if sha else "") if part)
    what += f" to {environment}" if environment else ""
    return f"{what}: {described}" if described else what


def _login(raw: Mapping[str, Any], name: str = "creator") -> str:
    return text(mapping(raw, name), "login", where=f"{name}.")


def _url(status: Mapping[str, Any], raw: Mapping[str, Any]) -> str:
    for name in ("target_url", "log_url", "environment_url"):
        found = status.get(name)
        if isinstance(found, str) and found.lower().startswith(("https://", "http://")):
            return web_url(found)
    found = mapping(raw, "repository").get("html_url")
    return found if isinstance(found, str) and found.startswith("https://") else ""
