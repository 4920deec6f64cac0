"""The composition root: every chatops process is built from the settings here, and nowhere else.

* ``build_web(settings)``, in the root's web half ``bot.ops.compose_web`` (a worker never loads
  Bolt or the web server): the web process's WSGI app (Slack's events, the alert webhooks,
  ``/metrics``, ``/healthz``) over a ``WebRuntime`` (``web_runtime``); ``serve_web`` serves it
  (HTTP, or Socket Mode with ``SLACK_APP_TOKEN``).
* ``build_worker(settings)``: the RQ worker, with its recovery sweep (``bot.ops.sweep``); each
  job's ``Runtime`` is ``default_runtime`` (or ``CHATOPS_RUNTIME``'s factory, built once at start
  and refused there without the alerts' seam: ``check_runtime``).
* ``build_runner(settings, connection, target)``: ``chatops runner --target NAME``.

What the processes need is built here and handed to the packages that use them: the inventory
(``bot.ops.fleet.load_fleet_inventory``, once per process, at its start), the model chain
(``bot.models``), the tool registry (``tools.registry``), the fleet (``bot.ops.fleet``), the
presenters of runs and of alert threads. No package below ``bot.ops`` reads a setting to build
another package's collaborators. A job's runtime is built in the work horse, after RQ's fork, so
its Redis, HTTP and MCP clients are opened there.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import redis

from agent.tooling import Tool
from bot.alerts.jobs import AlertJobs
from bot.alerts.presenter import LoggingAlertPresenter
from bot.changes.journal import ChangeJournal
from bot.changes.reader import ChangeReader, LiveChanges, TargetsFor
from bot.errors import BotConfigurationError
from bot.fleet.change_scan import Scan
from bot.fleet.runner import RunnerWorker
from bot.fleet.runner import build_runner as runner_worker
from bot.fleet.target_keys import target_key
from bot.keys import Keys
from bot.observability.run_metrics import RunMetrics
from bot.ops.compose_memory import incident_memory
from bot.ops.fleet import kubernetes_changes_of, load_fleet_inventory, runner_key, runner_policy
from bot.ops.sweep import recovery_sweep
from bot.redis_connection import open_redis
from bot.runs.approval_seal import require_seal_key
from bot.runs.durability import TIMEOUT_MS as DURABILITY_TIMEOUT_MS
from bot.runs.durability import Durability
from bot.runs.incident_capture import ChannelFacts
from bot.runs.presenter import AlertPresenter, LoggingPresenter, Presenter
from bot.runs.queueing import worker_queue_names
from bot.runs.replication import REPLICA_WAIT_MS
from bot.runs.runtime import Runtime, RuntimeFactory
from bot.runs.service import RunOptions, RunService
from bot.runs.worker import ChatopsSimpleWorker, ChatopsWorker
from bot.settings import Settings
from tools.config import ToolsConfig
from tools.inventory import Inventory
from tools.inventory_types import Target
from tools.runbooks import RunbookLibrary

if TYPE_CHECKING:
    from bot.slack.delivery.presenter import SlackPresenter

# RQ blocks this long less than ``worker_ttl`` waiting for a job before it runs maintenance again.
_RQ_DEQUEUE_MARGIN = 15
_ALERT_METHODS = ("post_alert", "update_alert", "post_alert_note")  # bot.runs.presenter.AlertPresenter


# -- the worker --------------------------------------------------------------------------------------


def default_runtime(
    settings: Settings,
    extra_tools: Sequence[Tool] = (),
    *,
    inventory: Inventory | None = None,
    runbooks: RunbookLibrary | None = None,
) -> Runtime:
    """The production runtime of one job: the configured models, the tool registry and the fleet,
        Slack (or the log) for runs and alert threads, and the system prompt (``CHATOPS_SYSTEM_PROMPT_FILE``
        or the shipped one). ``inventory``, ``runbooks``: what the worker loaded at its start (default:
    load them; the runbook index rescans its folder on use, so a horse sees edits without a restart).

        ``extra_tools``: a deployment's own Python tools, offered beside the built-ins (a runtime named
        by ``CHATOPS_RUNTIME`` calls this with them); each declares where it runs (``tools.placement``),
        or the runtime is refused before anything is opened."""
    from agent.models.endpoints import secret_values
    from bot.models import build_models, model_keys
    from bot.ops.fleet import build_fleet, target_descriptions
    from bot.ops.system_prompt import system_prompt
    from bot.slack.policy_identity import worker_policy
    from tools.registry import build_registry_from_settings
    from tools.safety import OutputFilter

    runbooks = runbooks or runbook_library(settings)
    registry = build_registry_from_settings(settings, extra=[*extra_tools, *runbook_tools(runbooks)])
    inventory = inventory or load_fleet_inventory(settings)
    # Its one blocking command is the durability wait (WAITAOF / WAIT, ``bot.runs.durability``).
    client = open_redis(settings, blocking_seconds=DURABILITY_TIMEOUT_MS / 1000)
    keys = Keys(settings.chatops_redis_prefix)
    metrics = RunMetrics.for_redis(client, keys, enabled=settings.chatops_metrics_enabled)
    model_env = model_keys(settings)
    models = build_models(settings, on_retry=metrics.llm_retry, keys=model_env)
    fleet = build_fleet(settings, client, keys, registry, inventory)
    # The models' keys and headers are redacted from tool output and Slack like the catalog's secrets.
    model_secrets = [
        *secret_values(settings.model_endpoints(), model_env),
        *settings.llm_extra_headers.values(),
    ]
    secrets = [*registry.secret_values, *model_secrets]
    output_filter = OutputFilter.from_settings(settings, env=model_env, extra_secrets=secrets)
    return Runtime(
        redis=client,
        keys=keys,
        options=RunOptions.from_settings(settings),
        models=models,
        tools=registry.tools(),
        channel_tools=fleet.tools_for,
        on_close=registry.close,
        system_prompt=system_prompt(settings.chatops_system_prompt_file, target_descriptions(inventory)),
        presenter=run_presenter(settings, client, keys, secrets),
        alerts=AlertJobs(alert_presenter(settings, secrets)),
        tool_output_filter=output_filter,
        redact=output_filter.redactor.redact,  # the model's text and arguments, before they are stored
        owns_connection=True,
        metrics_enabled=settings.chatops_metrics_enabled,
        durability=Durability.from_settings(client, keys, settings),
        policy=worker_policy(settings, client, keys),
        runbooks=runbooks,
        memory=incident_memory(settings, client, keys),
        target_names=channel_target_names(inventory, settings.chatops_channel_targets),
        channel_facts=channel_facts(settings),
        changes=change_reader(
            settings,
            client,
            keys,
            fleet.targets_for,
            kubernetes_changes_of(ToolsConfig.from_settings(settings)),
        ),
    )


def change_reader(
    settings: Settings,
    client: redis.Redis,
    keys: Keys,
    targets_for: TargetsFor,
    live: LiveChanges | None = None,
) -> ChangeReader:
    """The change journal's readers (``recent_changes``, alert runs), checking every entry's seal
    with its target's key; without ``CHATOPS_RUNNER_SECRET`` there is no journal (nothing could
    seal or check it) and ``recent_changes`` says so (``chatops doctor`` too)."""
    from agent.redis_util import redis_clock

    secret = settings.chatops_runner_secret.encode()
    days = settings.chatops_changes_days
    journal = ChangeJournal(client, keys, partial(target_key, secret), days=days) if secret else None
    return ChangeReader(journal, targets_for, days=days, clock=redis_clock(client), live=live)


def channel_target_names(
    inventory: Inventory, channel_targets: Mapping[str, str]
) -> Callable[[str], Sequence[str]] | None:
    """The target names a request in a channel may name, for a mention's past incidents' search
    (``bot.runs.first_similar``; as the web's help lists them); None with an implicit inventory."""
    from bot.slack.handlers.help import TargetList

    if inventory.implicit:
        return None
    targets = TargetList(inventory, channel_targets)
    return lambda channel: [target.name for target in targets.for_channel(channel)]


def channel_facts(settings: Settings) -> ChannelFacts | None:
    """Slack's answer to "is this channel private?"; without Slack every channel counts as private."""
    if not settings.slack_bot_token:
        return None
    from bot.slack.delivery.channel_facts import SlackChannelFacts
    from bot.slack.delivery.client import make_client

    return SlackChannelFacts(make_client(settings))


def runbook_library(settings: Settings) -> RunbookLibrary:
    """The runbooks: ``CHATOPS_RUNBOOKS_DIR`` indexed now (a missing folder is a configuration
    error; a malformed runbook is reported and skipped, ``tools.runbooks.index``), and an alert's
    ``runbook_url`` read through the network tools' egress policy."""
    from tools.runbooks import RunbookFetcher, RunbookIndex

    folder = settings.chatops_runbooks_dir
    if folder is not None and not folder.is_dir():
        raise BotConfigurationError(f"CHATOPS_RUNBOOKS_DIR={folder} is not a directory")
    index = RunbookIndex(folder) if folder is not None else None
    return RunbookLibrary(index, RunbookFetcher(ToolsConfig.from_settings(settings).egress_policy()))


def runbook_tools(library: RunbookLibrary) -> list[Tool]:
    """``search_runbooks`` and ``read_runbook``, offered whenever a runbook folder is configured."""
    from tools.runbooks import runbook_tools as tools_of

    return list(tools_of(library)) if library.index is not None else []


def run_presenter(
    settings: Settings, client: redis.Redis, keys: Keys, secrets: Sequence[str] = ()
) -> Presenter:
    """Runs in Slack with a token, else in the log."""
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


def alert_presenter(settings: Settings, secrets: Sequence[str] = ()) -> AlertPresenter:
    """Alert threads in Slack with a token, else in the log (``bot.alerts.presenter``)."""
    if not settings.slack_bot_token:
        return LoggingAlertPresenter()
    from bot.slack.delivery.alert_presenter import SlackAlertPresenter
    from bot.slack.delivery.client import make_client
    from tools.safety import Redactor

    return SlackAlertPresenter(
        make_client(settings), Redactor.from_settings(settings, extra_secrets=secrets).redact
    )


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


def check_runtime(path: str, runtime: Runtime) -> None:
    """A runtime of ``CHATOPS_RUNTIME``'s own factory, built once when the worker starts: every
    worker takes the alert notifications' jobs, so it must carry their seam (``Runtime.alerts``,
    ``bot.alerts.jobs.AlertJobs``) with a whole alert presenter; else the worker refuses to start,
    naming what is missing, instead of sending every alert to the log."""
    try:
        problem = _alert_seam_problem(runtime)
    finally:
        runtime.close()
    if problem is not None:
        raise BotConfigurationError(
            f"CHATOPS_RUNTIME={path}: {problem}; fix: give its Runtime alerts=bot.alerts.jobs.AlertJobs(presenter) "
            "(bot.alerts.presenter.LoggingAlertPresenter() logs the alert threads on purpose)"
        )


def _alert_seam_problem(runtime: Runtime) -> str | None:
    seam: Any = runtime.alerts
    if seam is None:
        return "the runtime it builds has no alert seam (Runtime.alerts), so alert threads could not be shown"
    if not callable(getattr(seam, "run_answered", None)):
        return f"its alert seam ({type(seam).__name__}) has no run_answered"
    presenter = getattr(seam, "presenter", None)
    missing = [name for name in _ALERT_METHODS if not callable(getattr(presenter, name, None))]
    if missing:
        return f"its alert presenter ({type(presenter).__name__}) has no {', '.join(missing)}"
    return None


def check_at_start(settings: Settings) -> Inventory:
    """What would make every job fail, refused when the worker starts: a policy file, or runner,
    SSH or Kubernetes targets, without ``CHATOPS_RUNNER_SECRET``; an inventory with a mistake.
    Returns the inventory, loaded once for the worker's process."""
    require_seal_key(settings.chatops_policy_file, settings.chatops_runner_secret)
    return load_fleet_inventory(settings)


def job_runtimes(settings: Settings, inventory: Inventory) -> RuntimeFactory:
    """What builds each job's runtime: ``default_runtime`` on the inventory and the runbook index
    loaded at start, or ``CHATOPS_RUNTIME``'s own factory, checked now (``check_runtime``)."""
    build = load_runtime_factory(settings.chatops_runtime)
    if build is default_runtime:
        runbooks = runbook_library(settings)
        return lambda: default_runtime(settings, inventory=inventory, runbooks=runbooks)
    check_runtime(settings.chatops_runtime, build(settings))
    return lambda: build(settings)


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
    """A worker on ``CHATOPS_QUEUE`` whose jobs use ``runtime_factory`` (default: ``CHATOPS_RUNTIME``'s)."""
    inventory = check_at_start(settings)
    connection = connection or open_redis(settings)  # RQ widens its timeout for its dequeue
    runtime_factory = runtime_factory or job_runtimes(settings, inventory)
    options = RunOptions.from_settings(settings)
    service = RunService(connection, Keys(settings.chatops_redis_prefix), options)
    interval = recovery_interval(settings)
    worker_class = ChatopsSimpleWorker if simple else ChatopsWorker
    return worker_class(
        worker_queue_names(options.queue_name),
        connection=connection,
        name=name,
        runtime_factory=runtime_factory,
        sweep=recovery_sweep(settings, connection, service, inventory),  # recover, and announce lost runs
        maintenance_interval=interval,
        worker_ttl=interval + _RQ_DEQUEUE_MARGIN,
    )


# -- the runner --------------------------------------------------------------------------------------


def runner_host_scan(settings: Settings, target: Target, redact: Callable[[str], str]) -> Scan:
    """The runner's scan of its host (``bot.fleet.host_scan``) from its settings and inventory entry."""
    from bot.fleet.host_scan import host_paths, host_scan
    from tools.changes.systemd import systemctl_reader

    root = settings.chatops_changes_root
    return host_scan(
        target.name,
        paths=host_paths(root, settings.chatops_dpkg_log, settings.chatops_apt_history_log),
        watch=target.watch,
        state_dir=settings.chatops_runner_state_dir,
        redact=redact,
        systemd=systemctl_reader() if settings.chatops_service_backend == "systemd" else None,
    )


def build_runner(
    settings: Settings,
    connection: redis.Redis,
    target_name: str,
    name: str | None = None,
    *,
    scan: Scan | None = None,
) -> RunnerWorker:
    """``chatops runner --target NAME``: its own registry, for that target's queue only. ``scan``:
    what changed on its host, stored in its target's change journal at start and every
    ``CHATOPS_CHANGES_SCAN_SECONDS``; ``None``: the host's own (``runner_host_scan``)."""
    from tools.registry import build_registry
    from tools.safety import OutputFilter

    inventory = load_fleet_inventory(settings, runner=True)
    target = inventory.get(target_name)
    if target is None:
        raise BotConfigurationError(
            f"--target {target_name!r} is not in the inventory ({', '.join(inventory.names()) or 'empty'})"
        )
    if target.via != "runner":
        raise BotConfigurationError(f"target {target_name} is reached via {target.via}, not by a runner")
    registry = build_registry(ToolsConfig.from_settings(settings))
    output_filter: Any = OutputFilter.from_settings(settings, extra_secrets=registry.secret_values)
    if scan is None:
        scan = runner_host_scan(settings, target, output_filter.redactor.redact)
    return runner_worker(
        connection=connection,
        keys=Keys(settings.chatops_redis_prefix),
        queue_base=settings.chatops_queue,
        target=target.name,
        tools={tool.definition.name: tool for tool in registry.tools()},
        secret=settings.chatops_runner_secret,
        key=runner_key(settings),
        heartbeat_seconds=settings.chatops_runner_heartbeat_seconds,
        output_filter=output_filter,
        state_dir=settings.chatops_runner_state_dir,
        name=name,
        replicas=1 if settings.redis_sentinels else 0,  # behind sentinels: WAIT 1 on a changing call's mark
        replica_wait_ms=REPLICA_WAIT_MS,
        policy=runner_policy(settings, target),
        scan=scan,
        scan_seconds=settings.chatops_changes_scan_seconds,
        changes_days=settings.chatops_changes_days,
        health=target.health,
    )
