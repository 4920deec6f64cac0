"""``alertmanager_alerts`` (read-only) and ``alertmanager_silence`` (mutating) on the operator's
Alertmanager (API v2).

Matchers come from the model, so they are parsed with a strict grammar before anything is sent
(``alertmanager_matchers``), and what is sent is the matcher re-rendered from what was parsed:
one ``filter`` parameter each, or the silence's JSON matchers, never the model's text as it came.

A silence is created only after a person approves the card, and ``createdBy`` is that person
(``confirmed_by``). The card (``describe_silence``) shows the exact request (matchers, duration,
comment) and the alerts it would silence now, fetched from Alertmanager with a short timeout
and a small body cap; when that fails the card says it could not list them.

Each alert is one line: severity, alertname, state (and what suppresses it), when it started
and how long ago, its other labels, its summary. The age is decoration (``stable_output`` has
the start time only), so loop detection sees an unchanged list as unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent.tooling import ToolCategory, ToolResult
from tools.alert_matchers import Matcher
from tools.base import FunctionTool, ToolContext, error_result
from tools.builtin.alertmanager_matchers import MatcherText, parse_matcher
from tools.builtin.observability_endpoint import (
    MAX_BODY_BYTES,
    Endpoint,
    cut_note,
    error_text,
    format_labels,
    quote,
    redacting,
    salvage_array,
)
from tools.errors import ToolCallError
from tools.placement import WORKER
from tools.text import human_duration

MAX_MATCHERS = 16
MAX_ALERTS_SHOWN = 40
MAX_PREVIEW_ALERTS = 10
OUTPUT_BUDGET_CHARS = 3500
MAX_SILENCE_MINUTES = 7 * 24 * 60
PREVIEW_TIMEOUT_SECONDS = 3.0
PREVIEW_MAX_BODY_BYTES = 256 * 1024
_SEVERITY_RANK = {"critical": 0, "page": 0, "error": 1, "high": 1, "warning": 2, "medium": 2, "info": 3}


class AlertsArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    filter: list[MatcherText] = Field(
        default_factory=list,
        max_length=MAX_MATCHERS,
        description='Label matchers every alert must match, e.g. ["severity=\\"critical\\"", "instance=~\\"web-.*\\""].',
    )
    active: bool = Field(default=True, description="Include active alerts.")
    silenced: bool = Field(default=True, description="Include silenced alerts.")
    inhibited: bool = Field(default=True, description="Include inhibited alerts.")


class SilenceArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    matchers: list[MatcherText] = Field(
        min_length=1,
        max_length=MAX_MATCHERS,
        description='Label matchers of the alerts to silence, e.g. ["alertname=\\"HighLoad\\"", "instance=\\"web-03:9100\\""].',
    )
    duration_minutes: int = Field(ge=1, le=MAX_SILENCE_MINUTES, description="How long the silence lasts.")
    comment: str = Field(min_length=1, max_length=500, description="Why (shown in Alertmanager).")

    @field_validator("comment")
    @classmethod
    def _plain_comment(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the comment must say why")
        if any((ord(char) < 32 and char not in "\n\t") or ord(char) == 127 for char in value):
            raise ValueError("the comment holds control characters")
        return value


def alertmanager_tools(endpoint: Endpoint) -> list[FunctionTool[Any]]:
    """``alertmanager_alerts`` (read-only, parallel) and ``alertmanager_silence`` (mutating)."""
    return [
        FunctionTool(
            redacting(endpoint, _list_alerts),
            AlertsArgs,
            name="alertmanager_alerts",
            description=(
                "List the alerts in Alertmanager, optionally only those matching label matchers: "
                "severity, name, state, since when, labels and summary, most severe first."
            ),
            parallel=True,
            timeout=20,
            placement=WORKER,
        ),
        FunctionTool(
            redacting(endpoint, _create_silence),
            SilenceArgs,
            name="alertmanager_silence",
            description=(
                "Silence the alerts matching label matchers in Alertmanager for some minutes "
                "(needs a person's approval; the card lists the alerts it would silence)."
            ),
            category=ToolCategory.MUTATING,
            timeout=20,
            command=lambda args: describe_silence(endpoint, args),
            placement=WORKER,
        ),
    ]


# -- listing --------------------------------------------------------------------------------------


def _list_alerts(endpoint: Endpoint, args: AlertsArgs, ctx: ToolContext) -> ToolResult:
    params = [("filter", parse_matcher(text).text()) for text in args.filter]
    params += [(flag, str(getattr(args, flag)).lower()) for flag in ("active", "silenced", "inhibited")]
    alerts, cut = fetch_alerts(endpoint, params, timeout=ctx.remaining(), tool_timeout=ctx.timeout)
    if not alerts:
        where = f" {', '.join(value for _, value in params[: len(args.filter)])}" if args.filter else ""
        return ToolResult(f"no alerts match{where}" + (f" ({cut})" if cut else ""))
    now = datetime.now(UTC)
    rows = sorted(alerts, key=_alert_order)
    states = _state_counts(rows)
    count = f"{len(rows)} alert" + ("s" if len(rows) != 1 else "")
    header = f"{count}{' read before the cut' if cut else ''} ({states}), most severe first:"
    lines = [(alert_line(alert, now), alert_line(alert, None)) for alert in rows]
    shown, stable = [header], [header]
    used = len(header)
    for line, line_stable in lines[:MAX_ALERTS_SHOWN]:
        used += len(line) + 1
        if len(shown) > 1 and used > OUTPUT_BUDGET_CHARS:
            break
        shown.append(line)
        stable.append(line_stable)
    more = len(lines) - (len(shown) - 1)
    tail = [f"... and {more} more alerts (add matchers to narrow the list)"] if more else []
    tail += [f"{cut}: add matchers to narrow the list"] if cut else []
    return ToolResult(output="\n".join(shown + tail), stable_output="\n".join(stable + tail))


def fetch_alerts(
    endpoint: Endpoint,
    params: Sequence[tuple[str, str]],
    *,
    timeout: float,
    max_body_bytes: int = MAX_BODY_BYTES,
    tool_timeout: float | None = None,
) -> tuple[list[dict[str, Any]], str | None]:
    """``GET /api/v2/alerts``: the alerts (those before the cut of an answer larger than the cap)
    and, when it was cut, a note saying so. Raises ``ToolCallError`` on an error answer."""
    response = endpoint.request(
        "GET",
        "/api/v2/alerts",
        params=params,
        timeout=timeout,
        max_body_bytes=max_body_bytes,
        tool_timeout=tool_timeout,
    )
    if response.status >= 400:
        raise ToolCallError(f"Alertmanager refused the request: {error_text(response)}")
    body = response.body.lstrip()
    if not body.startswith("["):
        raise ToolCallError(f"Alertmanager did not answer with a list of alerts: {error_text(response)}")
    if response.truncated:
        items, cut = salvage_array(body, 1), cut_note(response)
    else:
        try:
            items, cut = json.loads(body), None
        except (ValueError, RecursionError):
            raise ToolCallError("Alertmanager's answer is not valid JSON") from None
    return [item for item in items if isinstance(item, dict)], cut


def _labels(alert: dict[str, Any]) -> dict[str, Any]:
    labels = alert.get("labels")
    return labels if isinstance(labels, dict) else {}


def _alert_order(alert: dict[str, Any]) -> tuple[int, str, str]:
    labels = _labels(alert)
    severity = str(labels.get("severity", "")).lower()
    return (_SEVERITY_RANK.get(severity, 4), str(labels.get("alertname", "")), format_labels(labels))


def _state(alert: dict[str, Any]) -> str:
    status = alert.get("status")
    return str(status.get("state", "unknown")) if isinstance(status, dict) else "unknown"


def _state_counts(alerts: list[dict[str, Any]]) -> str:
    """``2 active, 1 suppressed`` (Alertmanager has three states; a hostile server more)."""
    counts: dict[str, int] = {}
    for alert in alerts:
        state = _bare(_state(alert), 20)
        counts[state] = counts.get(state, 0) + 1
    return ", ".join(f"{count} {state}" for state, count in sorted(counts.items())[:5])


def alert_line(alert: dict[str, Any], now: datetime | None) -> str:
    """``[critical] HighLoad active since 2025-05-01T12:00:00Z (5m 3s ago) {instance="..."} summary: "..."``
    (``now`` ``None``: without the age)."""
    labels = _labels(alert)
    severity = _bare(labels.get("severity", "none"), 20)
    name = _bare(labels.get("alertname", "(no alertname)"), 80)
    parts = [f"[{severity}] {name} {_state_text(alert)}", _since(alert.get("startsAt"), now)]
    parts.append(format_labels(labels, skip=("alertname", "severity")))
    annotations = alert.get("annotations")
    if isinstance(annotations, dict):
        summary = annotations.get("summary") or annotations.get("description")
        if summary:
            parts.append(f"summary: {quote(summary, 200)}")
    return " ".join(part for part in parts if part)


def _bare(value: object, limit: int) -> str:
    """A value escaped like ``quote`` but without the quotes (names, states, ids)."""
    return quote(value, limit)[1:-1]


def _state_text(alert: dict[str, Any]) -> str:
    state = _bare(_state(alert), 20)
    status = alert.get("status")
    if not isinstance(status, dict):
        return state
    why = []
    for key, label in (("silencedBy", "silenced by"), ("inhibitedBy", "inhibited by")):
        ids = status.get(key)
        if isinstance(ids, list) and ids:
            named = ", ".join(_bare(item, 40) for item in ids[:3])
            why.append(f"{label} {named}" + (f" and {len(ids) - 3} more" if len(ids) > 3 else ""))
    return f"{state} ({'; '.join(why)})" if why else state


def _since(started: object, now: datetime | None) -> str:
    if not isinstance(started, str):
        return ""
    try:
        when = datetime.fromisoformat(started)
        text = f"since {when.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"
    except (ValueError, OverflowError):  # not a time, or one at the edge of the calendar
        return f"since {quote(started, 40)}"
    if now is None or when.tzinfo is None:
        return text
    return f"{text} ({human_duration(max(0.0, (now - when).total_seconds()))} ago)"


# -- silencing ------------------------------------------------------------------------------------


def _create_silence(endpoint: Endpoint, args: SilenceArgs, ctx: ToolContext) -> ToolResult:
    approver = ctx.confirmed_by
    if approver is None:  # FunctionTool refuses first; kept so this function is never reached without one
        raise ToolCallError("alertmanager_silence runs only after a person approves it")
    matchers = [parse_matcher(text) for text in args.matchers]
    starts = datetime.now(UTC)
    ends = starts + timedelta(minutes=args.duration_minutes)
    payload = {
        "matchers": [matcher.api() for matcher in matchers],
        "startsAt": _iso(starts),
        "endsAt": _iso(ends),
        "createdBy": approver,
        "comment": args.comment,
    }
    response = endpoint.request(
        "POST",
        "/api/v2/silences",
        payload=payload,
        timeout=ctx.remaining(),
        max_body_bytes=64 * 1024,
        tool_timeout=ctx.timeout,
    )
    if response.status >= 400:
        return error_result(f"Alertmanager refused the silence: {error_text(response)}")
    try:
        silence_id = json.loads(response.body).get("silenceID")
    except (ValueError, RecursionError, AttributeError):
        silence_id = None
    if not isinstance(silence_id, str) or not silence_id:
        return error_result(f"Alertmanager did not say which silence it created: {error_text(response)}")
    return ToolResult(
        f"silence {quote(silence_id, 80)} created by {approver} for "
        f"{', '.join(m.text() for m in matchers)}; it ends at {_iso(ends)} "
        f"(in {args.duration_minutes} min). Comment: {quote(args.comment, 500)}"
    )


def describe_silence(endpoint: Endpoint, args: SilenceArgs) -> str:
    """The approval card's text: the exact request, and the alerts it would silence now."""
    matchers = [parse_matcher(text) for text in args.matchers]
    lines = [
        f"POST {endpoint.url('/api/v2/silences')}",
        f"matchers: {', '.join(matcher.text() for matcher in matchers)}",
        f"duration: {args.duration_minutes} min from the approval",
        f"comment: {quote(args.comment, 500)}",
        "createdBy: the Slack ID of whoever approves",
    ]
    headers = endpoint.describe_headers()
    if headers:
        lines.append(headers)
    lines.extend(_would_silence(endpoint, matchers))
    return endpoint.redact("\n".join(lines))


def _would_silence(endpoint: Endpoint, matchers: list[Matcher]) -> list[str]:
    params = [("filter", matcher.text()) for matcher in matchers]
    try:
        alerts, cut = fetch_alerts(
            endpoint, params, timeout=PREVIEW_TIMEOUT_SECONDS, max_body_bytes=PREVIEW_MAX_BODY_BYTES
        )
    except ToolCallError as exc:
        return [f"alerts it would silence now: could not list them ({exc})"]
    if not alerts:
        return ["alerts it would silence now: none (it applies to matching alerts that fire later)"]
    now = datetime.now(UTC)
    rows = sorted(alerts, key=_alert_order)
    count = f"{len(rows)}{' or more' if cut else ''}"
    lines = [f"alerts it would silence now ({count}):"]
    lines += [f"- {alert_line(alert, now)}" for alert in rows[:MAX_PREVIEW_ALERTS]]
    if len(rows) > MAX_PREVIEW_ALERTS:
        lines.append(f"- ... and {len(rows) - MAX_PREVIEW_ALERTS} more")
    if cut:
        lines.append(f"- ... and maybe more ({cut})")
    return lines


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
