"""Load the inventory of targets (``CHATOPS_INVENTORY_FILE``): all targets or none.

The public API: ``load_inventory`` here, and the types it returns, re-exported from
``tools.inventory_types`` (``Target``, ``Inventory``, ``parse_selector``...) so callers import
everything from ``tools.inventory``.

Loading is all or nothing, like the tool catalog: every mistake in the file is collected and
raised as one ``InventoryError`` whose lines each name the file, the target (its name, or
``targets[3]`` when it has none) and the field, so one restart shows every fix to make. Without a
file there is one implicit ``local`` target and ``Inventory.implicit`` says so.

The file is chatops' YAML (a top-level ``targets:`` list) or a static Ansible inventory, YAML or
INI, told apart by content (``tools.inventory_ansible`` turns Ansible hosts into raw targets of
our format, validated here by the same pydantic models, so both formats obey one set of rules).
SSH key and known_hosts paths must be absolute, but whether they exist is not checked here: the
host that connects (a worker, or a runner elsewhere) need not be the one that loads the file.
YAML reads unquoted ``yes``/``no``/``on`` as booleans and ``0123`` as a number; label values
become the text ``true``/``false`` or the number's digits: quote them to keep them as written.
"""

from __future__ import annotations

import ipaddress
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from tools import inventory_ansible
from tools.config_errors import did_you_mean, field_message
from tools.config_files import item_lines, yaml_problem
from tools.errors import InventoryError
from tools.inventory_types import (
    HEALTH_SERVICE,
    LABEL_PATTERN,
    LABEL_RULE,
    MAX_HEALTH,
    MAX_WATCH,
    NAME_PATTERN,
    NAME_RULE,
    VIAS,
    Inventory,
    KubeTarget,
    Selector,
    SshDefaults,
    Target,
    Via,
    health_url_ok,
    parse_selector,
    quoted,
    shown,
    via_problems,
    watch_path_ok,
)
from tools.ssh import SshConfig

__all__ = [
    "Inventory",
    "KubeTarget",
    "Selector",
    "SshConfig",
    "SshDefaults",
    "Target",
    "Via",
    "load_inventory",
    "parse_selector",
]

_HOST_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,252}")
_USER_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_NAMESPACE_PATTERN = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
_CONTEXT_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/@+-]{0,252}")
MAX_FILE_BYTES = 4 * 1024 * 1024
_DYNAMIC = "dynamic inventories (plugins, scripts) are not supported; export a static one with ansible-inventory --list --yaml"


def load_inventory(path: Path | None, *, ssh_defaults: SshDefaults | None = None) -> Inventory:
    """Read and check every target of ``path``; raises one ``InventoryError`` listing each problem.

    ``None``: no inventory configured, one implicit ``local`` target. ``ssh_defaults`` fills an SSH
    target's missing user, key file and known_hosts (Ansible hosts rarely name them all).
    """
    if path is None:
        return Inventory.implicit_local()
    where = str(path)
    entries, problems = _entries(path)
    targets: list[Target] = []
    for entry in entries:
        target, target_problems = _build(entry, ssh_defaults or SshDefaults())
        problems += target_problems
        targets += [target] if target is not None else []
    problems += _cross_problems(entries)
    if not problems and not targets:
        problems.append(
            "no targets: the file lists none (expected a 'targets:' list with at least one target)"
        )
    if problems:
        raise InventoryError(where, problems)
    return Inventory(targets=tuple(targets))


@dataclass(frozen=True)
class _Entry:
    """One raw target: who it is in messages, where it is (``targets[2] (line 9)``, ``host web01``)."""

    label: str
    position: str
    data: Any
    fields: Mapping[str, str] = field(default_factory=dict)  # our field path -> the name the file uses

    def problem(self, field_path: str, message: str) -> str:
        return f"{self.label}: {self.fields.get(field_path, field_path)}: {message}"


def _entries(path: Path) -> tuple[list[_Entry], list[str]]:
    """The raw targets of the file, whichever format it is in, and the problems of its shape."""
    document = _read_document(path)  # raises InventoryError: unreadable, a script, bad YAML...
    data = document.data
    if isinstance(data, dict) and "targets" in data and not inventory_ansible.is_group(data["targets"]):
        return _our_entries(data, document.item_lines)
    if isinstance(data, dict) and "plugin" in data:
        return [], [f"'plugin:' names an Ansible inventory plugin: {_DYNAMIC}"]
    if isinstance(data, dict) and inventory_ansible.is_ansible_yaml(data):
        return _ansible_entries(*inventory_ansible.read_ansible_yaml(data))
    if isinstance(data, dict) and data:
        typo = any(did_you_mean(key, ["targets"]) for key in data)
        return [], [
            "unknown format: expected a top-level 'targets:' list, or an Ansible inventory (all:, or "
            "groups with hosts:/children:/vars:)" + (" (did you mean 'targets'?)" if typo else "")
        ]
    if not isinstance(data, dict) and inventory_ansible.looks_like_ini(document.text):
        return _ansible_entries(*inventory_ansible.read_ansible_ini(document.text))
    if document.yaml_error:
        return [], [document.yaml_error]
    if not data:
        return [], ["no targets: the file is empty (expected a top-level 'targets:' list)"]
    return [], ["the top level must be a mapping with a 'targets:' list (or an Ansible inventory)"]


def _our_entries(data: dict[Any, Any], item_lines: list[int]) -> tuple[list[_Entry], list[str]]:
    problems = [
        f"{shown(str(key))}: unknown top-level key (only 'targets')" for key in data if key != "targets"
    ]
    raw = data["targets"]
    if raw is None or raw == []:
        return [], [*problems, "no targets: 'targets:' is empty"]
    if not isinstance(raw, list):
        return [], [*problems, "targets: must be a list of targets (each '- name: ...')"]
    entries = []
    for index, item in enumerate(raw):
        position = f"targets[{index}]" + (f" (line {item_lines[index]})" if index < len(item_lines) else "")
        name = item.get("name") if isinstance(item, dict) else None
        label = f"target {shown(name)}" if isinstance(name, str) and name else f"target {position}"
        entries.append(_Entry(label, position, item))
    return entries, problems


def _ansible_entries(
    hosts: list[inventory_ansible.AnsibleHost], problems: list[str]
) -> tuple[list[_Entry], list[str]]:
    entries = []
    for host in hosts:
        position = f"host {shown(host.name)}" + (f" (line {host.line})" if host.line is not None else "")
        entries.append(_Entry(position, position, host.target, inventory_ansible.FIELD_NAMES))
    return entries, problems


@dataclass(frozen=True)
class _Document:
    text: str
    data: Any  # the YAML value; None when empty or when it does not parse as YAML
    yaml_error: str | None = None
    item_lines: list[int] = field(default_factory=list)  # the line of each 'targets:' item


def _read_document(path: Path) -> _Document:
    """The file's text and YAML value; a file we must not read is an ``InventoryError`` at once."""
    try:
        info = path.stat()
        if stat.S_ISDIR(info.st_mode):
            raise _refused(path, "is a directory: inventory directories are not supported; name one file")
        if not stat.S_ISREG(info.st_mode):  # a FIFO or a device would block or never end
            raise _refused(path, "is not a regular file")
        if info.st_mode & 0o111:
            raise _refused(path, f"is executable: {_DYNAMIC}")
        if info.st_size > MAX_FILE_BYTES:
            raise _refused(path, f"is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise _refused(path, f"cannot read the file: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise _refused(path, f"is not UTF-8 text (byte {exc.start})") from exc
    if text.startswith("#!"):
        raise _refused(path, f"starts with '#!', a script: {_DYNAMIC}")
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        return _Document(text, None, yaml_problem(exc))
    except RecursionError:
        return _Document(text, None, "invalid YAML: nested too deeply")
    finally:
        loader.dispose()
    return _Document(text, data, None, item_lines(node, ("targets",)))


def _refused(path: Path, message: str) -> InventoryError:
    return InventoryError(str(path), [message])


def _scalar_text(value: Any) -> Any:
    """YAML numbers and booleans become text; a list or mapping is refused (labels are flat)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if value is None:
        raise ValueError("is empty: give a value")
    if not isinstance(value, str):
        raise ValueError("must be a single value (text, number or true/false), not a list or mapping")
    return value


def _matching(pattern: re.Pattern[str], rule: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if not pattern.fullmatch(value):
            raise ValueError(f"{quoted(value)} {rule}")
        return value

    return check


def _host(value: str) -> str:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return _matching(_HOST_PATTERN, "must be a host name or IP address (no spaces, no leading '-')")(
            value
        )


def _absolute(value: Path) -> Path:
    if not value.is_absolute() or "\x00" in str(value):
        raise ValueError("must be an absolute path (it is read on the host that connects; not checked here)")
    return value


def _watch_path(value: Path) -> Path:
    if not watch_path_ok(value):
        raise ValueError("must be an absolute path without '..' (a file or a directory on the target)")
    return value


LabelText = Annotated[
    str, BeforeValidator(_scalar_text), AfterValidator(_matching(LABEL_PATTERN, LABEL_RULE))
]
AbsolutePath = Annotated[Path, AfterValidator(_absolute)]
WatchPath = Annotated[Path, AfterValidator(_watch_path)]
HealthService = Annotated[
    str, AfterValidator(_matching(HEALTH_SERVICE, "must be a service name: letters, digits, '@:._-'"))
]


def _health_url(value: str) -> str:
    if not health_url_ok(value):
        raise ValueError(
            "must be an http:// or https:// URL with a host, no user or password, no spaces "
            "(the egress policy decides where it may go)"
        )
    return value


HealthUrl = Annotated[str, AfterValidator(_health_url)]
UserName = Annotated[
    str, AfterValidator(_matching(_USER_PATTERN, "must be a user name: letters, digits, '_', '.', '-'"))
]


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _SshSpec(_Spec):
    host: Annotated[str, AfterValidator(_host)]
    port: int = Field(22, ge=1, le=65535, strict=True)
    user: UserName | None = None
    key_file: AbsolutePath | None = None
    known_hosts: AbsolutePath | None = None
    connect_timeout: float = Field(10.0, gt=0, le=300)


class _KubeSpec(_Spec):
    context: (
        Annotated[str, AfterValidator(_matching(_CONTEXT_PATTERN, "must be a kubeconfig context name"))]
        | None
    ) = None
    namespace: Annotated[
        str,
        AfterValidator(_matching(_NAMESPACE_PATTERN, "must be a namespace: lowercase letters, digits, '-'")),
    ] = "default"


class _TargetSpec(_Spec):
    name: Annotated[str, AfterValidator(_matching(NAME_PATTERN, NAME_RULE))]
    via: Via
    labels: dict[LabelText, LabelText] = Field(default_factory=dict)
    ssh: _SshSpec | None = None
    kubernetes: _KubeSpec | None = None
    watch: list[WatchPath] = Field(default_factory=list, max_length=MAX_WATCH)
    health: dict[HealthService, HealthUrl] = Field(default_factory=dict, max_length=MAX_HEALTH)


_KNOWN_KEYS = sorted({*_TargetSpec.model_fields, *_SshSpec.model_fields, *_KubeSpec.model_fields})


def _build(entry: _Entry, defaults: SshDefaults) -> tuple[Target | None, list[str]]:
    """The target of one raw entry, or the problems of each of its fields."""
    if not isinstance(entry.data, dict):
        return None, [f"{entry.label}: must be a mapping (name, via, labels, ssh, kubernetes, watch, health)"]
    try:
        spec = _TargetSpec.model_validate(entry.data)
    except ValidationError as exc:
        return None, [entry.problem(where, message) for where, message in _describe_errors(exc)]
    problems = [
        entry.problem(where, message) for where, message in via_problems(spec.via, spec.ssh, spec.kubernetes)
    ]
    ssh = _ssh_config(spec.ssh, defaults, entry, problems) if spec.ssh and spec.via == "ssh" else None
    if problems:
        return None, problems
    kube = KubeTarget(spec.kubernetes.context, spec.kubernetes.namespace) if spec.kubernetes else None
    return Target(spec.name, spec.via, spec.labels, ssh, kube, tuple(spec.watch), spec.health), []


def _ssh_config(
    spec: _SshSpec, defaults: SshDefaults, entry: _Entry, problems: list[str]
) -> SshConfig | None:
    """The SSH block with the defaults filled in; each value still missing is a problem."""
    chosen = {
        "user": spec.user or defaults.user or None,
        "key_file": spec.key_file or defaults.key_file,
        "known_hosts": spec.known_hosts or defaults.known_hosts,
    }
    for key, value in chosen.items():
        if value is None:
            problems.append(
                entry.problem(f"ssh.{key}", f"not set, and no default (CHATOPS_SSH_{key.upper()})")
            )
    if isinstance(chosen["user"], str) and not _USER_PATTERN.fullmatch(chosen["user"]):
        problems.append(
            entry.problem("ssh.user", f"the default user {quoted(chosen['user'])} is not a user name")
        )
    user, key_file, known_hosts = chosen["user"], chosen["key_file"], chosen["known_hosts"]
    if not (isinstance(user, str) and isinstance(key_file, Path) and isinstance(known_hosts, Path)):
        return None
    return SshConfig(spec.host, user, key_file, known_hosts, spec.port, spec.connect_timeout)


def _describe_errors(exc: ValidationError) -> list[tuple[str, str]]:
    """(field path, message) for each pydantic error, in words an operator can act on."""
    described = []
    for error in exc.errors():
        parts = [str(part) for part in error["loc"]]
        is_key = parts[-1:] == ["[key]"]
        parts = parts[:-1] if is_key else parts
        where = ".".join(part if LABEL_PATTERN.fullmatch(part) else shown(part) for part in parts)
        message = field_message(error, known_keys=_KNOWN_KEYS, choices=VIAS)
        described.append((where or "(target)", f"the label key {message}" if is_key else message))
    return described


def _cross_problems(entries: list[_Entry]) -> list[str]:
    """What no single entry shows: two with one name, two local ones (read raw: valid or not)."""
    by_name: dict[str, list[_Entry]] = {}
    local: list[str] = []
    for entry in entries:
        name = entry.data.get("name") if isinstance(entry.data, dict) else None
        if isinstance(name, str) and name:
            by_name.setdefault(name, []).append(entry)
            local += [shown(name)] if entry.data.get("via") == "local" else []
    problems = [
        f"target {shown(name)}: name: used by more than one target ({' and '.join(e.position for e in found)})"
        for name, found in by_name.items()
        if len(found) > 1
    ]
    if len(local) > 1:
        problems.append(
            f"target {local[1]}: via: at most one target may be via: local (found {', '.join(local)})"
        )
    return problems
