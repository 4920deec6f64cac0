"""``chatops worker``: the worker process, built by the composition root (``bot.ops.compose``).

``run_worker`` starts a worker (``bot.ops.compose.build_worker``: the engine's worker with the
recovery sweep, each job's runtime from ``CHATOPS_RUNTIME``) and outlives Redis outages; a forking
worker keeps the MCP sessions itself, so they outlive each job's work horse.
"""

from __future__ import annotations

import argparse
import logging
import signal
import time

import redis

from bot.ops.compose import build_worker
from bot.ops.compose import default_runtime as default_runtime  # CHATOPS_RUNTIME's value before 0.2
from bot.ops.priority import lower_priority
from bot.redis_connection import open_redis
from bot.settings import Settings

log = logging.getLogger(__name__)


# -- ``chatops worker`` ------------------------------------------------------------------------------


def configure_cli(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runtime", help="module:function building the runtime (overrides CHATOPS_RUNTIME)")
    parser.add_argument("--queue", help="queue to work on (overrides CHATOPS_QUEUE)")
    parser.add_argument("--name", help="worker name (default: random)")
    parser.add_argument("--burst", action="store_true", help="quit when the queue is empty")
    parser.add_argument("--simple", action="store_true", help="run jobs in this process instead of forking")


def run_cli(args: argparse.Namespace, settings: Settings) -> int:
    updates: dict[str, object] = {}
    if args.runtime:
        updates["chatops_runtime"] = args.runtime
    if args.queue:
        updates["chatops_queue"] = args.queue
    settings = settings.model_copy(update=updates)
    if settings.chatops_worker_nice:
        # Before any thread starts (a nice value is per thread on Linux; threads and forks inherit it).
        change = lower_priority(settings.chatops_worker_nice)
        log.info("worker CPU priority: %s", change.describe())
    run_worker(settings, burst=args.burst, simple=args.simple, name=args.name, logging_level=args.log_level)
    return 0


def run_worker(
    settings: Settings,
    *,
    burst: bool = False,
    simple: bool = False,
    name: str | None = None,
    logging_level: str = "INFO",
    redis_poll_seconds: float = 1.0,
) -> None:
    """Work until stopped, outliving Redis outages.

    RQ's worker retries a lost connection only while it waits for a job; one lost while it watches
    a job (or sweeps), or while it starts, ends it. Then this waits until Redis answers again and
    starts a new worker (a new name: the old one may still be registered). Runs whose job broke meanwhile are
    resumed by the recovery sweep once their lease has run out.
    """
    from tools.config import ToolsConfig
    from tools.registry import shared_mcp_sessions

    # A forking worker keeps the MCP sessions itself, so they outlive each job's work horse.
    mcp_host = None if simple else shared_mcp_sessions(ToolsConfig.from_settings(settings))
    restarts = 0
    try:
        while True:
            worker_name = f"{name}-{restarts}" if name and restarts else name
            try:
                worker = build_worker(settings, simple=simple, name=worker_name)  # talks to Redis already
                # The scheduler enqueues approval expiries, job retries and deferred resumes when due.
                worker.work(burst=burst, with_scheduler=True, logging_level=logging_level)
                return
            except (redis.ConnectionError, redis.TimeoutError) as error:
                log.error("lost Redis (%s); starting a new worker once it answers", error)
            restarts += 1
            # RQ's handlers belong to the worker that just quit: a stop request now ends the process.
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            _wait_for_redis(settings, redis_poll_seconds)
    finally:
        if mcp_host is not None:
            mcp_host.close()


def _wait_for_redis(settings: Settings, poll_seconds: float) -> None:
    client = open_redis(settings)  # behind sentinels: until they name a master that answers
    try:
        while True:
            try:
                if client.ping():
                    return
            except redis.RedisError:
                pass
            time.sleep(poll_seconds)
    finally:
        client.close()
