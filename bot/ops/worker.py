"""``chatops worker``: the production runtime (``default_runtime``) and the worker built from Settings.

``CHATOPS_RUNTIME`` (default ``bot.ops.worker:default_runtime``) names the function that builds a
job's ``Runtime``; ``build_worker`` composes the engine's worker (``bot.runs.worker``) with the
recovery sweep and the lost-run check (Slack's half only with a token); ``run_worker`` outlives
Redis outages.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import math
import signal
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import redis

from agent.tooling import Tool
from bot.alerts.jobs import PRESENTER as ALERT_PRESENTER
from bot.alerts.jobs import announce_answer
from bot.alerts.presenter import AlertPresenter, LoggingAlertPresenter
from bot.errors import BotConfigurationError
from bot.fleet.refusals import drain_refusals
from bot.keys import Keys
from bot.observability.audit import AuditKind
from bot.observability.metrics import RunMetrics
from bot.ops.priority import lower_priority
from bot.redis_connection import open_redis
from bot.runs.durability import TIMEOUT_MS as DURABILITY_TIMEOUT_MS
from bot.runs.durability import Durability
from bot.runs.lost_runs import LossDetector
from bot.runs.presenter import LoggingPresenter, Presenter
from bot.runs.queueing import worker_queue_names
from bot.runs.runtime import Runtime, RuntimeFactory
from bot.runs.service import RunOptions, RunService
from bot.runs.worker import ChatopsSimpleWorker, ChatopsWorker, Sweep
from bot.settings import Settings

if TYPE_CHECKING:
    from bot.slack.delivery.presenter import SlackPresenter

log = logging.getLogger(__name__)
# RQ blocks this long less than ``worker_ttl`` waiting for a job before it runs maintenance again.
_RQ_DEQUEUE_MARGIN = 15


def load_runtime_factory(path: str) -> Callable[[Settings], Runtime]:
    """Import ``module:function`` (a function of ``Settings`` returning a ``Runtime``)."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise BotConfigurationError(f"CHATOPS_RUNTIME must look like module:function, got {path!r}")
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise BotConfigurationError(f"cannot load the runtime factory {path!r}: {error}") from error
    if not callable(factory):
        raise BotConfigurationError(f"the runtime factory {path!r} is not callable")
    return factory  # type: ignore[no-any-return]


def default_runtime(settings: Settings, extra_tools: Sequence[Tool] = ()) -> Runtime:
    """The production runtime: the configured models, the tool registry, Slack (or the log), and the
    system prompt (``CHATOPS_SYSTEM_PROMPT_FILE`` or the shipped one).

    ``extra_tools``: a deployment's own Python tools, offered beside the built-ins (a runtime named
    by ``CHATOPS_RUNTIME`` calls this with them); each declares where it runs (``tools.placement``),
    or the runtime is refused before anything is opened."""
    from agent.models.endpoints import secret_values
    from bot.models import build_models, model_keys
    from bot.ops.system_prompt import system_prompt
    from tools.registry import build_registry_from_settings
    from tools.safety import OutputFilter

    registry = build_registry_from_settings(settings, extra=extra_tools)
    # Its one blocking command is the durability wait (WAITAOF / WAIT, ``bot.runs.durability``).
    client = open_redis(settings, blocking_seconds=DURABILITY_TIMEOUT_MS / 1000)
    keys = Keys(settings.chatops_redis_prefix)
    metrics = RunMetrics.for_redis(client, keys, enabled=settings.chatops_metrics_enabled)
    model_env = model_keys(settings)
    models = build_models(settings, on_retry=metrics.llm_retry, keys=model_env)
    # The models' keys and headers are redacted from tool output and Slack like the catalog's secrets.
    model_secrets = [
        *secret_values(settings.model_endpoints(), model_env),
        *settings.llm_extra_headers.values(),
    ]
    from bot.ops.fleet import build_fleet, load_fleet_inventory, target_descriptions
    from bot.slack.policy_identity import worker_policy

    inventory = load_fleet_inventory(settings)
    fleet = build_fleet(settings, client, keys, registry, inventory)
    output_filter = OutputFilter.from_settings(
        settings, env=model_env, extra_secrets=[*registry.secret_values, *model_secrets]
    )
    presenter = _presenter(settings, client, keys, [*registry.secret_values, *model_secrets])
    alerts = _alert_presenter(settings, [*registry.secret_values, *model_secrets])
    return Runtime(
        redis=client,
        keys=keys,
        options=RunOptions.from_settings(settings),
        models=models,
        tools=registry.tools(),
        channel_tools=fleet.tools_for,
        on_close=registry.close,
        system_prompt=system_prompt(settings.chatops_system_prompt_file, target_descriptions(inventory)),
        presenter=presenter,
        extras={ALERT_PRESENTER: alerts},
        on_finished=announce_answer,
        tool_output_filter=output_filter,
        redact=output_filter.redactor.redact,  # the model's text and arguments, before they are stored
        owns_connection=True,
        metrics_enabled=settings.chatops_metrics_enabled,
        durability=Durability.from_settings(client, keys, settings),
        policy=worker_policy(settings, client, keys),
    )


def _alert_presenter(settings: Settings, secrets: Sequence[str]) -> AlertPresenter:
    """Alert threads in Slack with a token, else in the log (``bot.alerts.presenter``)."""
    if not settings.slack_bot_token:
        return LoggingAlertPresenter()
    from bot.slack.delivery.alert_presenter import SlackAlertPresenter
    from bot.slack.delivery.client import make_client
    from tools.safety import Redactor

    return SlackAlertPresenter(
        make_client(settings), Redactor.from_settings(settings, extra_secrets=secrets).redact
    )


def _presenter(settings: Settings, client: redis.Redis, keys: Keys, secrets: Sequence[str] = ()) -> Presenter:
    if not settings.slack_bot_token:
        return LoggingPresenter()
    return slack_presenter(settings, client, keys, secrets)


def slack_presenter(
    settings: Settings, client: redis.Redis, keys: Keys, secrets: Sequence[str] = ()
) -> SlackPresenter:
    """The worker's Slack presenter: every text it posts is redacted like tool output (the
    configured secrets, ``secrets`` such as the tool catalog's, and the built-in patterns)."""
    from bot.slack.delivery.client import make_client
    from bot.slack.delivery.presenter import SlackPresenter
    from tools.safety import Redactor

    redactor = Redactor.from_settings(settings, extra_secrets=secrets)
    return SlackPresenter(
        make_client(settings),
        client,
        keys,
        redact=redactor.redact,
        streaming=settings.chatops_slack_streaming == "auto",
    )


def check_at_start(settings: Settings) -> None:
    """What would make every job fail, refused when the worker starts: a policy file, or runner,
    SSH or Kubernetes targets, without ``CHATOPS_RUNNER_SECRET``; an inventory with a mistake."""
    from bot.ops.fleet import load_fleet_inventory
    from bot.runs.approval_seal import require_seal_key

    require_seal_key(settings.chatops_policy_file, settings.chatops_runner_secret)
    if settings.chatops_inventory_file is not None:
        load_fleet_inventory(settings)


def recovery_interval(settings: Settings) -> int:
    """Seconds between a worker's recovery sweeps: one lease (``CHATOPS_LEASE_TTL_SECONDS``), whole.

    Since 0.2.0 not a setting of its own (it was CHATOPS_RECOVERY_INTERVAL_SECONDS): a dead worker's
    run can be taken only once its lease has run out, so sweeping more often finds nothing more, and
    less often leaves a run lost for longer than the failover time the lease promises."""
    return max(1, math.ceil(settings.chatops_lease_ttl_seconds))


def build_worker(
    settings: Settings,
    *,
    runtime_factory: RuntimeFactory | None = None,
    simple: bool = False,
    connection: redis.Redis | None = None,
    name: str | None = None,
) -> ChatopsWorker | ChatopsSimpleWorker:
    """A worker on ``CHATOPS_QUEUE`` whose jobs use ``runtime_factory`` (default: ``CHATOPS_RUNTIME``)."""
    connection = connection or open_redis(settings)  # RQ widens its timeout for its dequeue
    if runtime_factory is None:
        check_at_start(settings)
        build = load_runtime_factory(settings.chatops_runtime)

        def runtime_factory() -> Runtime:
            return build(settings)

    options = RunOptions.from_settings(settings)
    service = RunService(connection, Keys(settings.chatops_redis_prefix), options)
    interval = recovery_interval(settings)
    worker_class = ChatopsSimpleWorker if simple else ChatopsWorker
    return worker_class(
        worker_queue_names(options.queue_name),
        connection=connection,
        name=name,
        runtime_factory=runtime_factory,
        sweep=recovery_sweep(settings, connection, service),  # recover, and announce lost runs
        maintenance_interval=interval,
        worker_ttl=interval + _RQ_DEQUEUE_MARGIN,
    )


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


# -- the sweep ---------------------------------------------------------------------------------------


def recovery_sweep(settings: Settings, client: redis.Redis, service: RunService) -> Sweep:
    """The worker's sweep: ``RunService.recover``, then the lost-card check (with a Slack token)."""
    detector = _detector(settings, client, service)
    refusals = refusal_mover(settings, client, service)

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


def refusal_mover(settings: Settings, client: redis.Redis, service: RunService) -> Callable[[], int]:
    """Move the jobs the inventory's runners refused into the audit stream (``bot.fleet.refusals``);
    returns how many it moved."""
    from bot.ops.fleet import load_fleet_inventory

    targets = [target.name for target in load_fleet_inventory(settings) if target.via == "runner"]

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
