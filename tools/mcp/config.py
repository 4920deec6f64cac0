"""The ``mcp_servers:`` section of the tool catalog, checked into ``McpServer`` values.

Format (a mapping from server name to its entry; unknown keys are errors, like ``tools:``)::

    mcp_servers:
      git:                                    # tools are offered as git_<tool>
        command: [python, -m, mcp_server_git, --repository, /srv/repo]   # stdio: an argv list
        env: {GIT_TOKEN: "${GIT_TOKEN}"}      # ${VAR} read from the bot's environment at start-up
        cwd: /srv
        trust: annotations                    # or none (default): every tool mutating unless listed
        timeout: 30                           # per call, seconds
        connect_timeout: 15                   # start (or connect) and list tools, seconds
        allow: ["git_*"]                      # globs on the server's own tool names (default: all)
        deny: [git_commit]
        tools:
          git_log: {category: read_only, description: "..."}
      tickets:
        url: https://mcp.example.com/mcp      # streamable HTTP
        headers: {Authorization: "Bearer ${TICKETS_TOKEN}"}
        target: db-01                         # offered only for this inventory target
      legacy:
        url: https://old.example.com/sse
        transport: sse                        # the older HTTP+SSE transport (default: streamable-http)

``${VAR}`` may appear in ``command``, ``cwd``, ``url``, ``env`` and ``headers`` values. Every
value read from the environment for ``env`` and ``headers`` is a secret: it is never logged
and ``McpServer.secret_values`` hands it to the redactor. The server's process gets the SDK's
minimal default environment (``PATH``, ``HOME``...) plus ``env``: never the bot's own secrets.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.tooling import ToolCategory
from tools.env_references import env_references, expand_env

Trust = Literal["annotations", "none"]
HttpTransport = Literal["streamable-http", "sse"]
SERVER_NAME = re.compile(r"[A-Za-z0-9-]{1,32}")
_HEADER_NAME = re.compile(r"[A-Za-z0-9-]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class McpToolOverride(_Strict):
    """What the operator says about one of the server's tools; it always wins over annotations."""

    category: ToolCategory | None = None
    description: str | None = Field(default=None, min_length=1)
    timeout: float | None = Field(default=None, gt=0, le=3600)


class McpServerSpec(_Strict):
    """One ``mcp_servers:`` entry as written; ``McpServer`` is the checked, resolved form."""

    command: list[str] | None = Field(default=None, min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    transport: HttpTransport | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: float = Field(default=30, gt=0, le=3600)
    connect_timeout: float = Field(default=15, gt=0, le=300)
    target: str | None = Field(default=None, min_length=1)
    trust: Trust = "none"
    allow: list[str] = Field(default_factory=lambda: ["*"])
    deny: list[str] = Field(default_factory=list)
    tools: dict[str, McpToolOverride] = Field(default_factory=dict)


@dataclass(frozen=True)
class McpServer:
    """A checked server entry with its ``${VAR}`` references resolved (values are secrets)."""

    name: str
    command: tuple[str, ...] | None = None
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    url: str | None = None
    http_transport: HttpTransport = "streamable-http"
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    timeout: float = 30.0
    connect_timeout: float = 15.0
    target: str | None = None
    trust: Trust = "none"
    allow: tuple[str, ...] = ("*",)
    deny: tuple[str, ...] = ()
    overrides: Mapping[str, McpToolOverride] = field(default_factory=dict)
    secret_values: tuple[str, ...] = field(default=(), repr=False)

    @property
    def transport(self) -> str:
        if self.command is not None:
            return "stdio"
        return "SSE" if self.http_transport == "sse" else "streamable HTTP"


def parse_mcp_servers(raw: Any, env: Mapping[str, str]) -> tuple[list[McpServer], list[str]]:
    """The servers of a catalog's ``mcp_servers:`` value and every problem, each naming its server
    and field (the loader prefixes the file). ``env`` resolves ``${VAR}`` references."""
    if raw is None:
        return [], []
    if not isinstance(raw, dict):
        return [], ["field 'mcp_servers': must be a mapping of server name to its entry"]
    servers: list[McpServer] = []
    problems: list[str] = []
    for name, entry in raw.items():
        label = f"MCP server {name!r}"
        if not isinstance(name, str) or not SERVER_NAME.fullmatch(name):
            problems.append(f"{label}: a server name is 1-32 letters, digits or '-' (it prefixes tool names)")
            continue
        if not isinstance(entry, dict):
            problems.append(f"{label}: must be a mapping (command or url, trust, tools...)")
            continue
        try:
            spec = McpServerSpec.model_validate(entry)
        except ValidationError as exc:
            problems.extend(f"{label}, field {where!r}: {message}" for where, message in _describe(exc))
            continue
        found = [f"{label}, field {where!r}: {message}" for where, message in _check(spec, env)]
        problems.extend(found)
        if not found:
            servers.append(_resolve(name, spec, env))
    return servers, problems


def _describe(exc: ValidationError) -> list[tuple[str, str]]:
    described = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "(server)"
        if error["type"] == "extra_forbidden":
            message = "unknown key"
        elif error["type"] == "missing":
            message = "required key is missing"
        else:
            message = error["msg"]
        described.append((where, message))
    return described


def _check(spec: McpServerSpec, env: Mapping[str, str]) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    if (spec.command is None) == (spec.url is None):
        problems.append(("command", "give exactly one of command (stdio argv) or url (streamable HTTP)"))
    for index, part in enumerate(spec.command or []):
        problems.extend((f"command[{index}]", message) for message in _missing(part, env))
    for where, value in (("url", spec.url), ("cwd", spec.cwd)):
        if value is not None:
            problems.extend((where, message) for message in _missing(value, env))
    url_known = spec.url is not None and not _missing(spec.url, env)
    if url_known and not expand_env(spec.url or "", env).startswith(("http://", "https://")):
        problems.append(("url", "must start with http:// or https://"))
    if spec.url is not None and (spec.env or spec.cwd):
        problems.append(("env", "env and cwd are for stdio servers (command), not url"))
    if spec.command is not None and spec.headers:
        problems.append(("headers", "headers are for streamable HTTP servers (url), not command"))
    if spec.command is not None and spec.transport is not None:
        problems.append(("transport", "transport is for HTTP servers (url): streamable-http or sse"))
    for key, value in spec.env.items():
        if not _ENV_NAME.fullmatch(key):
            problems.append((f"env.{key}", "not a valid environment variable name"))
        problems.extend((f"env.{key}", message) for message in _missing(value, env))
    for key, value in spec.headers.items():
        if not _HEADER_NAME.fullmatch(key):
            problems.append((f"headers.{key}", "not a valid header name"))
        problems.extend((f"headers.{key}", message) for message in _missing(value, env))
    for index, pattern in enumerate([*spec.allow, *spec.deny]):
        if not pattern or any(char in pattern for char in "\n\r\0"):
            problems.append(("allow" if index < len(spec.allow) else "deny", "empty or binary pattern"))
    for tool, override in spec.tools.items():
        if override.category is None and override.description is None and override.timeout is None:
            problems.append((f"tools.{tool}", "an override sets category, description or timeout"))
    return problems


def _missing(value: str, env: Mapping[str, str]) -> list[str]:
    return [f"environment variable {name} is not set" for name in env_references(value) if name not in env]


def _resolve(name: str, spec: McpServerSpec, env: Mapping[str, str]) -> McpServer:
    referenced = [*spec.env.values(), *spec.headers.values()]
    secrets = sorted({env[ref] for value in referenced for ref in env_references(value) if env.get(ref)})
    return McpServer(
        name=name,
        command=tuple(expand_env(part, env) for part in spec.command) if spec.command else None,
        env={key: expand_env(value, env) for key, value in spec.env.items()},
        cwd=expand_env(spec.cwd, env) if spec.cwd else None,
        url=expand_env(spec.url, env) if spec.url else None,
        http_transport=spec.transport or "streamable-http",
        headers={key: expand_env(value, env) for key, value in spec.headers.items()},
        timeout=spec.timeout,
        connect_timeout=spec.connect_timeout,
        target=spec.target,
        trust=spec.trust,
        allow=tuple(spec.allow),
        deny=tuple(spec.deny),
        overrides=dict(spec.tools),
        secret_values=tuple(secrets),
    )
