"""``chatops doctor``'s check of the inventory: it loads, and every runner target has a live runner."""

from __future__ import annotations

import redis

from bot.errors import BotConfigurationError
from bot.fleet.heartbeats import Heartbeats
from bot.keys import Keys
from bot.ops.doctor_check import Check, Outcome
from bot.ops.fleet import load_fleet_inventory
from bot.redis_connection import open_redis
from bot.settings import Settings


def check_targets(settings: Settings) -> Check:
    try:
        inventory = load_fleet_inventory(settings)
    except BotConfigurationError as error:
        return Check(
            "targets", Outcome.FAIL, f"the inventory cannot be used: {error}", "fix CHATOPS_INVENTORY_FILE"
        )
    if inventory.implicit:
        return Check(
            "targets", Outcome.PASS, "no inventory: tools act on the worker's own host (target local)"
        )
    vias = sorted({target.via for target in inventory})
    summary = f"{len(inventory)} targets ({', '.join(vias)})"
    runners = [target.name for target in inventory if target.via == "runner"]
    if not runners:
        return Check("targets", Outcome.PASS, summary)
    try:
        client = open_redis(settings)
        heartbeats = Heartbeats(
            client, Keys(settings.chatops_redis_prefix), settings.chatops_runner_heartbeat_seconds
        )
        down = [name for name in runners if heartbeats.unreachable(name) is not None]
        client.close()
    except redis.RedisError as error:
        return Check("targets", Outcome.WARN, f"{summary}; runners not checked: {error}")
    if down:
        return Check(
            "targets",
            Outcome.WARN,
            f"{summary}; no live runner for {', '.join(down)}",
            "start `chatops runner --target NAME` on each of them (docs/OPERATIONS.md, Installing a runner)",
        )
    return Check("targets", Outcome.PASS, f"{summary}; all {len(runners)} runners up")
