"""``ToolsConfig``: the plain values the tools are built from, and how to get them from settings."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from agent.defaults import APPROVAL_TIMEOUT_SECONDS
from tools.egress import DEFAULT_UNLISTED, EgressPolicy, Unlisted, protected_endpoints
from tools.egress_endpoints import ALL_INTERFACES
from tools.errors import ToolConfigError
from tools.resolver import Resolver, SystemResolver

# The defaults of the tools' settings (``bot.settings.Settings`` names them as its fields' defaults).
SERVICE_BACKENDS = ("systemd", "docker", "kubernetes")
SERVICE_BACKEND = "systemd"
LOG_DIRS = ("/var/log",)
KUBE_NAMESPACE = "default"
BOT_SECRET_ENV = ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "LLM_API_KEY")
# Never in a command's environment, whatever CHATOPS_REDACT_ENV says: the runner secret and a
# runner's key (they sign approvals and jobs), the metrics token, the Redis URL (its password; a runner's Redis user), the alert
# webhooks' token and PagerDuty's signing secrets.
ALWAYS_HIDDEN_ENV = (
    *BOT_SECRET_ENV,
    "CHATOPS_RUNNER_SECRET",
    "CHATOPS_RUNNER_KEY",
    "CHATOPS_METRICS_TOKEN",
    "REDIS_URL",
    "CHATOPS_ALERTS_TOKEN",
    "CHATOPS_PAGERDUTY_SECRET",
)
# How long a dry run of a destructive built-in stays valid beyond the approval timeout.
_PLAN_TTL_MARGIN_SECONDS = 300


class ToolSettings(Protocol):
    """The settings ``ToolsConfig.from_settings`` reads (``bot.settings.Settings`` has them)."""

    @property
    def chatops_tools_file(self) -> Path | None: ...

    @property
    def chatops_log_dirs(self) -> Sequence[str]: ...

    @property
    def chatops_service_backend(self) -> str: ...

    @property
    def chatops_kube_namespace(self) -> str: ...

    @property
    def chatops_kube_context(self) -> str | None: ...

    @property
    def chatops_approval_timeout_seconds(self) -> int: ...

    @property
    def chatops_redact_env(self) -> Sequence[str]: ...

    @property
    def chatops_egress_allow(self) -> Sequence[str]: ...

    @property
    def chatops_egress_unlisted(self) -> Unlisted: ...

    @property
    def chatops_prometheus_url(self) -> str: ...

    @property
    def chatops_prometheus_headers(self) -> Mapping[str, str]: ...

    @property
    def chatops_alertmanager_url(self) -> str: ...

    @property
    def chatops_alertmanager_headers(self) -> Mapping[str, str]: ...

    @property
    def chatops_tool_elapsed(self) -> bool: ...

    @property
    def redis_url(self) -> str: ...

    @property
    def port(self) -> int: ...

    @property
    def web_host(self) -> str: ...


@dataclass(frozen=True)
class ToolsConfig:
    """Everything ``build_registry`` needs, as plain values (no Slack, no bot)."""

    tools_file: Path | None = None
    """The YAML catalog (``CHATOPS_TOOLS_FILE``); ``None`` loads only the built-ins."""
    log_dirs: tuple[Path, ...] = tuple(Path(path) for path in LOG_DIRS)
    """Where ``tail_log``, ``list_logs`` and ``clean_old_logs`` may look."""
    service_backend: str = SERVICE_BACKEND
    kube_namespace: str = KUBE_NAMESPACE
    kube_context: str | None = None
    plan_ttl_seconds: float = APPROVAL_TIMEOUT_SECONDS + _PLAN_TTL_MARGIN_SECONDS
    """The oldest dry-run plan an approved destructive built-in still executes."""
    env: Mapping[str, str] | None = None
    """The environment for commands and catalog ``${NAME}`` headers; ``None`` is ``os.environ``."""
    hidden_env: tuple[str, ...] = field(default=BOT_SECRET_ENV)
    """Variables removed from the environment of every command (the bot's own secrets)."""
    egress_allow: tuple[str, ...] = ()
    """``CHATOPS_EGRESS_ALLOW``: what network tools may reach (see ``tools.egress``); empty: nothing."""
    egress_unlisted: Unlisted = DEFAULT_UNLISTED
    """``CHATOPS_EGRESS_UNLISTED``: an unlisted destination is refused, or needs an approval card."""
    redis_url: str | None = None
    """The bot's own Redis: never reachable through a tool unless an entry names its port."""
    web_port: int | None = None
    web_host: str = ALL_INTERFACES
    """The bot's own web and metrics port (``PORT`` on ``WEB_HOST``), protected like Redis."""
    resolver: Resolver | None = None
    """Name lookups for the network tools; ``None`` is the system resolver (tests inject one)."""
    prometheus_url: str = ""
    """``CHATOPS_PROMETHEUS_URL``: the base URL of ``prometheus_query`` / ``prometheus_range``;
    empty: those tools are not offered. Reachable by them whatever ``egress_allow`` says."""
    prometheus_headers: Mapping[str, str] = field(default_factory=dict)
    """``CHATOPS_PROMETHEUS_HEADERS``: sent with every request; values may be ``${NAME}``
    references to ``env``. Secrets: redacted from the tools' output."""
    alertmanager_url: str = ""
    """``CHATOPS_ALERTMANAGER_URL``: the base URL of ``alertmanager_alerts`` / ``alertmanager_silence``."""
    alertmanager_headers: Mapping[str, str] = field(default_factory=dict)
    """``CHATOPS_ALERTMANAGER_HEADERS``: like ``prometheus_headers``."""
    show_elapsed: bool = True
    """``CHATOPS_TOOL_ELAPSED``: a catalog command's result says how long it ran."""

    def __post_init__(self) -> None:
        if self.service_backend not in SERVICE_BACKENDS:
            raise ToolConfigError(
                f"service backend {self.service_backend!r} is not one of {', '.join(SERVICE_BACKENDS)}"
            )

    @classmethod
    def from_settings(cls, settings: ToolSettings, env: Mapping[str, str] | None = None) -> ToolsConfig:
        return cls(
            tools_file=settings.chatops_tools_file,
            log_dirs=tuple(Path(path) for path in settings.chatops_log_dirs),
            service_backend=settings.chatops_service_backend,
            kube_namespace=settings.chatops_kube_namespace,
            kube_context=settings.chatops_kube_context,
            plan_ttl_seconds=settings.chatops_approval_timeout_seconds + _PLAN_TTL_MARGIN_SECONDS,
            env=env,
            hidden_env=tuple(settings.chatops_redact_env),
            egress_allow=tuple(settings.chatops_egress_allow),
            egress_unlisted=settings.chatops_egress_unlisted,
            redis_url=settings.redis_url,
            web_port=settings.port,
            web_host=settings.web_host,
            prometheus_url=settings.chatops_prometheus_url,
            prometheus_headers=dict(settings.chatops_prometheus_headers),
            alertmanager_url=settings.chatops_alertmanager_url,
            alertmanager_headers=dict(settings.chatops_alertmanager_headers),
            show_elapsed=settings.chatops_tool_elapsed,
        )

    def egress_policy(self) -> EgressPolicy:
        """The policy every network tool (built-in or catalog) connects through.

        Today the operator's list alone. When the inventory lands (``CHATOPS_INVENTORY_FILE``),
        add each target's host here as an exact entry: its targets are what tools should reach.
        """
        resolver = self.resolver or SystemResolver()
        protected = protected_endpoints(
            redis_url=self.redis_url, web_port=self.web_port, web_host=self.web_host, resolver=resolver
        )
        return EgressPolicy.parse(
            self.egress_allow, protected=protected, resolver=resolver, unlisted=self.egress_unlisted
        )

    def environment(self) -> Mapping[str, str]:
        """The environment as given (``os.environ`` by default)."""
        return os.environ if self.env is None else self.env

    def command_env(self) -> dict[str, str]:
        """The environment for commands: ours, less the hidden secrets."""
        hidden = {*self.hidden_env, *ALWAYS_HIDDEN_ENV}
        return {name: value for name, value in self.environment().items() if name not in hidden}
