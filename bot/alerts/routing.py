"""Alert routes (``CHATOPS_ALERTS_FILE``): which channel an alert goes to, and what the bot does there.

The file::

    alerts:
      routes:
        - name: sre
          matchers: ['team="sre"', 'severity=~"critical|warning"']
          channel: C0ALERTS            # a Slack channel id: C or G, then uppercase letters and digits
          investigate: auto            # auto: start at once; button (the default): a person clicks
          target_label: instance       # optional: the label naming the host, mapped to a target
          storm: {max_runs: 5, window_seconds: 900}   # the defaults

Loading is all or nothing, like the inventory: every mistake is collected and raised as one
``AlertConfigError`` whose lines name the file, the route (its name, or ``routes[2]`` when it
has none, with its line) and the field, with "did you mean" for a misspelt key or value. A bad
matcher or regex is named by its text. ``matchers`` is required; ``[]`` (written on purpose)
matches everything, a catch-all for the last route.

Which route a notification takes: the first whose matchers all match its routing labels
(``Notification.routing_labels``: the common labels over the group labels, or the first alert's
labels when the sender gave neither). Routing on what every alert of the group shares keeps one
group in one channel whatever order its alerts come in; a label the group does not share is
missing, and a missing label matches as the empty string (as in Alertmanager). No route: ``None``,
and the caller acknowledges the webhook and logs it.

Which target an alert is about (``Route.target_for``): the host part of its ``target_label``
(``web-03:9100`` -> ``web-03``; a URL's host; a bracketed IPv6 address), matched to an inventory
name case-insensitively: the whole host first (``web-03.corp`` when the inventory has it), then
its first DNS label (``web-03.corp:9100`` -> ``web-03``), never a part of an IP address. Only a
name the inventory holds is ever returned, so a hostile label value cannot name anything else.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from bot.alerts.payloads import Alert, Notification
from bot.errors import AlertConfigError
from tools.alert_matchers import Matcher, parse_matcher_list
from tools.config_errors import did_you_mean, field_message
from tools.config_files import UnreadableConfigFile, read_yaml_file
from tools.errors import MatcherSyntaxError

Investigate = Literal["auto", "button"]
INVESTIGATE_MODES = ("auto", "button")
MAX_FILE_BYTES = 1024 * 1024
MAX_ROUTES = 500
_CHANNEL = re.compile(r"[CG][A-Z0-9]{6,20}")
_ROUTE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]{0,127}")


def _matching(pattern: re.Pattern[str], rule: str) -> AfterValidator:
    def check(value: str) -> str:
        if not pattern.fullmatch(value):
            raise ValueError(f"{_quoted(value)} {rule}")
        return value

    return AfterValidator(check)


def _parse_matcher_texts(value: object) -> object:
    """The YAML list of matcher texts, parsed; every bad one named in one message."""
    if not isinstance(value, list | tuple):
        raise ValueError("must be a list of matcher texts, e.g. ['team=\"sre\"'] ([] matches every alert)")
    matchers: list[Matcher] = []
    problems: list[str] = []
    for index, text in enumerate(value):
        if isinstance(text, Matcher):  # a route built in code
            matchers.append(text)
        elif not isinstance(text, str):
            problems.append(f"[{index}] must be a matcher text such as 'team=\"sre\"' (quote it in YAML)")
        else:
            try:
                matchers += parse_matcher_list(text)
            except MatcherSyntaxError as exc:
                problems.append(f"[{index}] {exc}")
    if problems:
        raise ValueError("; ".join(problems))
    return tuple(matchers)


class StormLimit(BaseModel):
    """At most ``max_runs`` investigations a route starts per ``window_seconds``."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    max_runs: int = Field(default=5, ge=1, le=1000)
    window_seconds: int = Field(default=900, ge=1, le=7 * 24 * 3600)


class Route(BaseModel):
    """One route of the file, checked; ``matchers`` are parsed (their regexes compiled)."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    name: Annotated[str, _matching(_ROUTE_NAME, "must be 1-63 letters, digits, '.', '_' or '-'")]
    matchers: Annotated[tuple[Matcher, ...], BeforeValidator(_parse_matcher_texts)]
    channel: Annotated[
        str,
        _matching(
            _CHANNEL, "is not a Slack channel id (C or G, then uppercase letters and digits: C0ALERTS)"
        ),
    ]
    investigate: Investigate = "button"
    target_label: Annotated[str, _matching(_LABEL_NAME, "is not a label name")] | None = None
    storm: StormLimit = Field(default_factory=StormLimit)

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(matcher.matches(labels) for matcher in self.matchers)

    def target_for(self, alert: Alert, inventory_names: Collection[str]) -> str | None:
        """The inventory target ``alert`` is about, from its ``target_label``; ``None`` if none."""
        if self.target_label is None:
            return None
        host = host_of(alert.labels.get(self.target_label, ""))
        if not host:
            return None
        by_lower = {name.lower(): name for name in inventory_names}
        if host in by_lower:
            return by_lower[host]
        first_label, dot, _ = host.partition(".")
        if dot and not _is_ip(host):
            return by_lower.get(first_label)
        return None


@dataclass(frozen=True)
class AlertRoutes:
    """The routes of the file, in order; ``path`` is ``None`` when no file is configured."""

    routes: tuple[Route, ...]
    path: Path | None = None

    def route_for(self, notification: Notification) -> Route | None:
        """The first route whose matchers match the notification's routing labels."""
        labels = notification.routing_labels
        return next((route for route in self.routes if route.matches(labels)), None)

    def get(self, name: str) -> Route | None:
        return next((route for route in self.routes if route.name == name), None)


def host_of(value: str) -> str:
    """The host part of a label value, lowercase: ``web-03:9100``, ``https://web-03/x``, ``[::1]:9100``."""
    text = value.strip().lower()
    if "://" in text:
        try:
            text = urlsplit(text).hostname or ""
        except ValueError:
            return ""
    elif text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:  # host:port; more colons is a bare IPv6 address
        text = text.partition(":")[0]
    return text.rstrip(".")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def load_routes(path: Path | None) -> AlertRoutes:
    """Read and check every route of ``path``; raises one ``AlertConfigError`` listing each problem.

    ``None``: no alerts file configured, no routes (every alert is unrouted).
    """
    if path is None:
        return AlertRoutes(routes=())
    try:
        data, item_lines = read_yaml_file(path, max_bytes=MAX_FILE_BYTES, items_at=("alerts", "routes"))
    except UnreadableConfigFile as unreadable:
        raise AlertConfigError(str(path), [unreadable.problem]) from unreadable
    raw_routes, problems = _raw_routes(data)
    routes: list[Route] = []
    for index, raw in enumerate(raw_routes):
        line = f" (line {item_lines[index]})" if index < len(item_lines) else ""
        label = _route_label(raw, index, line)
        if not isinstance(raw, dict):
            problems.append(f"{label}: must be a mapping (name, matchers, channel, ...)")
            continue
        try:
            routes.append(Route.model_validate(raw))
        except ValidationError as exc:
            problems += [f"{label}: {where}: {message}" for where, message in _describe(exc)]
    problems += _duplicate_names(raw_routes)
    if problems:
        raise AlertConfigError(str(path), problems)
    return AlertRoutes(routes=tuple(routes), path=path)


def _raw_routes(data: Any) -> tuple[list[Any], list[str]]:
    """The raw route items, and the problems of the file's shape around them."""
    shape = "a top-level 'alerts:' mapping with a 'routes:' list"
    if data is None:
        return [], [f"the file is empty: expected {shape}"]
    if not isinstance(data, dict):
        return [], [f"the top level must be {shape}"]
    problems = [
        f"{_quoted(str(key))}: unknown top-level key{did_you_mean(key, ['alerts'])}"
        for key in data
        if key != "alerts"
    ]
    alerts = data.get("alerts")
    if not isinstance(alerts, dict):
        return [], [*problems, f"alerts: must be a mapping with a 'routes:' list (expected {shape})"]
    problems += [
        f"alerts.{key}: unknown key{did_you_mean(key, ['routes'])}" for key in alerts if key != "routes"
    ]
    routes = alerts.get("routes")
    if not isinstance(routes, list) or not routes:
        return [], [*problems, "alerts.routes: must be a list of at least one route (each '- name: ...')"]
    if len(routes) > MAX_ROUTES:
        return [], [*problems, f"alerts.routes: more than {MAX_ROUTES} routes"]
    return routes, problems


def _route_label(raw: Any, index: int, line: str) -> str:
    name = raw.get("name") if isinstance(raw, dict) else None
    return (
        f"route {_quoted(name)}{line}" if isinstance(name, str) and name else f"route routes[{index}]{line}"
    )


def _duplicate_names(raw_routes: list[Any]) -> list[str]:
    names: list[str] = [
        raw["name"] for raw in raw_routes if isinstance(raw, dict) and isinstance(raw.get("name"), str)
    ]
    repeated = sorted({name for name in names if names.count(name) > 1})
    return [f"route {_quoted(name)}: name: used by more than one route" for name in repeated]


_KNOWN_KEYS = sorted({*Route.model_fields, *StormLimit.model_fields})


def _describe(exc: ValidationError) -> list[tuple[str, str]]:
    """(field path, message) per pydantic error, in words an operator can act on."""
    described = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "(route)"
        described.append((where, field_message(error, known_keys=_KNOWN_KEYS, choices=INVESTIGATE_MODES)))
    return described


def _quoted(text: str) -> str:
    """A value in a message: quoted, and cut short so a hostile value cannot flood a log."""
    return repr(text[:80]) + ("..." if len(text) > 80 else "")
