"""The targets of the inventory and how a request selects them (``tools.inventory`` loads them).

A target is a named machine or cluster and how it is reached (``via``):

* ``runner``: a chatops runner process on that host takes its calls from a queue named after it;
* ``ssh``: catalog commands run over SSH (``ssh: {host, port, user, key_file, known_hosts}``);
* ``kubernetes``: the Kubernetes tools with the target's ``context`` and ``namespace``;
* ``local``: the worker's own host (at most one such target).

Names are strict because they become RQ queue names and appear in Slack: lowercase letters,
digits, ``.``, ``_``, ``-``, at most 63. Labels (``env=prod``, ``role=web``) let a person or the
model name several targets at once (``parse_selector("env=prod,role=web")``: every pair must
match); ``env`` of exactly ``prod`` or ``production`` marks a production target (the same rule
as ``agent.tooling.CallTarget``). Everything here is immutable: a target's labels are a
read-only copy, so no caller can relabel a target another caller holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal, get_args
from urllib.parse import urlsplit

from tools.errors import InventoryError, TargetSelectorError
from tools.ssh import SshConfig

Via = Literal["runner", "ssh", "kubernetes", "local"]
VIAS: tuple[str, ...] = get_args(Via)
PRODUCTION_ENVS = frozenset({"prod", "production"})

NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
LABEL_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./-]{0,62}")
NAME_RULE = (
    "must be 1-63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit "
    "(no spaces, '*' or uppercase: it names a queue and appears in Slack)"
)
LABEL_RULE = "must be 1-63 letters, digits, '.', '_', '/' or '-', starting with a letter or digit"
MAX_SELECTOR_LENGTH = 512
MAX_WATCH = 64  # watched paths per target (each a file or a tree, itself capped in files)
WATCH_RULE = f"must be a list of at most {MAX_WATCH} absolute paths (no '..')"
MAX_HEALTH = 64  # health URLs per target
HEALTH_SERVICE = re.compile(r"[A-Za-z0-9][A-Za-z0-9@:._-]{0,99}")
HEALTH_RULE = (
    f"must map at most {MAX_HEALTH} service names (letters, digits, '@:._-') to http:// or https:// URLs "
    "with a host, no user or password, no spaces, at most 2000 characters"
)


@dataclass(frozen=True)
class KubeTarget:
    """The kubeconfig context (``None``: kubectl's current one) and namespace of a target."""

    context: str | None
    namespace: str = "default"


@dataclass(frozen=True)
class SshDefaults:
    """What an SSH target that does not say gets (from the settings ``CHATOPS_SSH_*``)."""

    user: str | None = None
    key_file: Path | None = None
    known_hosts: Path | None = None


@dataclass(frozen=True)
class Target:
    """One place tools can act on. ``labels`` is a read-only copy of what was given."""

    name: str
    via: Via
    labels: Mapping[str, str] = field(default_factory=dict, hash=False)
    ssh: SshConfig | None = None
    kubernetes: KubeTarget | None = None
    watch: tuple[Path, ...] = ()  # files and trees whose changes its runner records (tools.changes)
    health: Mapping[str, str] = field(default_factory=dict, hash=False)
    """Service -> the URL that answers healthy when it runs: a restart's check requests it too
    (through the egress policy, like any ``http_check``; ``tools.verification.restart_health``)."""

    def __post_init__(self) -> None:
        # A target built in code obeys the file's rules: its name becomes a queue name.
        problems = [f"name: {quoted(self.name)} {NAME_RULE}"] if not NAME_PATTERN.fullmatch(self.name) else []
        problems += (
            [f"via: {quoted(str(self.via))} is not one of {', '.join(VIAS)}"] if self.via not in VIAS else []
        )
        problems += [
            f"labels: {quoted(text)} {LABEL_RULE}"
            for text in (*self.labels.keys(), *self.labels.values())
            if not LABEL_PATTERN.fullmatch(text)
        ]
        problems += [
            f"{where}: {message}" for where, message in via_problems(self.via, self.ssh, self.kubernetes)
        ]
        if len(self.watch) > MAX_WATCH or not all(watch_path_ok(path) for path in self.watch):
            problems.append(f"watch: {WATCH_RULE}")
        if not health_ok(self.health):
            problems.append(f"health: {HEALTH_RULE}")
        if problems:
            raise InventoryError(f"Target({self.name!r})", problems)
        object.__setattr__(self, "labels", MappingProxyType(dict(self.labels)))
        object.__setattr__(self, "health", MappingProxyType(dict(self.health)))

    def describe(self) -> str:
        """``web-03 (env=prod, role=web)``: the name and its labels, sorted by key."""
        if not self.labels:
            return self.name
        return f"{self.name} ({', '.join(f'{key}={value}' for key, value in sorted(self.labels.items()))})"

    @property
    def production(self) -> bool:
        return self.labels.get("env") in PRODUCTION_ENVS


def watch_path_ok(path: Path) -> bool:
    """An absolute path without ``..`` or a NUL: what a ``watch`` entry may be."""
    text = str(path)
    return path.is_absolute() and ".." not in path.parts and "\x00" not in text and len(text) <= 4096


def health_ok(health: Mapping[str, str]) -> bool:
    """A target's ``health``: service names to plain http(s) URLs (``HEALTH_RULE``)."""
    return len(health) <= MAX_HEALTH and all(
        isinstance(service, str) and HEALTH_SERVICE.fullmatch(service) and health_url_ok(url)
        for service, url in health.items()
    )


def health_url_ok(url: object) -> bool:
    """An http:// or https:// URL with a host and no credentials, spaces or control characters.
    Where it may go is the egress policy's to say when it is requested, as for any ``http_check``."""
    if not isinstance(url, str) or not 0 < len(url) <= 2000 or any(c.isspace() or ord(c) < 32 for c in url):
        return False
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises for a port that is not a number
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and "@" not in parts.netloc


def via_problems(via: str, ssh: object, kubernetes: object) -> list[tuple[str, str]]:
    """``ssh`` is required with ``via: ssh`` and refused otherwise; the same for ``kubernetes``."""
    problems = []
    for block, value in (("ssh", ssh), ("kubernetes", kubernetes)):
        if via == block and value is None:
            problems.append((block, f"required when via is {block}"))
        elif via != block and value is not None:
            problems.append((block, f"only allowed with via: {block} (this target is via: {via})"))
    return problems


@dataclass(frozen=True)
class Selector:
    """Which targets are meant: one ``name``, or every target carrying all of ``labels``."""

    name: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        # An empty selector would match every target: "restart everything" is never a default.
        if (self.name is None) == (not self.labels):
            raise TargetSelectorError(
                "a selector names one target or at least one label, not both or neither"
            )
        object.__setattr__(self, "labels", MappingProxyType(dict(self.labels)))

    def matches(self, target: Target) -> bool:
        if self.name is not None:
            return target.name == self.name
        return all(target.labels.get(key) == value for key, value in self.labels.items())

    def __str__(self) -> str:
        return self.name or ",".join(f"{key}={value}" for key, value in self.labels.items())


def parse_selector(text: str) -> Selector:
    """``web-03`` (a name; any case) or ``env=prod,role=web`` (labels, all must match).

    Raises ``TargetSelectorError`` (shown to the model or the person who typed it).
    """
    stripped = text.strip()
    if not stripped:
        raise TargetSelectorError("the target is empty: give a name (web-03) or labels (env=prod,role=web)")
    if len(stripped) > MAX_SELECTOR_LENGTH:
        raise TargetSelectorError(f"the target selector is longer than {MAX_SELECTOR_LENGTH} characters")
    if "=" not in stripped:
        name = stripped.lower()
        if not NAME_PATTERN.fullmatch(name):
            raise TargetSelectorError(f"{quoted(stripped)} is not a target name: a name {NAME_RULE}")
        return Selector(name=name)
    labels: dict[str, str] = {}
    for item in stripped.split(","):
        key, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not LABEL_PATTERN.fullmatch(key) or not LABEL_PATTERN.fullmatch(value):
            raise TargetSelectorError(
                f"{quoted(item.strip())} is not a label key=value: labels are written "
                f"env=prod,role=web, and each key and value {LABEL_RULE}"
            )
        if labels.get(key, value) != value:
            raise TargetSelectorError(f"label {key!r} is given twice with different values")
        labels[key] = value
    return Selector(labels=labels)


@dataclass(frozen=True)
class Inventory:
    """The targets, sorted by name; ``implicit``: no file, one ``local`` target named ``local``."""

    targets: tuple[Target, ...]
    implicit: bool = False
    _by_name: Mapping[str, Target] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.targets, key=lambda target: target.name))
        by_name = {target.name: target for target in ordered}
        if len(by_name) != len(ordered):
            raise InventoryError("Inventory(...)", ["two targets share a name"])
        object.__setattr__(self, "targets", ordered)
        object.__setattr__(self, "_by_name", MappingProxyType(by_name))

    @classmethod
    def implicit_local(cls) -> Inventory:
        return cls(targets=(Target(name="local", via="local"),), implicit=True)

    def get(self, name: str) -> Target | None:
        return self._by_name.get(name)

    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    def select(self, selector: str | Selector) -> list[Target]:
        """The targets a selector means, by name; an empty list when none matches."""
        chosen = parse_selector(selector) if isinstance(selector, str) else selector
        return [target for target in self.targets if chosen.matches(target)]

    def __iter__(self) -> Iterator[Target]:
        return iter(self.targets)

    def __len__(self) -> int:
        return len(self.targets)


def shown(text: str) -> str:
    """A name as written when it is plain, else quoted (spaces, newlines and controls visible)."""
    return text if re.fullmatch(r"[A-Za-z0-9_.:/@\[\]-]{1,253}", text) else quoted(text)


def quoted(text: str) -> str:
    """A value in a message: always quoted, and cut short so a hostile value cannot flood a log."""
    return repr(text[:80]) + ("..." if len(text) > 80 else "")
