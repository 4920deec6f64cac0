"""The worker's maintenance built from the settings: the recovery sweep, the runners' refusals moved
into the audit stream, and (with a Slack token) the check for runs Redis lost.

``recovery_sweep`` is what ``bot.ops.compose.build_worker`` gives the engine's worker
(``bot.runs.worker``) to run with RQ's maintenance, once per lease (``bot.ops.compose.recovery_interval``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import redis

from bot.fleet.refusals import drain_refusals
from bot.observability.audit import AuditKind
from bot.ops.fleet import load_fleet_inventory
from bot.runs.lost_runs import LossDetector
from bot.runs.service import RunService
from bot.runs.worker import Sweep
from bot.settings import Settings
from tools.inventory import Inventory

log = logging.getLogger(__name__)


def recovery_sweep(
    settings: Settings, client: redis.Redis, service: RunService, inventory: Inventory | None = None
) -> Sweep:
    """The worker's sweep: ``RunService.recover``, then the lost-card check (with a Slack token).
    ``inventory``: the one the worker loaded at its start (default: load it)."""
    detector = _detector(settings, client, service)
    refusals = refusal_mover(settings, client, service, inventory)

    def sweep() -> list[str]:
        resumed = service.recover()
        try:
            refusals()
        except redis.RedisError:
            log.exception(
                "moving the runners' refusals into the audit failed; trying again at the next sweep"
            )
        if detector is not None:
            try:
                detector()
            except redis.RedisError:
                log.exception("the check for lost runs failed; trying again at the next sweep")
        return resumed

    return sweep


def refusal_mover(
    settings: Settings, client: redis.Redis, service: RunService, inventory: Inventory | None = None
) -> Callable[[], int]:
    """Move the jobs the inventory's runners refused into the audit stream (``bot.fleet.refusals``);
    returns how many it moved."""
    inventory = inventory or load_fleet_inventory(settings)
    targets = [target.name for target in inventory if target.via == "runner"]

    def move() -> int:
        moved = 0
        for refusal in drain_refusals(client, service.keys, targets):
            service.audit.record(AuditKind.RUNNER_REFUSED, "-", target=refusal.target, **refusal.fields)
            moved += 1
        return moved

    return move


def _detector(settings: Settings, client: redis.Redis, service: RunService) -> LossDetector | None:
    if not settings.slack_bot_token:
        return None  # nothing was posted to Slack, so nothing there can be lost
    from bot.slack.delivery.lost_cards import slack_scan  # the worker needs Slack only with a token

    return LossDetector(client, service.keys, slack_scan(settings, service))
