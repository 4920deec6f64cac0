"""What a job needs, built in the process that runs it: the ``Runtime`` and the job's binding of it.

``bot.runs.worker.ChatopsWorker`` is built with a runtime *factory* and calls it inside
``perform_job`` (in the work horse, after RQ's fork, so Redis connections are opened there) and
binds the result to a context variable for the job's duration (``bound_runtime`` /
``current_runtime``). Tests build a worker whose factory returns a scripted model, test tools and
an ``InMemoryPresenter``; production builds it from ``Settings`` (``CHATOPS_RUNTIME``, default
``bot.ops.compose:default_runtime``).

Every worker also takes the alert notifications' jobs (``bot.alerts.jobs``): a runtime carries
their seam typed, ``alerts`` (an ``AlertSeam``: the alert threads' presenter and what a run that
answered tells its alert). A worker started on a runtime without one refuses to start
(``bot.ops.compose``), rather than showing every alert in the log only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import redis
from rq import Queue

from agent.chat import ChatModel
from agent.tooling import Tool
from bot.changes.reader import ChangeReader
from bot.errors import BotConfigurationError
from bot.keys import Keys
from bot.memory.similar import IncidentMemory, memory_tools
from bot.policy.proposals import RunPolicy
from bot.runs.durability import Durability
from bot.runs.incident_capture import AlertFacts, ChannelFacts
from bot.runs.presenter import AlertPresenter, Presenter
from bot.runs.queueing import worker_queue
from bot.runs.record import OfferedTool
from bot.runs.run_tools import RunTools, run_tools
from bot.runs.service import RunOptions, RunService
from bot.settings import DEFAULTS
from tools.runbooks import RunbookLibrary
from tools.targets import local_executor

log = logging.getLogger(__name__)
T = TypeVar("T")

# Runtimes built by hand (tests, embedding) get this short one; the worker's default runtime loads
# the shipped prompt or CHATOPS_SYSTEM_PROMPT_FILE (bot.ops.system_prompt).
DEFAULT_SYSTEM_PROMPT = "You are an on-call operations assistant."
# Waits between attempts to post an approval card (Slack's own 429/5xx retries happen inside each).
CARD_RETRY_DELAYS = (1.0, 3.0)


class AlertSeam(Protocol):
    """The alerts' part of a worker's runtime (``bot.alerts.jobs.AlertJobs``)."""

    @property
    def presenter(self) -> AlertPresenter:
        """How the alert threads are shown (Slack, or the log on purpose)."""
        ...

    def run_answered(self, runtime: Runtime, run_id: str, answer: str) -> None:
        """A run answered: a run that investigated an alert shows its answer on the alert's root
        message (any other run: nothing). A step of the job's report: raising leaves it undone."""
        ...

    def alert_facts(self, runtime: Runtime, run_id: str) -> AlertFacts | None:
        """The alert a run investigated (name, labels, fingerprints), for its incident; None: none."""
        ...


@dataclass
class Runtime:
    """What jobs need, built in the process that runs them. ``owns_connection``: close Redis at the end."""

    redis: redis.Redis
    keys: Keys
    options: RunOptions
    models: Sequence[ChatModel]
    tools: Sequence[Tool]
    presenter: Presenter
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    tool_output_filter: Callable[[str], str] | None = None
    redact: Callable[[str], str] | None = None  # the model's text and call arguments (``agent.calls``)
    clock: Callable[[], float] = time.time
    owns_connection: bool = False
    name: str = field(default_factory=local_executor)
    metrics_enabled: bool = (
        DEFAULTS.chatops_metrics_enabled
    )  # count runs, tools, ... (``bot.observability.metrics``)
    durability: Durability | None = None  # default: ``warn`` mode on this Redis (``bot.runs.durability``)
    card_retry_delays: tuple[float, ...] = CARD_RETRY_DELAYS  # between attempts to post an approval card
    channel_tools: Callable[[str], Sequence[Tool]] | None = None  # the inventory's tools per channel
    on_close: Callable[[], None] | None = None  # e.g. the SSH connections the job's tools opened
    policy: RunPolicy | None = None  # CHATOPS_POLICY_FILE, enforced (bot.policy.proposals)
    alerts: AlertSeam | None = None  # the alert jobs' seam; a worker refuses a runtime without it
    runbooks: RunbookLibrary | None = None  # the alerts' runbooks (tools.runbooks); None: none looked up
    memory: IncidentMemory | None = None  # past incidents (bot.memory); None: none kept, no tool
    # The inventory targets a request in a channel may name, for the past incidents' search of a
    # mention's run (``bot.runs.first_similar``); None: none (an implicit inventory).
    target_names: Callable[[str], Sequence[str]] | None = None
    channel_facts: ChannelFacts | None = None  # is a channel private, a thread's link; None: all private
    changes: ChangeReader | None = None  # the change journal's readers (bot.changes); None: no tool

    def redis_queue(self) -> Queue:
        """The runs' RQ queue on this runtime's connection."""
        return worker_queue(self.options.queue_name, self.redis)

    def listed_in(self, channel: str) -> Sequence[Tool]:
        """The tools this build has for a run in ``channel`` (``bot.fleet.routing``: its targets),
        before the policy."""
        listed = self.tools if self.channel_tools is None else self.channel_tools(channel)
        # similar_incidents and recent_changes are bound to the run's channel here, in code: the
        # boundary of bot.memory, and the channel's targets (bot.changes.reader).
        memory = memory_tools(self.memory, channel) if self.memory is not None else []
        changes = self.changes.tools(channel) if self.changes is not None else []
        if not (memory or changes):
            return listed
        return [*listed, *memory, *changes]

    def run_tools(self, channel: str, requester: str, recorded: Sequence[OfferedTool] | None) -> RunTools:
        """The tools one segment of a run offers: the list its first segment recorded, as far as
        the build still has it and the policy allows it (``bot.runs.run_tools``)."""
        listed = self.listed_in(channel)
        policy = self.policy
        allowed = listed if policy is None else policy.tools(listed, channel, requester)
        return run_tools(
            recorded,
            listed,
            allowed,
            lambda entry: policy is None or policy.offers(channel, entry.definition.name, entry.category),
        )

    def durable(self) -> Durability:
        if self.durability is None:
            self.durability = Durability(self.redis, self.keys.durability_probe())
        return self.durability

    def service(self) -> RunService:
        return RunService(self.redis, self.keys, self.options, clock=self.clock)

    def close(self) -> None:
        if self.on_close is not None:
            self.on_close()
        if self.owns_connection:
            self.redis.close()


RuntimeFactory = Callable[[], Runtime]
_current: ContextVar[Runtime | None] = ContextVar("chatops_runtime", default=None)


@contextmanager
def bound_runtime(factory: RuntimeFactory) -> Iterator[Runtime]:
    """Build a runtime and make it the current one for the block (one job)."""
    runtime = factory()
    token = _current.set(runtime)
    try:
        yield runtime
    finally:
        _current.reset(token)
        runtime.close()


def current_runtime() -> Runtime:
    runtime = _current.get()
    if runtime is None:
        raise BotConfigurationError(
            "chatops jobs run inside a chatops worker (bot.runs.worker.ChatopsWorker), which binds their runtime"
        )
    return runtime


def present(method: Callable[..., T], *args: Any) -> T | None:
    """Call the presenter; a chat transport failure is logged, never allowed to break the run."""
    try:
        return method(*args)
    except Exception:
        log.exception("presenter %s failed", getattr(method, "__name__", method))
        return None
