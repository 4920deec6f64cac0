"""The YAML catalog format, as pydantic models (unknown keys are errors).

This format is a public contract (see docs/TOOLS.md); change it only compatibly::

    tools:
      - name: restart_service
        description: Restart a systemd unit on this host.
        category: mutating        # read_only | mutating | destructive
        parallel: false           # read_only tools only
        timeout: 30               # seconds, default 30
        params:
          service: {type: string, description: unit name, pattern: "^[a-z0-9@._-]+$"}
        run: ["systemctl", "restart", "{service}"]
        targets: [runner, local]  # where it may run: runner | local | ssh | kubernetes (default: runner, local)
        check: {tool: service_status, args: {service: "{args.service}"}}  # run right after it
        no_undo: a restart cannot be taken back  # or undo: {tool: ..., args: {...}}; before: {...}

Where a tool runs follows from what it does (``tools.placement``): a ``run`` tool's command runs on
the call's target (one of its ``targets`` kinds), an ``http`` tool's request leaves from the worker
through the egress policy. ``placement:`` may say so (``target`` or ``worker``); saying otherwise
is a catalog error (``checks.check_tool``): a command never runs in the worker by a claim.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent.tooling import ToolCategory
from tools.placement import TargetKind as TargetKind  # re-exported: the catalog's name for it
from tools.placement import Where

ParamValue = bool | int | float | str
HttpMethod = Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
DEFAULT_TARGETS: tuple[TargetKind, ...] = ("runner", "local")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ParamSpec(_Strict):
    """One parameter the model fills in."""

    type: Literal["string", "integer", "number", "boolean"] = "string"
    description: str | None = None
    enum: list[ParamValue] | None = Field(default=None, min_length=1)
    pattern: str | None = None
    minimum: int | float | None = None
    maximum: int | float | None = None
    default: ParamValue | None = None
    required: bool = True
    allow_flags: bool = False
    """Allow values starting with ``-`` in ``run`` argv (refused by default: they read as options)."""


class HttpSpec(_Strict):
    """An HTTP request; ``{param}`` placeholders in ``url``, header values and ``json`` strings."""

    method: HttpMethod = "GET"
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    json_body: dict[str, object] | None = Field(default=None, alias="json")
    expect_status: int | list[int] | None = None
    expect_text: str | None = None
    follow_redirects: bool = False

    @field_validator("method", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value


class CallSpec(_Strict):
    """Another tool's call declared with a change: ``{args.X}`` (and, in an undo, ``{before.X}``)
    in its argument values (``tools.verification``)."""

    tool: str
    args: dict[str, ParamValue] = Field(default_factory=dict)


class CheckSpec(CallSpec):
    """The read-only call run right after the change; it passes when it succeeds and, with
    ``expect``, its output contains that text."""

    expect: str | None = None


class ToolSpec(_Strict):
    """One catalog tool: exactly one of ``run`` (argv) or ``http``."""

    name: str
    description: str = Field(min_length=1)
    category: ToolCategory
    parallel: bool = False
    timeout: float = Field(default=30, gt=0, le=3600)
    params: dict[str, ParamSpec] = Field(default_factory=dict)
    run: list[str] | None = Field(default=None, min_length=1)
    http: HttpSpec | None = None
    dry_run: list[str] | HttpSpec | None = None
    """Destructive tools only: the command or request whose output is the preview."""
    override: bool = False
    """Replace the built-in tool of the same name (a clash is an error otherwise)."""
    targets: list[TargetKind] = Field(default_factory=lambda: list(DEFAULT_TARGETS), min_length=1)
    """The kinds of target it may run on; ``ssh`` only for ``run`` tools (``checks.check_tool``)."""
    placement: Where | None = None
    """Optional, and only what it does already says: ``target`` for ``run``, ``worker`` for ``http``."""
    before: CallSpec | None = None
    """A read-only call run just before the change, printing a JSON object: ``{before.X}``."""
    check: CheckSpec | None = None
    """How the change is checked, right after it runs (shown on the card: "Then checks")."""
    undo: CallSpec | None = None
    """How the change is taken back (shown on the card: "Undo")."""
    no_undo: str | None = Field(default=None, min_length=1)
    """Why the change cannot be taken back (shown on the card: "No undo")."""

    @field_validator("targets")
    @classmethod
    def _no_duplicates(cls, value: list[TargetKind]) -> list[TargetKind]:
        twice = sorted({kind for kind in value if value.count(kind) > 1})
        if twice:
            raise ValueError(f"{', '.join(repr(kind) for kind in twice)} listed more than once")
        return value
