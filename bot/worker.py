"""The chatops worker: RQ workers that bind each job's ``Runtime``, sweep for dead runs, and start from Settings.

* ``ChatopsWorker`` forks a work horse per job (RQ's ``Worker``): the runtime factory is called
  inside the horse, so every job opens its own Redis connection after the fork.
* ``ChatopsSimpleWorker`` runs jobs in its own process (RQ's ``SimpleWorker``), for tests and
  embedding. It times jobs out with a timer thread instead of ``SIGALRM``, which the host
  process (pytest-timeout, a web server) may be using.

Both run ``RunService.recover`` with RQ's maintenance tasks, every
``CHATOPS_RECOVERY_INTERVAL_SECONDS`` (the idle wait for jobs is shortened to match), so a run
whose worker died is resumed by any live worker once its lease has expired.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import redis
from rq.executions import Execution
from rq.job import Job
from rq.queue import Queue
from rq.timeouts import TimerDeathPenalty
from rq.worker import SimpleWorker, Worker
from rq.worker.base import BaseWorker

from agent.keys import Keys
from bot.durability import Durability
from bot.errors import BotConfigurationError
from bot.jobs import Runtime, RuntimeFactory, bound_runtime
from bot.lost_runs import recovery_sweep
from bot.metrics import RunMetrics
from bot.presenter import LoggingPresenter, Presenter
from bot.runs import RunOptions, RunService
from bot.settings import Settings

if TYPE_CHECKING:
    from bot.slack.presenter import SlackPresenter

log = logging.getLogger(__name__)
# RQ blocks this long less than ``worker_ttl`` waiting for a job before it runs maintenance again.
_RQ_DEQUEUE_MARGIN = 15

Sweep = Callable[[], list[str]]


class _RuntimeWorker(BaseWorker):
    """Binds a runtime around every job and adds the dead-run sweep to RQ's maintenance."""

    def __init__(
        self, *args: Any, runtime_factory: RuntimeFactory, sweep: Sweep | None = None, **kwargs: Any
    ):
        super().__init__(*args, **kwargs)
        self.runtime_factory = runtime_factory
        self.sweep = sweep

    def perform_job(self, job: Job, queue: Queue, execution: Execution) -> bool:
        # In the work horse for ``Worker`` (after the fork), in-process for ``SimpleWorker``.
        with bound_runtime(self.runtime_factory):
            return super().perform_job(job, queue, execution)

    def run_maintenance_tasks(self) -> None:
        super().run_maintenance_tasks()  # type: ignore[no-untyped-call]
        if self.sweep is None:
            return
        try:
            resumed = self.sweep()
        except redis.RedisError:
            log.exception("the recovery sweep failed; trying again at the next maintenance")
            return
        if resumed:
            log.warning("resumed %d run(s) whose worker stopped: %s", len(resumed), ", ".join(resumed))


class ChatopsWorker(_RuntimeWorker, Worker):
    """RQ's forking worker with a per-job runtime and the recovery sweep."""


class ChatopsSimpleWorker(_RuntimeWorker, SimpleWorker):
    """RQ's in-process worker with a per-job runtime and the recovery sweep."""

    death_penalty_class = TimerDeathPenalty


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


def default_runtime(settings: Settings) -> Runtime:
    """The production runtime: the configured models, the tool registry, Slack (or the log), and the
    system prompt (``CHATOPS_SYSTEM_PROMPT_FILE`` or the shipped one)."""
    from agent.endpoints import secret_values
    from bot.models import build_models, endpoints, model_keys
    from bot.system_prompt import system_prompt
    from tools.registry import build_registry_from_settings
    from tools.safety import OutputFilter

    client = redis.Redis.from_url(settings.redis_url)
    keys = Keys(settings.chatops_redis_prefix)
    metrics = RunMetrics.for_redis(client, keys, enabled=settings.chatops_metrics_enabled)
    model_env = model_keys(settings)
    models = build_models(settings, on_retry=metrics.llm_retry, keys=model_env)
    # The models' keys and headers are redacted from tool output and Slack like the catalog's secrets.
    model_secrets = [*secret_values(endpoints(settings), model_env), *settings.llm_extra_headers.values()]
    registry = build_registry_from_settings(settings)
    return Runtime(
        redis=client,
        keys=keys,
        options=RunOptions.from_settings(settings),
        models=models,
        tools=registry.tools(),
        system_prompt=system_prompt(settings.chatops_system_prompt_file),
        presenter=_presenter(settings, client, keys, [*registry.secret_values, *model_secrets]),
        tool_output_filter=OutputFilter.from_settings(
            settings, env=model_env, extra_secrets=[*registry.secret_values, *model_secrets]
        ),
        owns_connection=True,
        metrics_enabled=settings.chatops_metrics_enabled,
        durability=Durability.from_settings(client, keys, settings),
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
    from bot.slack.client import make_client
    from bot.slack.presenter import SlackPresenter
    from tools.safety import Redactor

    redactor = Redactor.from_settings(settings, extra_secrets=secrets)
    return SlackPresenter(make_client(settings), client, keys, redact=redactor.redact)


def build_worker(
    settings: Settings,
    *,
    runtime_factory: RuntimeFactory | None = None,
    simple: bool = False,
    connection: redis.Redis | None = None,
    name: str | None = None,
) -> _RuntimeWorker:
    """A worker on ``CHATOPS_QUEUE`` whose jobs use ``runtime_factory`` (default: ``CHATOPS_RUNTIME``)."""
    connection = connection or redis.Redis.from_url(settings.redis_url)
    if runtime_factory is None:
        build = load_runtime_factory(settings.chatops_runtime)

        def runtime_factory() -> Runtime:
            return build(settings)

    options = RunOptions.from_settings(settings)
    service = RunService(connection, Keys(settings.chatops_redis_prefix), options)
    interval = settings.chatops_recovery_interval_seconds
    worker_class = ChatopsSimpleWorker if simple else ChatopsWorker
    return worker_class(
        [options.queue_name],
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
    restarts = 0
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
        _wait_for_redis(settings.redis_url, redis_poll_seconds)


def _wait_for_redis(url: str, poll_seconds: float) -> None:
    client = redis.Redis.from_url(url, socket_connect_timeout=poll_seconds, socket_timeout=poll_seconds)
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
