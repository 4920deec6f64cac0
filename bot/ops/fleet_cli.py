"""``chatops runner --target NAME`` and ``chatops targets``.

``runner`` serves one target's queue on the host (``bot.fleet.runner``), outliving Redis
outages like ``chatops worker``; ``targets`` lists the inventory with each runner's last heartbeat.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import time

import redis

from agent.redis_util import redis_now
from bot.fleet.heartbeats import MISSED_BEATS, Heartbeats
from bot.fleet.runner_acl import runner_acl_command
from bot.fleet.target_keys import target_key
from bot.keys import Keys
from bot.ops.fleet import build_runner_worker, load_fleet_inventory
from bot.redis_connection import open_redis
from bot.runs.replication import REPLICA_WAIT_MS
from bot.settings import Settings

log = logging.getLogger(__name__)


def configure_cli(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", help="the inventory target this runner serves (CHATOPS_RUNNER_TARGET)")
    parser.add_argument("--name", help="worker name (default: random)")
    parser.add_argument("--burst", action="store_true", help="quit when the queue is empty")
    parser.add_argument(
        "--print-key",
        action="store_true",
        help="print this target's key (CHATOPS_RUNNER_KEY), derived from CHATOPS_RUNNER_SECRET, and exit",
    )
    parser.add_argument(
        "--print-acl",
        action="store_true",
        help="print the ACL SETUSER line of this target's Redis user (docs/OPERATIONS.md) and exit",
    )


def run_cli(args: argparse.Namespace, settings: Settings) -> int:
    target = args.target or settings.chatops_runner_target
    if not target:
        print("chatops runner: name the target with --target or CHATOPS_RUNNER_TARGET")
        return 2
    if args.print_key:
        if not settings.chatops_runner_secret:
            print(
                "chatops runner --print-key: set CHATOPS_RUNNER_SECRET (where it is kept) to derive the key"
            )
            return 2
        print(target_key(settings.chatops_runner_secret.encode(), target).hex())
        return 0
    if args.print_acl:
        print(runner_acl_command(Keys(settings.chatops_redis_prefix), settings.chatops_queue, target))
        return 0
    restarts = 0
    while True:
        # Behind sentinels its one blocking command is WAIT 1 on a changing call's mark.
        waits = REPLICA_WAIT_MS / 1000 if settings.redis_sentinels else 0.0
        connection = open_redis(settings, blocking_seconds=waits)
        try:
            worker = build_runner_worker(settings, connection, target, name=args.name)
            # RQ's lines for every job cost a runner about 0.4 ms a call; our own say what ran.
            rq_level = "DEBUG" if args.log_level == "DEBUG" else "WARNING"
            worker.work(burst=args.burst, logging_level=rq_level, with_scheduler=False)
            return 0
        except (redis.AuthenticationError, redis.exceptions.NoPermissionError) as error:
            print(
                f"chatops runner: Redis refused this runner's credentials: {error} (see the runner ACL in docs/OPERATIONS.md)"
            )
            return 2
        except (redis.ConnectionError, redis.TimeoutError) as error:
            log.error("lost Redis (%s); starting again once it answers", error)
        restarts += 1
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        time.sleep(min(10.0, restarts))


def configure_targets(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="one JSON object per target")


def run_targets(args: argparse.Namespace, settings: Settings) -> int:
    inventory = load_fleet_inventory(settings)
    client = open_redis(settings)
    heartbeats = Heartbeats(
        client, Keys(settings.chatops_redis_prefix), settings.chatops_runner_heartbeat_seconds
    )
    now = redis_now(client)
    for target in inventory:
        row: dict[str, object] = {"name": target.name, "via": target.via, "labels": dict(target.labels)}
        if target.via == "runner":
            beat = heartbeats.get(target.name)
            row["runner"] = beat.executor if beat else None
            row["last_heartbeat_seconds_ago"] = round(now - beat.seen_at, 1) if beat else None
            row["reachable"] = heartbeats.unreachable(target.name) is None
        if args.json:
            print(json.dumps(row))
        else:
            print(_line(row, settings.chatops_runner_heartbeat_seconds))
    return 0


def _line(row: dict[str, object], interval: float) -> str:
    labels = ",".join(f"{k}={v}" for k, v in dict(row["labels"]).items()) or "-"  # type: ignore[call-overload]
    text = f"{row['name']:<20} {row['via']:<11} {labels}"
    if row["via"] == "runner":
        if row["runner"] is None:
            text += "  runner: never seen"
        else:
            state = "up" if row["reachable"] else f"UNREACHABLE (> {MISSED_BEATS * interval:.0f} s)"
            text += f"  runner {row['runner']} seen {row['last_heartbeat_seconds_ago']} s ago: {state}"
    return text
