"""All configuration, from the environment (or ``.env``). ``.env.example`` mirrors it line by line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Final, Literal
from urllib.parse import unquote, urlsplit

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from agent import defaults as agent_defaults
from agent.errors import AgentError
from agent.keys import DEFAULT_PREFIX
from agent.models.endpoints import PRIMARY_KEY_ENV, ModelEndpoint, parse_fallbacks
from bot.prices import check_prices
from tools.config import BOT_SECRET_ENV, KUBE_NAMESPACE, LOG_DIRS, SERVICE_BACKEND, SERVICE_BACKENDS
from tools.egress import DEFAULT_UNLISTED, Unlisted
from tools.egress_endpoints import ALL_INTERFACES
from tools.env_references import env_references
from tools.safety import DEFAULT_MAX_CHARS, MIN_MAX_CHARS


def _split_list(value: object) -> object:
    """Comma- or space-separated lists in the environment ("U1,U2" or "U1 U2")."""
    if isinstance(value, str):
        return [item for item in value.replace(",", " ").split() if item]
    return value


CsvList = Annotated[list[str], NoDecode]

# A renamed setting's old name keeps working until the version named, with a warning at every start
# naming the new one (bot/settings_names.py; docs/OPERATIONS.md, "Renamed and retired settings").
RENAMED: Final = {"LLM_FALLBACK_MODELS": ("LLM_FALLBACKS", "0.3.0")}
# Settings that no longer exist, and what became of them: a warning at every start says they do nothing
# (an error would stop an upgrade). Tuning knobs nobody needed to change became constants in 0.2.0,
# each named and explained where it is used (CHANGELOG.md lists them).
RETIRED: Final = {
    "CHATOPS_TOOL_STATE_DIR": "no longer used: dry-run plans travel with their approval record since 0.1.0",
    **{
        name: f"retired in 0.2.0, now a constant ({value})"
        for name, value in {
            "CHATOPS_QUEUED_NOTE_SECONDS": "2 s",
            "REDIS_REPLICA_WAIT_MS": "500 ms",
            "CHATOPS_DURABILITY_TIMEOUT_MS": "2000 ms",
            "CHATOPS_JOB_RETRIES": "3",
            "CHATOPS_MAX_RUN_ATTEMPTS": "5",
            "LLM_CONNECT_TIMEOUT": "5 s",
            "LLM_MAX_ATTEMPTS": "5",
            "LLM_RETRY_MAX_WAIT_SECONDS": "60 s",
            "CHATOPS_APPROVER_CACHE_SECONDS": "60 s",
            "CHATOPS_MAX_PARALLEL_TOOLS": "20",
            "CHATOPS_MAX_CALLS_PER_TURN": "32",
            "WEB_MAX_HEADER_BYTES": "32768",
            "WEB_GRACEFUL_TIMEOUT_SECONDS": "20 s",
        }.items()
    },
    "CHATOPS_RECOVERY_INTERVAL_SECONDS": "retired in 0.2.0: workers sweep once per CHATOPS_LEASE_TTL_SECONDS",
}
# ``chatops worker`` lowers itself to this nice value (bot/ops/priority.py): a nice-0 web process
# outweighs it about 9 to 1 (the kernel's weights 1024 and 110) when both want the CPU.
WORKER_NICE: Final = 10
MAX_NICE: Final = 19


def _names(field: str) -> AliasChoices:
    """The field's own name, then its old names (``RENAMED``): the new name wins when both are set."""
    old = [name.lower() for name, (new, _) in RENAMED.items() if new.lower() == field]
    return AliasChoices(field, *old)


class SettingsConflict(ValueError):
    """A check of several settings failed; ``settings`` names them (their env names), so the
    error's line can name them and ``chatops doctor`` can leave just these out and check the rest."""

    def __init__(self, settings: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.settings = settings


def sentinel_address(text: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` for an IPv6 address) -> ``(host, port)``; ``ValueError`` otherwise."""
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if (
        not sep
        or not host
        or not port.isdigit()
        or not 0 < int(port) < 65536
        or any(c in host for c in "/@[] ")
    ):
        raise ValueError(f"a sentinel address must look like host:port, got {text!r}")
    return host, int(port)


REDIS_URL_FORMS = "redis://host:6379/0, rediss://host:6379/0 (TLS) or unix:///path/redis.sock"


def redis_url_problem(url: str) -> None:
    """``ValueError`` naming what is wrong with ``url`` (never echoing it: it may hold a password)."""
    try:
        parts = urlsplit(url)
        port, path = parts.port, parts.path  # .port raises ValueError for a port out of range
    except ValueError as error:
        raise ValueError(f"cannot be read as a URL ({error}); write it as {REDIS_URL_FORMS}") from None
    if parts.scheme not in ("redis", "rediss", "unix"):
        found = f"{parts.scheme}://" if parts.scheme and "://" in url else "no scheme"
        raise ValueError(
            f"must start with redis://, rediss:// or unix:// (found {found}); write it as {REDIS_URL_FORMS}"
        )
    if parts.scheme == "unix":
        if not path:
            raise ValueError(f"a unix:// URL needs the socket's path; write it as {REDIS_URL_FORMS}")
        return
    if not parts.hostname:
        raise ValueError(f"names no host; write it as {REDIS_URL_FORMS}")
    database = path.strip("/")
    if database and not database.isdigit():
        raise ValueError(f"the path must be a database number (/0), not /{database}")
    del port


class Settings(BaseSettings):
    """Every default is written once: here, or (for what ``agent`` and ``tools`` also use without
    settings) as the constant of ``agent.defaults`` / ``tools`` that a field names."""

    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", env_ignore_empty=True
    )

    # Slack
    slack_bot_token: str = ""
    slack_signing_secret: str = ""
    slack_app_token: str = ""
    slack_api_url: str = "https://slack.com/api/"
    # A plain reply in a thread whose last run ended at most this many minutes ago starts a follow-up
    # run that sees the thread's earlier runs (bot.slack.continuation); 0: only a reply to a run that
    # asked a question does. Limits and channels apply as to a mention.
    chatops_follow_up_minutes: float = Field(default=60.0, ge=0)
    # auto: stream answers (chat.startStream) where Slack allows, else post them; off: always post.
    chatops_slack_streaming: Literal["auto", "off"] = "auto"

    # Redis and queues
    redis_url: str = "redis://127.0.0.1:6379/0"
    # Redis Sentinel (bot.redis_connection): empty, REDIS_URL's server alone; else every process asks
    # these sentinels for REDIS_SENTINEL_MASTER's address (REDIS_URL gives the database number only).
    redis_sentinels: CsvList = Field(default_factory=list)  # host:port, ...
    redis_sentinel_master: str = Field(default="mymaster", min_length=1)
    redis_sentinel_username: str = ""
    redis_sentinel_password: str = ""
    redis_username: str = ""  # the data servers' ACL user; empty: REDIS_URL's
    redis_password: str = ""  # the data servers' password; empty: REDIS_URL's
    # TLS, for a rediss:// REDIS_URL and TLS sentinels: the CA of the servers' certificates (empty:
    # the system's) and this client's certificate and key, for servers that ask (tls-auth-clients).
    redis_tls_ca_file: Path | None = None
    redis_tls_cert_file: Path | None = None
    redis_tls_key_file: Path | None = None
    redis_sentinel_tls: bool = False  # the sentinels listen with TLS (sentinel.conf: tls-port)
    chatops_redis_prefix: str = DEFAULT_PREFIX
    chatops_queue: str = "chatops"
    chatops_retention_days: int = Field(default=agent_defaults.RETENTION_DAYS, ge=1)
    chatops_audit_max_len: int = Field(default=1_000_000, ge=1000)
    chatops_durability: str = Field(default="warn", pattern=r"^(strict|warn)$")
    chatops_lease_ttl_seconds: float = Field(default=30.0, gt=0)
    chatops_runtime: str = "bot.ops.compose:default_runtime"
    chatops_worker_nice: int = Field(default=WORKER_NICE, ge=0, le=MAX_NICE)

    # LLM
    llm_provider: str = Field(default="openai", pattern=r"^(openai|anthropic|azure)$")
    llm_base_url: str = ""  # empty: the provider's own API
    llm_api_key: str = ""
    llm_model: str = "gpt-4o-mini"
    llm_api_version: str = ""  # azure: the api-version query parameter
    llm_extra_headers: dict[str, str] = Field(default_factory=dict)  # JSON object
    # JSON list or [provider:]model[@url], ... (agent.models.endpoints); LLM_FALLBACK_MODELS until 0.3.0
    llm_fallbacks: str = Field(default="", validation_alias=_names("llm_fallbacks"))
    llm_max_tokens: int = Field(default=agent_defaults.MAX_TOKENS, ge=1)
    llm_read_timeout: float = agent_defaults.READ_TIMEOUT_SECONDS
    chatops_system_prompt_file: Path | None = None

    # Tools and approvals
    chatops_tools_file: Path | None = None
    chatops_tool_elapsed: bool = True  # a catalog command's result says how long it ran (decoration)
    chatops_approvers: CsvList = Field(default_factory=list)
    chatops_policy_file: Path | None = None  # YAML access policy (bot/policy/file.py, docs/POLICY.md)
    chatops_channels: CsvList = Field(default_factory=list)
    chatops_approval_timeout_seconds: int = Field(default=agent_defaults.APPROVAL_TIMEOUT_SECONDS, ge=10)
    chatops_check_seconds: float = Field(default=60.0, gt=0, le=600)  # an approved change's check, retried
    chatops_undo_minutes: int = Field(
        default=60, ge=1, le=1440
    )  # how long an executed change offers its Undo
    chatops_log_dirs: CsvList = Field(default_factory=lambda: list(LOG_DIRS))
    chatops_service_backend: str = Field(default=SERVICE_BACKEND, pattern=f"^({'|'.join(SERVICE_BACKENDS)})$")
    chatops_kube_namespace: str = KUBE_NAMESPACE
    chatops_kube_context: str | None = None
    chatops_tool_output_max_chars: int = Field(default=DEFAULT_MAX_CHARS, ge=MIN_MAX_CHARS)
    chatops_redact_env: CsvList = Field(default_factory=lambda: list(BOT_SECRET_ENV))
    chatops_redact_patterns: list[str] = Field(default_factory=list)  # JSON list: regexes contain commas
    chatops_egress_allow: CsvList = Field(default_factory=list)  # tools/egress.py: names, *.domains, CIDRs
    # What a network tool's call to a host the allow list does not hold becomes: "refuse" (an error the
    # model reads) or "approve" (a mutating call: a card, and the approved call reaches exactly that
    # host and port, once). Loopback, link-local and the bot's own ports are refused either way.
    chatops_egress_unlisted: Unlisted = DEFAULT_UNLISTED
    # Prometheus and Alertmanager (tools/builtin/observability.py): empty URL, no tools. Header values
    # (JSON objects, ${ENV_NAME} allowed) are secrets: redacted everywhere, hidden from commands.
    chatops_prometheus_url: str = ""
    chatops_prometheus_headers: dict[str, str] = Field(default_factory=dict)
    chatops_alertmanager_url: str = ""
    chatops_alertmanager_headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("chatops_log_dirs", "chatops_redact_env", "chatops_egress_allow", mode="before")
    @classmethod
    def _tool_lists(cls, value: object) -> object:
        return _split_list(value)

    # Fleet (bot/fleet, tools/inventory.py): where tool calls run
    chatops_inventory_file: Path | None = None  # YAML targets, or an Ansible YAML/INI inventory
    chatops_channel_targets: dict[str, str] = Field(default_factory=dict)  # JSON {channel: name or k=v,...}
    chatops_runner_secret: str = ""  # shared by web, workers and runners: signs grants, seals approvals
    chatops_runner_heartbeat_seconds: float = Field(default=15.0, gt=0)
    chatops_runner_target: str = ""  # ``chatops runner --target``: the target this runner serves
    chatops_runner_key: str = ""  # a runner's own target's key, instead of the secret (--print-key)
    chatops_runner_state_dir: Path = Path(
        "/var/lib/chatops-runner"
    )  # a runner's spent grants (local, durable)
    chatops_ssh_user: str = ""  # defaults for Ansible hosts without ansible_user / a key file
    chatops_ssh_key_file: Path | None = None
    chatops_ssh_known_hosts: Path | None = None

    # Changes (tools/changes, bot/changes, docs/CHANGES.md): what changed on a target, sealed per target
    chatops_changes_days: int = Field(default=30, ge=1)  # retention of a target's journal
    chatops_dpkg_log: Path = Path("/var/log/dpkg.log")  # and its rotations (.1, .2.gz...)
    chatops_apt_history_log: Path = Path("/var/log/apt/history.log")  # who asked (Requested-By)
    chatops_changes_scan_seconds: float = Field(default=60.0, gt=0)  # a runner's scan interval
    chatops_changes_root: Path = Path("/")  # the host's / as the runner sees it (/host in a container)

    # Alerts (bot/alerts): webhooks from Alertmanager, Grafana and PagerDuty, routed to channels
    chatops_alerts_file: Path | None = None  # YAML alerts.routes (bot/alerts/routing.py)
    chatops_alerts_token: str = ""  # Bearer token Alertmanager and Grafana send; empty: refused
    chatops_pagerduty_secret: CsvList = Field(default_factory=list)  # V3 signing secrets (2 while rotating)

    # Deploy markers (bot/changes, docs/CHANGES.md): POST /changes, GitHub's deployment_status, Argo CD
    chatops_changes_token: str = ""  # Bearer token for POST /changes and /changes/argocd; empty: refused
    chatops_changes_github_secret: str = (
        ""  # the GitHub webhook's secret (X-Hub-Signature-256); empty: refused
    )

    # Runbooks (tools/runbooks, docs/RUNBOOKS.md): the team's Markdown runbooks, searched and read as data
    chatops_runbooks_dir: Path | None = None  # a checkout of the runbook repo; empty: no runbook tools

    # Incident memory (bot/memory, docs/MEMORY.md): what finished runs found, offered to later runs
    chatops_memory_days: float = Field(default=180, ge=0)  # retention; 0: no incident is kept
    chatops_memory_scope: Literal["workspace", "channel"] = (
        "workspace"  # channel: no memory leaves its channel
    )

    @field_validator("chatops_pagerduty_secret", mode="before")
    @classmethod
    def _alert_lists(cls, value: object) -> object:
        return _split_list(value)

    # Run limits
    chatops_max_iterations: int = Field(default=agent_defaults.MAX_ITERATIONS, ge=1)
    chatops_deadline_seconds: float = Field(default=agent_defaults.DEADLINE_SECONDS, gt=0)
    chatops_token_budget: int | None = Field(default=None, ge=1)
    # Paid tokens a channel's runs may use in one calendar month (UTC); empty: no cap (bot/runs/monthly_tokens.py)
    chatops_channel_monthly_tokens: int | None = Field(default=None, ge=1)
    # JSON {model: {"input": USD per million tokens, "output": ..., "cache_read": ...}} (bot/runs/prices.py)
    llm_prices: dict[str, dict[str, float]] = Field(default_factory=dict)

    @field_validator("llm_prices")
    @classmethod
    def _prices(cls, value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        check_prices(value)  # raises ValueError: an unknown key or a negative price fails at start
        return value

    # Limits
    chatops_rate_window_seconds: int = Field(default=60, ge=1)
    chatops_user_runs_per_window: int = Field(default=10, ge=0)
    chatops_channel_runs_per_window: int = Field(default=30, ge=0)
    chatops_channel_max_active_runs: int = Field(default=10, ge=0)
    chatops_max_mutating_actions: int = Field(default=10, ge=0)

    # Web process
    port: int = Field(default=3000, ge=0, le=65535)
    web_host: str = ALL_INTERFACES
    web_workers: int = Field(default=2, ge=1)
    web_threads: int = Field(default=8, ge=1)
    web_header_timeout_seconds: float = Field(default=10.0, gt=0)
    web_body_timeout_seconds: float = Field(default=10.0, gt=0)
    web_keepalive_seconds: float = Field(default=5.0, ge=0)
    web_max_connections: int = Field(default=1000, ge=1)

    # Operations
    chatops_log_format: str = Field(default="auto", pattern=r"^(auto|json|text)$")
    chatops_metrics_enabled: bool = True
    chatops_metrics_token: str = ""

    @field_validator("chatops_approvers", "chatops_channels", mode="before")
    @classmethod
    def _lists(cls, value: object) -> object:
        return _split_list(value)

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: str) -> str:
        redis_url_problem(value)  # raises ValueError: a malformed URL fails at start, in one line
        return value

    @field_validator("redis_sentinels", mode="before")
    @classmethod
    def _sentinel_list(cls, value: object) -> object:
        return _split_list(value)

    @field_validator("redis_sentinels")
    @classmethod
    def _sentinel_addresses(cls, value: list[str]) -> list[str]:
        for address in value:
            sentinel_address(address)  # raises ValueError: a mistyped address fails at start
        return value

    @model_validator(mode="after")
    def _sentinels_need_a_tcp_url(self) -> Settings:
        scheme = urlsplit(self.redis_url).scheme
        if self.redis_sentinels and scheme not in ("redis", "rediss"):
            raise SettingsConflict(
                ("REDIS_SENTINELS", "REDIS_URL"),
                "REDIS_SENTINELS needs a redis:// or rediss:// REDIS_URL (its database number and "
                f"credentials are used; the master's address comes from the sentinels), got {scheme}://",
            )
        return self

    @model_validator(mode="after")
    def _tls_is_complete(self) -> Settings:
        if (self.redis_tls_cert_file is None) != (self.redis_tls_key_file is None):
            raise SettingsConflict(
                ("REDIS_TLS_CERT_FILE", "REDIS_TLS_KEY_FILE"),
                "REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE go together (a client certificate and its key)",
            )
        if self.redis_sentinel_tls and not self.redis_sentinels:
            raise SettingsConflict(("REDIS_SENTINEL_TLS",), "REDIS_SENTINEL_TLS needs REDIS_SENTINELS")
        tls_files = (self.redis_tls_ca_file, self.redis_tls_cert_file)
        uses_tls = urlsplit(self.redis_url).scheme == "rediss" or self.redis_sentinel_tls
        if any(tls_files) and not uses_tls:
            raise SettingsConflict(
                ("REDIS_TLS_CA_FILE", "REDIS_TLS_CERT_FILE", "REDIS_TLS_KEY_FILE"),
                "REDIS_TLS_CA_FILE / REDIS_TLS_CERT_FILE are set but nothing uses TLS: make REDIS_URL "
                "rediss://... (and set REDIS_SENTINEL_TLS=true for TLS sentinels)",
            )
        return self

    @model_validator(mode="after")
    def _model_keys_are_secret(self) -> Settings:
        """Check ``LLM_FALLBACKS`` now, and treat the variables holding its keys like
        ``LLM_API_KEY``: redacted from every output, hidden from the commands tools run."""
        try:
            fallbacks = self.model_endpoints()[1:]
        except AgentError as error:
            raise SettingsConflict(("LLM_FALLBACKS",), str(error)) from error
        names = dict.fromkeys(
            e.api_key_env for e in fallbacks if e.api_key_env and e.api_key_env != PRIMARY_KEY_ENV
        )
        missing = [name for name in names if name not in self.chatops_redact_env]
        if missing:
            self.chatops_redact_env = [*self.chatops_redact_env, *missing]
        return self

    @model_validator(mode="after")
    def _observability_header_variables_are_secret(self) -> Settings:
        """The variables ``${NAME}`` in the Prometheus and Alertmanager headers hold secrets (a
        bearer token): redacted from every output and hidden from commands, like ``LLM_API_KEY``."""
        names = [name for value in self._observability_header_values() for name in env_references(value)]
        missing = [name for name in dict.fromkeys(names) if name not in self.chatops_redact_env]
        if missing:
            self.chatops_redact_env = [*self.chatops_redact_env, *missing]
        return self

    def model_endpoints(self) -> list[ModelEndpoint]:
        """The run's chain of models: the primary (``LLM_*``), then ``LLM_FALLBACKS`` in order."""
        primary = ModelEndpoint(
            provider=self.llm_provider,  # type: ignore[arg-type]  # the field's pattern allows only these
            model=self.llm_model,
            base_url=self.llm_base_url,
            api_key_env=PRIMARY_KEY_ENV,
            api_version=self.llm_api_version,
        )
        return [primary, *parse_fallbacks(self.llm_fallbacks, primary)]

    def _observability_header_values(self) -> list[str]:
        headers = (self.chatops_prometheus_headers, self.chatops_alertmanager_headers)
        return [value for mapping in headers for value in mapping.values()]

    def secret_values(self) -> list[str]:
        """The bot's own secrets, redacted everywhere whatever ``CHATOPS_REDACT_ENV`` says: the Slack
        tokens and signing secret, the LLM key, the metrics token, the runner secret and key, the alert webhooks' token and
        PagerDuty signing secrets, the deploy markers' token and GitHub secret, the Redis and Sentinel passwords, and the Prometheus and Alertmanager header
        values written out (``${NAME}`` ones: see above)."""
        values = [
            self.slack_bot_token,
            self.slack_signing_secret,
            self.slack_app_token,
            self.llm_api_key,
            self.chatops_metrics_token,
            self.chatops_runner_secret,
            self.chatops_runner_key,
            self.chatops_alerts_token,
            *self.chatops_pagerduty_secret,
            self.chatops_changes_token,
            self.chatops_changes_github_secret,
        ]
        for value in self._observability_header_values():
            if "${" not in value:  # the credential alone too: "Bearer TOKEN" may be echoed as "TOKEN"
                values += [value, value.split()[-1]] if value.split() else []
        password = urlsplit(self.redis_url).password
        if password:
            values += [password, unquote(password)]
        values += [self.redis_password, self.redis_sentinel_password]
        return [value for value in values if value]


DEFAULTS: Final = Settings.model_construct()
"""Every field's default, not read from the environment (nor validated): what the bot's own
dataclasses built from settings (``RunOptions``, ``LimitSettings``, ...) default to."""
