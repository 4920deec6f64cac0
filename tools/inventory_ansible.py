"""Read a static Ansible inventory (YAML or INI) as chatops targets.

An operator who already keeps an Ansible inventory points ``CHATOPS_INVENTORY_FILE`` at it
instead of writing the list twice. This module only understands Ansible's *structure* (groups,
``children``, ``vars``, host ranges, variable precedence) and turns each host into a raw target
in chatops' own format (a dict like one entry of ``targets:``). ``tools.inventory`` validates
those with the same models as its own format, so both formats have one set of rules; the Ansible
variable a field came from is named in errors through ``FIELD_NAMES``.

Per host:

* ``via``: ``chatops_via`` (runner, ssh, kubernetes, local); else ``local`` when
  ``ansible_connection=local``; else ``ssh``.
* ``ssh``: ``ansible_host`` (default: the inventory hostname), ``ansible_port``, ``ansible_user``,
  ``ansible_ssh_private_key_file`` (or their older ``ansible_ssh_*`` spellings); whatever is
  missing is filled from the caller's SSH defaults by ``tools.inventory``.
* ``kubernetes``: ``chatops_kubernetes_context`` and ``chatops_kubernetes_namespace``.
* ``watch``: ``chatops_watch``, a list of absolute paths (the changes its runner records).
* labels: ``<group>: "true"`` for every group the host is in, directly or through ``children``
  (``all`` and ``ungrouped`` excluded), then the scalar variables ``env``, ``role``, ``team`` and
  ``region`` (a variable wins over a group of the same name; non-scalar values are ignored, as
  they are ordinary Ansible variables and not meant for us).

Variables follow Ansible's precedence: ``all`` < parent groups < child groups (by depth, then
group name) < host variables. Host ranges (``web[01:03]``, ``db-[a:c]``, with a stride
``[0:10:2]``) expand; numeric ranges keep their zero padding. Only static inventories are read:
inventory plugins (``plugin:``), scripts and Jinja templates in the variables we use are refused
with a message saying so, never half-understood.
"""

from __future__ import annotations

import re
import shlex
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tools.inventory_types import quoted, shown

LABEL_VARS = ("env", "role", "team", "region")
IMPLICIT_GROUPS = frozenset({"all", "ungrouped"})
GROUP_KEYS = ("hosts", "children", "vars")
# A typo like web[1:100000] must not allocate a million hosts before anyone reads an error.
MAX_HOSTS_PER_PATTERN = 1000
MAX_GROUP_DEPTH = 50

HOST_VARS = ("ansible_host", "ansible_ssh_host")
PORT_VARS = ("ansible_port", "ansible_ssh_port")
USER_VARS = ("ansible_user", "ansible_ssh_user")
KEY_VARS = ("ansible_ssh_private_key_file", "ansible_private_key_file")

FIELD_NAMES: Mapping[str, str] = {
    "name": "inventory hostname",
    "via": "chatops_via",
    "ssh.host": "ansible_host",
    "ssh.port": "ansible_port",
    "ssh.user": "ansible_user",
    "ssh.key_file": "ansible_ssh_private_key_file",
    "ssh.known_hosts": "known_hosts",
    "watch": "chatops_watch",
    "kubernetes.context": "chatops_kubernetes_context",
    "kubernetes.namespace": "chatops_kubernetes_namespace",
}
"""Our field path -> the Ansible variable it came from, for error messages."""

_SECTION = re.compile(r"\[([\w.-]+)(?::(\w*))?\]")
_HOST_LINE = re.compile(r"[\w\[][^\s=]*(?:\s+[^\s=]+=.*)?")
_VAR_LINE = re.compile(r"[^\s=]+\s*=.*")
_RANGE = re.compile(r"\[([^\]:]*):([^\]:]*)(?::([^\]]*))?\]")


@dataclass(frozen=True)
class AnsibleHost:
    """One Ansible host, converted: ``target`` is a raw target in chatops' format."""

    name: str  # the inventory hostname as written (after range expansion)
    target: dict[str, Any]
    line: int | None = None  # INI only: the first line naming the host


@dataclass
class _Group:
    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)
    vars: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Groups:
    """The groups of one inventory as read, before precedence is resolved."""

    groups: dict[str, _Group] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def group(self, name: str) -> _Group:
        return self.groups.setdefault(name, _Group())

    def add_hosts(self, group: str, pattern: str, host_vars: Mapping[str, Any], line: int | None) -> None:
        try:
            names = expand_host_pattern(pattern)
        except ValueError as exc:
            self.problems.append(f"{_at(line)}host pattern {quoted(pattern)}: {exc}")
            return
        for name in names:
            self.group(group).hosts.setdefault(name, {}).update(host_vars)
            if line is not None:
                self.lines.setdefault(name, line)

    def add_child(self, parent: str, child: str) -> None:
        if child not in self.group(parent).children:
            self.group(parent).children.append(child)
        self.group(child)


def is_ansible_yaml(data: Mapping[Any, Any]) -> bool:
    """Whether a YAML mapping is shaped like an Ansible inventory (``all:`` or groups)."""
    return "all" in data or any(is_group(body) for body in data.values())


def is_group(body: Any) -> bool:
    """Whether a YAML value is an Ansible group (a mapping with hosts:, children: or vars:)."""
    return isinstance(body, dict) and any(key in body for key in GROUP_KEYS)


def looks_like_ini(text: str) -> bool:
    """Whether the text is Ansible INI: a ``[group]`` section line, or only host and ``key=value`` lines.

    One section line is enough, so an INI file with a bad line is read as INI and the bad line
    is named, rather than being reported as broken YAML.
    """
    lines = [line.strip() for line in text.splitlines()]
    meaningful = [line for line in lines if line and line[0] not in "#;"]
    if any(_SECTION.fullmatch(line) for line in meaningful):
        return True
    return bool(meaningful) and all(
        _HOST_LINE.fullmatch(line) or _VAR_LINE.fullmatch(line) for line in meaningful
    )


def read_ansible_yaml(data: Mapping[Any, Any]) -> tuple[list[AnsibleHost], list[str]]:
    """The hosts of an Ansible YAML inventory, and the problems of its structure."""
    groups = _Groups()
    for name, body in data.items():
        if str(name) != "all":  # a top-level group is a child of all, as in Ansible
            groups.add_child("all", str(name))
        _read_yaml_group(groups, str(name), body, depth=0)
    return _resolve(groups)


def _read_yaml_group(groups: _Groups, name: str, body: Any, depth: int) -> None:
    if depth > MAX_GROUP_DEPTH:
        groups.problems.append(f"group {shown(name)}: children are nested more than {MAX_GROUP_DEPTH} deep")
        return
    group = groups.group(name)
    if body is None:
        return
    if not isinstance(body, dict):
        groups.problems.append(f"group {shown(name)}: must be a mapping with hosts:, children: or vars:")
        return
    for key in body:
        if key not in GROUP_KEYS:
            groups.problems.append(
                f"group {shown(name)}: unknown key {quoted(str(key))} (a group has hosts:, children:, vars:)"
            )
    for pattern, host_vars in _mapping(groups, name, "hosts", body.get("hosts")).items():
        if host_vars is not None and not isinstance(host_vars, dict):
            groups.problems.append(
                f"group {shown(name)}: host {shown(str(pattern))}: its variables must be a mapping"
            )
            continue
        groups.add_hosts(name, str(pattern), host_vars or {}, None)
    group.vars.update(_mapping(groups, name, "vars", body.get("vars")))
    for child, child_body in _mapping(groups, name, "children", body.get("children")).items():
        groups.add_child(name, str(child))
        _read_yaml_group(groups, str(child), child_body, depth + 1)


def _mapping(groups: _Groups, name: str, key: str, value: Any) -> dict[Any, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        groups.problems.append(f"group {shown(name)}: {key}: must be a mapping, not a {type(value).__name__}")
        return {}
    return value


def read_ansible_ini(text: str) -> tuple[list[AnsibleHost], list[str]]:
    """The hosts of an Ansible INI inventory, and the problems of its lines."""
    groups = _Groups()
    section, kind = "ungrouped", "hosts"
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        header = _SECTION.fullmatch(line)
        if header:
            section, kind = header.group(1), header.group(2) or "hosts"
            if kind not in GROUP_KEYS:
                groups.problems.append(
                    f"line {number}: unknown section {shown(f'[{section}:{kind}]')} "
                    "(expected [group], [group:vars] or [group:children])"
                )
            if section != "all":
                groups.add_child("all", section)
            continue
        _read_ini_line(groups, section, kind, line, number)
    return _resolve(groups)


def _read_ini_line(groups: _Groups, section: str, kind: str, line: str, number: int) -> None:
    try:
        words = shlex.split(line, comments=True)
    except ValueError as exc:
        groups.problems.append(f"line {number}: cannot split the line: {exc}")
        return
    if not words or kind not in GROUP_KEYS:
        return
    if kind == "vars":
        # shlex has removed quotes and a trailing comment; "key = value" is allowed, as in Ansible
        key, sep, value = " ".join(words).partition("=")
        if not sep or not key.strip():
            groups.problems.append(f"line {number}: [{section}:vars] lines are key=value")
            return
        groups.group(section).vars[key.strip()] = value.strip()
    elif kind == "children":
        groups.add_child(section, words[0])
    else:
        host_vars: dict[str, Any] = {}
        for word in words[1:]:
            key, sep, value = word.partition("=")
            if not sep or not key:
                groups.problems.append(
                    f"line {number}: host {shown(words[0])}: {quoted(word)} is not key=value"
                )
                return
            host_vars[key] = value
        pattern, port = _split_port(words[0])
        if port is not None:
            host_vars.setdefault("ansible_port", port)
        groups.add_hosts(section, pattern, host_vars, number)


def _split_port(pattern: str) -> tuple[str, str | None]:
    """``host:2222`` -> (``host``, ``2222``); a colon inside a range (``web[1:3]``) is not a port."""
    head, sep, tail = pattern.rpartition(":")
    if sep and _is_number(tail) and head.count("[") == head.count("]") and ":" not in head.split("]")[-1]:
        return head, tail
    return pattern, None


def expand_host_pattern(pattern: str) -> list[str]:
    """``web[01:03]`` -> web01, web02, web03 (several ranges multiply); raises ``ValueError``."""
    match = _RANGE.search(pattern)
    if match is None:
        if "[" in pattern or "]" in pattern:
            raise ValueError("a range is written [START:END] or [START:END:STEP]")
        return [pattern]
    head, rest = pattern[: match.start()], pattern[match.end() :]
    items = _range_items(match.group(1), match.group(2), match.group(3))
    tails = expand_host_pattern(rest)
    if len(items) * len(tails) > MAX_HOSTS_PER_PATTERN:
        raise ValueError(f"expands to more than {MAX_HOSTS_PER_PATTERN} hosts")
    return [head + item + tail for item in items for tail in tails]


def _range_items(start: str, end: str, step_text: str | None) -> list[str]:
    step = int(step_text) if step_text and _is_number(step_text) else (None if step_text else 1)
    if not step:
        raise ValueError(f"the step {step_text!r} must be a positive whole number")
    if _is_number(start) and _is_number(end):
        first, last = int(start), int(end)
        width = len(start) if start.startswith("0") and len(start) > 1 else 0
        if width and len(end) != width:
            raise ValueError("a zero-padded range needs START and END of the same length")
        if last < first or (last - first) // step >= MAX_HOSTS_PER_PATTERN:
            raise ValueError(f"the range must go up and hold at most {MAX_HOSTS_PER_PATTERN} hosts")
        return [str(number).zfill(width) for number in range(first, last + 1, step)]
    letters = string.ascii_letters
    if len(start) == 1 and len(end) == 1 and start in letters and end in letters and start <= end:
        return list(letters[letters.index(start) : letters.index(end) + 1 : step])
    raise ValueError(f"[{start}:{end}] is not a numeric or alphabetic range")


def _resolve(groups: _Groups) -> tuple[list[AnsibleHost], list[str]]:
    """Each host with its groups and its variables merged by Ansible's precedence."""
    depths = _depths(groups)
    parents: dict[str, set[str]] = {}
    for name, group in groups.groups.items():
        for child in group.children:
            parents.setdefault(child, set()).add(name)
    memberships: dict[str, set[str]] = {}
    host_vars: dict[str, dict[str, Any]] = {}
    ancestors = {name: _ancestors(name, parents) for name in groups.groups}
    for name, group in groups.groups.items():
        for host, values in group.hosts.items():
            memberships.setdefault(host, set()).update(ancestors[name])
            host_vars.setdefault(host, {}).update(values)
    hosts = []
    for host, member_of in memberships.items():
        ordered = sorted(member_of | {"all"}, key=lambda name: (depths.get(name, 0), name))
        merged: dict[str, Any] = {}
        for name in ordered:
            merged.update(groups.group(name).vars)
        merged.update(host_vars[host])
        labels = sorted(member_of - IMPLICIT_GROUPS)
        target = _to_target(host, labels, merged, groups.problems)
        hosts.append(AnsibleHost(name=host, target=target, line=groups.lines.get(host)))
    return hosts, groups.problems


def _depths(groups: _Groups) -> dict[str, int]:
    """Each group's longest distance from ``all`` (deeper groups override shallower ones)."""
    depths: dict[str, int] = {"all": 0}
    frontier, seen_steps = ["all"], 0
    while frontier:
        seen_steps += 1
        if seen_steps > MAX_GROUP_DEPTH:
            groups.problems.append(
                f"the groups' children form a cycle or nest more than {MAX_GROUP_DEPTH} deep"
            )
            break
        following = []
        for name in frontier:
            for child in groups.group(name).children:
                if depths.get(child, -1) < depths[name] + 1:
                    depths[child] = depths[name] + 1
                    following.append(child)
        frontier = following
    return depths


def _ancestors(name: str, parents: Mapping[str, set[str]]) -> set[str]:
    found, pending = {name}, [name]
    while pending:
        for parent in parents.get(pending.pop(), ()):
            if parent not in found:
                found.add(parent)
                pending.append(parent)
    return found


def _to_target(
    host: str, groups: Iterable[str], values: Mapping[str, Any], problems: list[str]
) -> dict[str, Any]:
    used = [*HOST_VARS, *PORT_VARS, *USER_VARS, *KEY_VARS, *LABEL_VARS, "chatops_via"]
    for name in used:
        if isinstance(values.get(name), str) and "{{" in values[name]:
            problems.append(f"host {shown(host)}: {name}: Jinja templates are not supported; write the value")
    connection = "local" if values.get("ansible_connection") == "local" else "ssh"
    via = values.get("chatops_via", connection)
    labels: dict[str, Any] = dict.fromkeys(groups, "true")
    labels.update({name: values[name] for name in LABEL_VARS if _is_scalar(values.get(name))})
    target: dict[str, Any] = {"name": host.lower(), "via": via, "labels": labels}
    if values.get("chatops_watch") is not None:
        target["watch"] = values["chatops_watch"]
    if via == "ssh":
        ssh = {
            "host": _first(values, HOST_VARS, host),
            "port": _port(_first(values, PORT_VARS, None)),
            "user": _first(values, USER_VARS, None),
            "key_file": _first(values, KEY_VARS, None),
        }
        target["ssh"] = {key: value for key, value in ssh.items() if value is not None}
    elif via == "kubernetes":
        kube = {
            "context": values.get("chatops_kubernetes_context"),
            "namespace": values.get("chatops_kubernetes_namespace"),
        }
        target["kubernetes"] = {key: value for key, value in kube.items() if value is not None}
    return target


def _first(values: Mapping[str, Any], names: Iterable[str], default: Any) -> Any:
    return next((values[name] for name in names if values.get(name) is not None), default)


def _port(value: Any) -> Any:
    """INI values are text; a port written ``2222`` is the number 2222 (anything else stays to be refused)."""
    return int(value) if isinstance(value, str) and _is_number(value) else value


def _is_number(text: str) -> bool:
    """ASCII digits only, and short: ``str.isdigit`` also accepts "²", which ``int`` refuses."""
    return text.isascii() and text.isdigit() and len(text) <= 9


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


def _at(line: int | None) -> str:
    return f"line {line}: " if line is not None else ""
