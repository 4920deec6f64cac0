"""``CHATOPS_POLICY_FILE``: the YAML policy, read strictly (docs/POLICY.md).

::

    policy:
      rules:
        - name: prod-needs-sre-leads
          match: {labels: {env: prod}, categories: [mutating, destructive]}
          approve: {groups: [S_SRE_LEADS], requester_may_approve: false}
      break_glass: {groups: [S_INCIDENT_COMMANDERS], minutes: 30}

Every mistake is reported at once, each naming the file, the rule (its name, or ``rules[2]``
with its line) and the field: ``PolicyConfigError``. ``chatops policy check`` prints them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent.tooling import ToolCategory
from bot.errors import PolicyConfigError
from bot.policy.rules import DEFAULTS_RULE, Approve, Audience, BreakGlass, Derived, Match, Policy, Rule
from tools.config_errors import did_you_mean, field_message
from tools.config_files import UnreadableConfigFile, read_yaml_file

MAX_FILE_BYTES = 256 * 1024
USER = re.compile(r"[UW][A-Z0-9_]{1,40}")
GROUP = re.compile(r"S[A-Z0-9_]{1,40}")
CHANNEL = re.compile(r"[CGD][A-Z0-9_]{1,40}")
NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")
CATEGORIES = tuple(c.value for c in ToolCategory)
Category = Literal["read_only", "mutating", "destructive"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _slack_ids(pattern: re.Pattern[str], what: str) -> AfterValidator:
    """A list field's check that every entry is a Slack ``what`` ID."""

    def check(values: list[str]) -> list[str]:
        bad = [v for v in values if not pattern.fullmatch(v)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a Slack {what} ID")
        return values

    return AfterValidator(check)


ChannelIds = Annotated[list[str], _slack_ids(CHANNEL, "channel")]
UserIds = Annotated[list[str], _slack_ids(USER, "user")]
GroupIds = Annotated[list[str], _slack_ids(GROUP, "user group")]


class MatchSpec(_Strict):
    labels: dict[str, str] = Field(default_factory=dict)
    targets: list[str] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)
    categories: list[Category] = Field(default_factory=list)
    channels: ChannelIds = Field(default_factory=list)


class WhoSpec(_Strict):
    users: UserIds = Field(default_factory=list)
    groups: GroupIds = Field(default_factory=list)


class RequestSpec(WhoSpec):
    channels: ChannelIds = Field(default_factory=list)


class ApproveSpec(WhoSpec):
    requester_may_approve: bool = True
    approvals: int = Field(default=1, ge=1, le=5)


class DerivedSpec(_Strict):
    """``derived: {approvals: N}``: N approvals in total for a derived call the rule matches."""

    approvals: int = Field(ge=1, le=6)


DERIVED_FORMS = "must be 'deny' or a mapping {approvals: N}"


class RuleSpec(_Strict):
    name: str
    match: MatchSpec = Field(default_factory=MatchSpec)
    request: RequestSpec | None = None
    approve: ApproveSpec | None = None
    deny: bool = False
    reason: str = Field(default="", max_length=300)
    derived: DerivedSpec | Literal["deny"] | None = None

    @field_validator("derived", mode="before")
    @classmethod
    def _derived(cls, value: object) -> object:
        """One clear message for a wrong ``derived:`` (not one per form it could have had)."""
        if value is None or value == "deny":
            return value
        if isinstance(value, str):
            raise ValueError(f"{DERIVED_FORMS}, not {value!r}{did_you_mean(value, ['deny'])}")
        if not isinstance(value, dict):
            raise ValueError(DERIVED_FORMS)
        try:
            return DerivedSpec.model_validate(value)
        except ValidationError as exc:
            errors = exc.errors()
            first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
            where = _where(first["loc"])
            raise ValueError(f"{where}: {_message(first)}") from None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME.fullmatch(value):
            raise ValueError("must be lowercase letters, digits, '-', '_' or '.' (up to 63)")
        if value == DEFAULTS_RULE:  # the name of CHATOPS_APPROVERS' requirement, which names no one's ID
            raise ValueError(f"'{DEFAULTS_RULE}' is reserved for CHATOPS_APPROVERS")
        return value

    def rule(self) -> Rule:
        m = self.match
        match = Match(
            labels=tuple(sorted(m.labels.items())),
            targets=tuple(m.targets),
            tools=tuple(m.tools),
            categories=frozenset(ToolCategory(c) for c in m.categories),
            channels=frozenset(m.channels),
        )
        request = (
            Audience(
                frozenset(self.request.users), tuple(self.request.groups), frozenset(self.request.channels)
            )
            if self.request is not None
            else None
        )
        approve = (
            Approve(
                Audience(frozenset(self.approve.users), tuple(self.approve.groups)),
                self.approve.requester_may_approve,
                self.approve.approvals,
            )
            if self.approve is not None
            else None
        )
        derived = None
        if isinstance(self.derived, DerivedSpec):
            derived = Derived(approvals=self.derived.approvals)
        elif self.derived == "deny":
            derived = Derived(deny=True)
        return Rule(self.name, match, request, approve, self.deny, self.reason, derived)


class BreakGlassSpec(WhoSpec):
    minutes: int = Field(default=30, ge=1, le=24 * 60)


KNOWN_KEYS = (
    *MatchSpec.model_fields,
    *RequestSpec.model_fields,
    *ApproveSpec.model_fields,
    *RuleSpec.model_fields,
    *DerivedSpec.model_fields,
    *BreakGlassSpec.model_fields,
)


def load_policy(path: Path | None, default_approvers: tuple[str, ...] = ()) -> Policy:
    """The policy of ``path`` (``None``: the built-in defaults, today's behaviour); one
    ``PolicyConfigError`` lists every problem."""
    if path is None:
        return Policy(default_approvers=default_approvers)
    try:
        data, lines = read_yaml_file(path, max_bytes=MAX_FILE_BYTES, items_at=("policy", "rules"))
    except UnreadableConfigFile as unreadable:
        raise PolicyConfigError(str(path), [unreadable.problem]) from unreadable
    problems: list[str] = []
    if not isinstance(data, dict) or set(data) != {"policy"} or not isinstance(data["policy"], dict):
        raise PolicyConfigError(
            str(path), ["the top level must be one 'policy:' mapping with a 'rules:' list"]
        )
    body: dict[str, Any] = data["policy"]
    for key in body:
        if key not in ("rules", "break_glass"):
            problems.append(f"policy.{key}: unknown key{did_you_mean(key, ['rules', 'break_glass'])}")
    raw_rules = body.get("rules") or []
    if not isinstance(raw_rules, list):
        raise PolicyConfigError(str(path), ["policy.rules: must be a list of rules"])
    rules: list[Rule] = []
    seen: dict[str, str] = {}
    for index, raw in enumerate(raw_rules):
        line = f" (line {lines[index]})" if index < len(lines) else ""
        name = raw.get("name") if isinstance(raw, dict) else None
        label = f"rule '{name}'{line}" if isinstance(name, str) and name else f"rules[{index}]{line}"
        if not isinstance(raw, dict):
            problems.append(f"{label}: must be a mapping (name, match, request, approve, deny, derived)")
            continue
        try:
            spec = RuleSpec.model_validate(raw)
        except ValidationError as exc:
            problems += [f"{label}: {_where(e['loc'])}: {_message(e)}" for e in exc.errors()]
            continue
        if spec.name in seen:
            problems.append(f"{label}: name: '{spec.name}' is also the name of {seen[spec.name]}")
        seen.setdefault(spec.name, label)
        if not spec.deny and spec.request is None and spec.approve is None and spec.derived is None:
            problems.append(
                f"{label}: says nothing: give it 'deny: true', a 'request:', an 'approve:' or a 'derived:'"
            )
        if spec.deny and (spec.request is not None or spec.approve is not None or spec.derived is not None):
            problems.append(
                f"{label}: deny: a deny rule has no 'request:', 'approve:' or 'derived:' (nothing is asked)"
            )
        rules.append(spec.rule())
    break_glass = None
    if "break_glass" in body:
        try:
            glass = BreakGlassSpec.model_validate(body["break_glass"])
            if not glass.users and not glass.groups:
                problems.append("break_glass: name the users or groups who may use it")
            break_glass = BreakGlass(tuple(glass.groups), frozenset(glass.users), glass.minutes)
        except ValidationError as exc:
            problems += [f"break_glass: {_where(e['loc'])}: {_message(e)}" for e in exc.errors()]
    if problems:
        raise PolicyConfigError(str(path), problems)
    return Policy(tuple(rules), default_approvers, break_glass, str(path))


_current: dict[tuple[str, int, int, tuple[str, ...]], Policy] = {}


def current_policy(path: Path | None, default_approvers: tuple[str, ...] = ()) -> Policy:
    """The policy file as it is now: read again whenever it changes (its mtime or size), so a
    process that decides (the web process at a click, the worker before an SSH or Kubernetes call)
    never decides from an older copy. A mistake in the changed file raises ``PolicyConfigError``:
    the caller refuses (fail closed)."""
    if path is None:
        return load_policy(None, default_approvers)
    info = path.stat()
    key = (str(path), info.st_mtime_ns, info.st_size, default_approvers)
    if key not in _current:
        _current.clear()
        _current[key] = load_policy(path, default_approvers)
    return _current[key]


def _where(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(rule)"


def _message(error: Any) -> str:
    return field_message(error, known_keys=KNOWN_KEYS, choices=CATEGORIES)
