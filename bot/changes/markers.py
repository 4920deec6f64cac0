"""Deploy markers from outside: a body becomes one ``deploy`` change per target it names.

Three shapes reach the web process (``bot.web.change_receiver``, docs/CHANGES.md "Deploy markers"):
ours (``POST /changes``, parsed here), GitHub's ``deployment_status`` (``bot.changes.github``) and
the Argo CD notifications template we document (``bot.changes.argocd``). Each parser answers
``Markers``: the changes to store, or why the delivery is acknowledged and ignored (a ping, a
deployment still running). A body that cannot be taken raises ``MarkerError`` with the status and
a reason naming the field: 400 malformed, 413 too large, 422 targets the inventory does not have.

Targets are resolved against the inventory only: a name it does not know, or labels matching
none of its targets, is a 422 naming it, and nothing is stored, so a marker never creates a
journal key of its own (the journal's ``key_of`` refuses such a target too). Every text is
untrusted: ``Change.bounded`` cuts it to one line and its bound before it is stored; showing it
inert is the readers' part (Slack rendering, the model's quoting).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.errors import MarkerError
from tools.changes.record import DEPLOY, Change
from tools.inventory_types import Inventory, Target

MAX_BODY_BYTES = 16 * 1024  # ours and Argo CD's: a few fields; GitHub's is bounded by the web server
MAX_TARGETS = 100  # names in one marker
MAX_LABELS = 10
MAX_NAME = 200  # a target name or label as given, before it is looked up
FUTURE_SKEW_SECONDS = 5 * 60  # an ``at`` later than now by more than this is refused
FIELDS = ("what", "service", "version", "targets", "labels", "who", "url", "at")


@dataclass(frozen=True)
class Markers:
    """What one delivery asks: ``changes`` to store, or ``ignored`` (why it is acknowledged and
    nothing is stored). ``identity``: what names the delivery inside a *signed* body (GitHub's
    status id), so a replay with another delivery header is still the same delivery."""

    changes: tuple[Change, ...] = ()
    ignored: str = ""
    identity: str = ""


def refuse(reason: str, status: int = 400) -> MarkerError:
    return MarkerError(status, reason)


def json_object(body: bytes, *, limit: int | None = MAX_BODY_BYTES) -> dict[str, Any]:
    if limit is not None and len(body) > limit:
        raise refuse(f"the body is {len(body)} bytes, over the {limit} a marker may have", 413)
    try:
        raw = json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise refuse(f"not JSON: {error}") from error
    if not isinstance(raw, dict):
        raise refuse("the body must be a JSON object")
    return raw


def text(raw: Mapping[str, Any], name: str, *, required: bool = False, where: str = "") -> str:
    """``raw[name]`` as text ('' when absent or null, unless ``required``)."""
    value = raw.get(name)
    if value is None or value == "":
        if required:
            raise refuse(f"{where}{name}: required, a non-empty string")
        return ""
    if not isinstance(value, str):
        raise refuse(f"{where}{name}: must be a string, not {_type(value)}")
    return value


def mapping(raw: Mapping[str, Any], name: str, *, where: str = "") -> Mapping[str, Any]:
    value = raw.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise refuse(f"{where}{name}: must be an object, not {_type(value)}")
    return value


def rfc3339(value: str, name: str) -> float:
    """Unix seconds of an RFC 3339 time (``2026-12-03T22:10:00Z``; an offset is required)."""
    try:
        parsed = datetime.fromisoformat(value.strip().replace("z", "Z").replace("Z", "+00:00"))
        at = parsed.timestamp()
    except (ValueError, OverflowError, OSError) as error:
        raise refuse(f"{name}: {_quoted(value)} is not an RFC 3339 time (2026-12-03T22:10:00Z)") from error
    if parsed.tzinfo is None:
        raise refuse(f"{name}: {_quoted(value)} has no time zone (end it with Z or +00:00)")
    if not math.isfinite(at) or at < 0:
        raise refuse(f"{name}: {_quoted(value)} is not a time after 1970")
    return at


def not_future(at: float, now: float, name: str = "at") -> float:
    if at > now + FUTURE_SKEW_SECONDS:
        raise refuse(f"{name}: {at - now:.0f} s in the future; a marker says what happened")
    return at


def web_url(value: str, name: str = "url") -> str:
    if value and not value.lower().startswith(("https://", "http://")):
        raise refuse(f"{name}: must be an http(s) URL")
    return value


def named_targets(inventory: Inventory, value: Any, name: str = "targets") -> list[Target]:
    """The inventory's targets a list of names means; a name it does not have is a 422."""
    if not isinstance(value, list) or not value:
        raise refuse(f"{name}: must be a non-empty list of target names")
    if len(value) > MAX_TARGETS:
        raise refuse(f"{name}: {len(value)} names, over the {MAX_TARGETS} a marker may have")
    found: dict[str, Target] = {}
    for item in value:
        if not isinstance(item, str):
            raise refuse(f"{name}: each must be a target name (a string), not {_type(item)}")
        target = inventory.get(item)
        if target is None:
            raise refuse(f"{name}: no target {_quoted(item)} in the inventory: nothing stored", 422)
        found[target.name] = target
    return list(found.values())


def labelled_targets(inventory: Inventory, value: Any, name: str = "labels") -> list[Target]:
    """Every target of the inventory carrying all of these labels; none is a 422."""
    if not isinstance(value, dict) or not value:
        raise refuse(f'{name}: must be a non-empty object of label values ({{"env": "prod"}})')
    if len(value) > MAX_LABELS:
        raise refuse(f"{name}: {len(value)} labels, over the {MAX_LABELS} a marker may have")
    for key, item in value.items():
        if not isinstance(item, str):
            raise refuse(f"{name}.{_quoted(key)}: must be a string, not {_type(item)}")
    matched = [target for target in inventory if _carries(target, value)]
    if not matched:
        shown = ",".join(f"{_quoted(key)}={_quoted(item)}" for key, item in value.items())
        raise refuse(f"{name}: {shown} matches no target of the inventory: nothing stored", 422)
    return matched


def deploys(
    targets: Sequence[Target], *, what: str, at: float, source: str, who: str = "", url: str = ""
) -> tuple[Change, ...]:
    """One bounded ``deploy`` change per target."""
    return tuple(
        Change(target=target.name, kind=DEPLOY, at=at, what=what, who=who, url=url, source=source).bounded()
        for target in targets
    )


def parse_marker(body: bytes, inventory: Inventory, now: float) -> Markers:
    """``POST /changes``: ``{"what", "service", "version", "targets" | "labels", "who", "url", "at"}``."""
    raw = json_object(body)
    unknown = [key for key in raw if key not in FIELDS]
    if unknown:
        shown = ", ".join(_quoted(key) for key in unknown[:5])
        raise refuse(f"unknown field(s) {shown}; a marker has {', '.join(FIELDS)}")
    what = text(raw, "what", required=True)
    extras = [part for part in (text(raw, "service"), text(raw, "version")) if part and part not in what]
    if extras:
        what = f"{what} ({' '.join(extras)})"
    if ("targets" in raw) == ("labels" in raw):
        raise refuse('give exactly one of "targets" (a list of names) and "labels" (an object)')
    choose: Callable[[Inventory, Any], list[Target]] = named_targets if "targets" in raw else labelled_targets
    targets = choose(inventory, raw["targets" if "targets" in raw else "labels"])
    at = not_future(rfc3339(text(raw, "at"), "at"), now) if raw.get("at") is not None else now
    who, url = text(raw, "who"), web_url(text(raw, "url"))
    return Markers(deploys(targets, what=what, at=at, source="webhook", who=who, url=url))


def _carries(target: Target, labels: Mapping[str, str]) -> bool:
    return all(target.labels.get(key) == value for key, value in labels.items())


def _quoted(value: str) -> str:
    """A caller's text in an error message: short, one line, repr-quoted."""
    return repr(" ".join(str(value).split())[: MAX_NAME // 4])


def _type(value: Any) -> str:
    return {dict: "an object", list: "a list", bool: "a boolean", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )
