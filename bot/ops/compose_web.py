"""The web process built from the settings: the composition root's web half (``bot.ops.compose``).

``web_runtime`` builds the ``WebRuntime`` the Slack handlers share (its Redis, run service, Slack
client and metrics per process, after the fork: ``tools.fork_local.ForkLocal``; the bot's
identity, who may decide (``bot.policy.deciders``), the redactor, the help's targets, the limits on
new runs, the timings: ``WebTuning``); ``web_app`` mounts the routes on it (Slack's events through Bolt, the alert
webhooks, the deploy markers' (``bot.ops.compose_changes``), ``/metrics``, ``/healthz``); ``build_web`` is both, for one process; ``serve_web`` is
``chatops web``. The inventory is loaded once, at start (a mistake stops start-up), and handed to
the help reply and the alert routes.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import redis

from bot.alerts.receiver import AlertReceiver
from bot.alerts.routing import load_routes
from bot.alerts.store import AlertStore
from bot.keys import Keys
from bot.observability.logs import redactor_for
from bot.observability.metrics_collector import MetricsEndpoint, RedisCollector
from bot.observability.run_metrics import RunMetrics
from bot.ops.compose_changes import change_journal, web_changes
from bot.ops.compose_memory import incident_memory
from bot.ops.fleet import load_fleet_inventory
from bot.policy.break_glass import BreakGlassLog
from bot.policy.deciders import Deciders
from bot.redis_connection import open_redis
from bot.runs.approval_seal import require_seal_key
from bot.runs.approvals import Approval
from bot.runs.limits import LimitSettings
from bot.runs.queueing import NotificationQueue, worker_queue_names
from bot.runs.record import active_runs_by_status
from bot.runs.replication import Replication
from bot.runs.service import RunOptions, RunService
from bot.settings import Settings
from bot.slack.delivery.client import make_client
from bot.slack.delivery.sender import RetryAfter
from bot.slack.handlers.app import PoolFactory, thread_pool
from bot.slack.handlers.courtesy import CourtesyBudget
from bot.slack.handlers.help import TargetList
from bot.slack.handlers.runtime import WebProcess, WebRuntime, WebTuning
from bot.slack.identity import IdentityCache
from bot.slack.policy_identity import SlackIdentity, deciders_for
from bot.web.alert_receiver import WebReceiver
from bot.web.server import WebApp, check_configuration, serve_http
from tools.fork_local import ForkLocal
from tools.inventory import Inventory

LOOKUP_TIMEOUT = 1  # seconds for each of the deciders' Slack lookups: a click is decided inside Slack's 3 s (user, then group: 2 s at worst)
IDENTITY_TIMEOUT = 5  # seconds for ``auth.test`` (in the background, never on an ack's path)


def web_runtime(
    settings: Settings,
    *,
    clock: Callable[[], float] = time.time,
    inventory: Inventory | None = None,
    tuning: WebTuning | None = None,
) -> WebRuntime:
    """The web process's runtime; opens nothing (Redis and Slack are reached on first use, in each
    process). ``inventory``: default, ``CHATOPS_INVENTORY_FILE`` loaded now. ``tuning``: the
    timings, constants in production (a test passes its own)."""
    require_seal_key(settings.chatops_policy_file, settings.chatops_runner_secret)
    tuning = tuning or WebTuning()
    inventory = inventory or load_fleet_inventory(settings)
    keys = Keys(settings.chatops_redis_prefix)
    processes: ForkLocal[WebProcess] = ForkLocal(
        lambda: _web_process(settings, keys, deciders, tuning, lambda: _team(identity))
    )
    identity = IdentityCache(
        lambda: processes.get().redis,
        keys,
        lambda: make_client(settings, timeout=IDENTITY_TIMEOUT, retries=False),
    )
    slack_identity = SlackIdentity(
        # ``users.info`` / ``usergroups.users.list`` while a person waits: no retries, a short
        # timeout (a click must be decided within Slack's 3 s; a failure denies).
        lambda: make_client(settings, timeout=LOOKUP_TIMEOUT, retries=False),
        bot_team=lambda: _team(identity),
        ttl=tuning.approver_cache_seconds,
    )

    def break_glass_until(user: str) -> float | None:
        service = processes.get().service
        return BreakGlassLog(service.redis, keys, service.audit).active_until(user)

    deciders = deciders_for(settings, slack_identity, break_glass_until)
    return WebRuntime(
        settings=settings,
        keys=keys,
        processes=processes,
        identity=identity,
        deciders=deciders,
        redact=redactor_for(settings).redact,
        targets=TargetList(inventory, settings.chatops_channel_targets),
        limits=LimitSettings.from_settings(settings),
        clock=clock,
        tuning=tuning,
        journal_of=(
            (lambda client: change_journal(client, settings, inventory))
            if settings.chatops_runner_secret
            else None
        ),
    )


def _team(identity: IdentityCache) -> str | None:
    """The bot's workspace (``auth.test``'s ``team_id``), which deciders must belong to."""
    found = identity.lookup()
    return found.team_id if found is not None else None


def _web_process(
    settings: Settings,
    keys: Keys,
    deciders: Deciders[Approval],
    tuning: WebTuning,
    team: Callable[[], str | None],
) -> WebProcess:
    # Behind sentinels its one blocking command is WAIT 1 before an answer (bot.runs.replication).
    waits = tuning.replica_wait_ms / 1000 if settings.redis_sentinels else 0.0
    client = open_redis(settings, blocking_seconds=waits)

    def retry_after() -> RetryAfter | None:  # shared with the workers' sender, per workspace
        workspace = team()
        return RetryAfter(client, keys, workspace) if workspace else None

    return WebProcess(
        redis=client,
        service=RunService(client, keys, RunOptions.from_settings(settings), deciders=deciders),
        client=make_client(settings),
        replication=Replication.from_settings(client, keys, settings, timeout_ms=tuning.replica_wait_ms),
        courtesy=CourtesyBudget(retry_after),
        metrics=RunMetrics.for_redis(client, keys, enabled=settings.chatops_metrics_enabled),
        memory=incident_memory(settings, client, keys),
    )


def web_alerts(runtime: WebRuntime) -> WebReceiver:
    """The alert webhooks: ``CHATOPS_ALERTS_FILE``'s routes read now (a mistake stops start-up), the
    inventory's target names, the receiver built on each process's Redis."""
    settings, keys = runtime.settings, runtime.keys
    routes = load_routes(settings.chatops_alerts_file)
    inventory = runtime.targets.inventory
    targets = () if inventory.implicit else tuple(inventory.names())
    token, secrets = settings.chatops_alerts_token, tuple(settings.chatops_pagerduty_secret)

    def receiver_on(client: redis.Redis) -> AlertReceiver:
        store = AlertStore(client, keys, runtime.redact)
        jobs = NotificationQueue(client, settings.chatops_queue)
        return AlertReceiver(store, jobs, routes, token, secrets, targets, runtime.metrics())

    return WebReceiver(runtime, receiver_on)


def metrics_endpoint(runtime: WebRuntime) -> MetricsEndpoint:
    """``GET /metrics``: the counters every process writes to Redis, and the queues' and runs' gauges."""
    settings, keys = runtime.settings, runtime.keys
    collector = RedisCollector(
        runtime.redis,
        keys,
        worker_queue_names(settings.chatops_queue),
        active_runs=lambda client: active_runs_by_status(client, keys),
    )
    return MetricsEndpoint(
        collector, token=settings.chatops_metrics_token, enabled=settings.chatops_metrics_enabled
    )


def web_app(runtime: WebRuntime, pools: PoolFactory = thread_pool) -> WebApp:
    """The WSGI app over ``runtime`` (``pools``: see ``bot.slack.handlers.app.build_app``)."""
    return WebApp(runtime, web_alerts(runtime), metrics_endpoint(runtime), pools, web_changes(runtime))


def build_web(settings: Settings | None = None) -> WebApp:
    """The web process's WSGI app (any WSGI server can serve ``bot.ops.compose_web:build_web()``, but
    only one that reads whole requests before calling it survives slow clients). Warms the bot
    identity in the background: ``auth.test`` must never delay startup or an ack."""
    runtime = web_runtime(settings or Settings())
    app = web_app(runtime)
    threading.Thread(target=runtime.identity.lookup, name="chatops-identity", daemon=True).start()
    return app


create_app = build_web  # its name before 0.2 (``bot.create_app``)


def check_web(settings: Settings) -> None:
    """What ``chatops web`` checks before it binds the port (``BotConfigurationError``, one line
    naming the setting and the fix): the Slack settings, then the app is built once and dropped,
    so a bad inventory, alert routes or policy file stops start-up here too (over HTTP; Socket Mode
    builds its app in this process, and its errors reach the CLI as they are)."""
    check_configuration(settings)
    if not settings.slack_app_token:
        web_app(web_runtime(settings))  # opens nothing: Redis and Slack are reached on first use


def serve_web(settings: Settings, listening: socket.socket | None = None) -> int:
    """``chatops web``: Socket Mode when ``SLACK_APP_TOKEN`` is set, else HTTP (each forked process
    builds its app: ``build_web``) on ``listening`` when given, else on ``WEB_HOST:PORT``."""
    if settings.slack_app_token:
        from bot.web.socket_mode import serve_socket_mode

        serve_socket_mode(web_runtime(settings))
        return 0
    return serve_http(settings, build_web, listening)
