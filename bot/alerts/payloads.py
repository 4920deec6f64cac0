"""Alert webhooks in, neutral alerts out: Alertmanager (version 4) and Grafana; PagerDuty in ``pagerduty``.

Every sender's body becomes one ``Notification`` holding ``Alert``s: frozen, read-only types
that say nothing of who sent them, so the store, the jobs and the Slack side never parse a
sender's format. The parsers are strict where a mistake would mislead us and lenient where the
senders grow: required fields are required and every type is checked (a label must be text,
a timestamp RFC 3339), but fields we do not read are ignored, since each sender adds some over
its versions (Alertmanager's ``notification_reason``, Grafana's ``values``...).

Malformed input raises ``AlertPayloadError`` whose message is the 400 reason the sender sees:
one short line naming the field (``alerts[0].labels.severity: must be a string, not a number``),
since Alertmanager and Grafana log it and do not retry a 4xx.

Sizes are bounded, because a webhook body is attacker-shaped until proven otherwise:

* at most ``MAX_ALERTS`` alerts are read; the rest are dropped and counted in
  ``truncated_alerts``, as Alertmanager's own ``max_alerts`` does (``truncatedAlerts``);
* label sets are refused beyond ``MAX_LABELS`` pairs, names beyond ``MAX_NAME_CHARS`` and values
  beyond ``MAX_LABEL_VALUE_CHARS`` (labels identify and route an alert: a cut one would misroute);
* annotation values longer than ``MAX_ANNOTATION_CHARS`` are cut (they are prose for people);
* the JSON itself nests at most 200 deep (``pydantic_core``'s parser), numbers are bounded.

Go encodes an empty map as ``null`` and an unset time as ``0001-01-01T00:00:00Z``: a ``null``
label map is an empty one, and the zero time of ``endsAt`` means "not ended" (``None``). Links
(``generator_url``, ``links``) are kept only when they are http(s) URLs, the only ones a person
should be handed to click.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from types import MappingProxyType
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_core import from_json

from bot.alerts.payload_reasons import describe, json_type, shorten
from bot.errors import AlertPayloadError

Source = Literal["alertmanager", "grafana", "pagerduty"]
Status = Literal["firing", "resolved"]

MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_ALERTS = 500
MAX_LABELS = 128
MAX_NAME_CHARS = 256
MAX_LABEL_VALUE_CHARS = 4096
MAX_ANNOTATION_CHARS = 16384
MAX_TEXT_CHARS = 8192  # a group key, a receiver, a URL
MAX_TITLE_CHARS = 200
NOTIFY_EVENT = "notify"  # the ``event`` of every Alertmanager and Grafana notification
# The PagerDuty events the bot acts on, and the status each means (any other is parsed and ignored).
PAGERDUTY_INCIDENT_EVENTS: Mapping[str, Status] = MappingProxyType(
    {"incident.triggered": "firing", "incident.acknowledged": "firing", "incident.resolved": "resolved"}
)
ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)  # Go's time.Time{}: "never" for endsAt

_CUT_MARK = " … [cut]"
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))"
)


@dataclass(frozen=True)
class Alert:
    """One alert of a notification; ``labels``, ``annotations`` and ``links`` are read-only copies.

    ``links`` names the places a person may want to open: ``dashboard``, ``panel``, ``silence``,
    ``image`` (Grafana), ``incident``, ``service`` (PagerDuty).
    """

    fingerprint: str
    status: Status
    labels: Mapping[str, str] = field(hash=False)
    annotations: Mapping[str, str] = field(hash=False)
    starts_at: datetime
    ends_at: datetime | None
    generator_url: str
    links: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        for name in ("labels", "annotations", "links"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))


@dataclass(frozen=True)
class Notification:
    """One webhook delivery: a group of alerts (Alertmanager, Grafana) or one incident (PagerDuty).

    ``group_key`` identifies the group across deliveries (Alertmanager's ``groupKey``, the
    PagerDuty incident id); ``event`` is ``"notify"`` for Alertmanager and Grafana and the
    PagerDuty event type (``incident.acknowledged``) otherwise; ``title`` is one line for people.
    ``event_id`` and ``occurred_at`` are the sender's id and time of the event, when it gives them
    (PagerDuty does, in its signed body): what a replay is recognised by (``bot.alerts.replay``).
    """

    source: Source
    group_key: str
    status: Status
    receiver: str
    group_labels: Mapping[str, str] = field(hash=False)
    common_labels: Mapping[str, str] = field(hash=False)
    common_annotations: Mapping[str, str] = field(hash=False)
    external_url: str
    truncated_alerts: int
    alerts: tuple[Alert, ...]
    event: str = NOTIFY_EVENT
    title: str = ""
    event_id: str = ""
    occurred_at: datetime | None = None

    def __post_init__(self) -> None:
        for name in ("group_labels", "common_labels", "common_annotations"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))
        object.__setattr__(self, "alerts", tuple(self.alerts))

    @property
    def actionable(self) -> bool:
        """Whether the bot acts on it: every Alertmanager and Grafana notification, and the
        PagerDuty incident triggers, acknowledgements and resolutions (not ``pagey.ping``...)."""
        return self.event == NOTIFY_EVENT or self.event in PAGERDUTY_INCIDENT_EVENTS

    @property
    def routing_labels(self) -> Mapping[str, str]:
        """The labels routes match: the common labels over the group labels, as every alert of
        the group carries them (so the route does not depend on which alert came first); the
        first alert's labels when the sender gave neither."""
        merged = {**self.group_labels, **self.common_labels}
        if not merged and self.alerts:
            return self.alerts[0].labels
        return MappingProxyType(merged)


def parse_alertmanager(body: bytes) -> Notification:
    """An Alertmanager webhook (``version`` "4"); raises ``AlertPayloadError`` (a 400 reason)."""
    return _parse_grouped(body, "alertmanager", "4", _GroupIn[_AlertIn])


def parse_grafana(body: bytes) -> Notification:
    """A Grafana webhook contact point's body (``version`` "1"); raises ``AlertPayloadError``."""
    return _parse_grouped(body, "grafana", "1", _GroupIn[_GrafanaAlertIn])


# --- shared by the parsers (pagerduty.py too) ---


def load_json_object(body: bytes) -> dict[str, Any]:
    """The body's JSON object, or an ``AlertPayloadError`` saying why there is none."""
    if len(body) > MAX_BODY_BYTES:
        raise AlertPayloadError(f"the body is larger than {MAX_BODY_BYTES // (1024 * 1024)} MiB")
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AlertPayloadError(f"the body is not UTF-8 text (byte {exc.start})") from None
    try:
        data = from_json(body, allow_inf_nan=False)
    except ValueError as exc:
        raise AlertPayloadError(f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise AlertPayloadError(f"the body must be a JSON object, not {json_type(data)}")
    return data


def parse_timestamp(value: object) -> datetime:
    """An RFC 3339 time (Go's nanoseconds cut to microseconds), in UTC."""
    match = _RFC3339.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        shown = shorten(value) if isinstance(value, str) else json_type(value)
        raise ValueError(f"must be an RFC 3339 timestamp (2024-05-01T12:00:00Z), not {shown}")
    year, month, day, hour, minute, second, fraction, zulu, sign, off_hours, off_minutes = match.groups()
    offset = timedelta(0) if zulu else timedelta(hours=int(off_hours), minutes=int(off_minutes))
    try:
        zone = timezone(-offset if sign == "-" else offset)
        local = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second),
            int((fraction or "0")[:6].ljust(6, "0")), tzinfo=zone,
        )  # fmt: skip
        return local.astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValueError(f"is not a valid time: {shorten(match.group())}") from None


def web_url(value: str) -> str:
    """``value`` when it is an http(s) URL, else ``""`` (nothing to click)."""
    return value if re.match(r"https?://[^\s]", value, re.IGNORECASE) else ""


def one_line(text: str, limit: int = MAX_TITLE_CHARS) -> str:
    """``text`` as one short line: whitespace and control characters become single spaces."""
    flat = " ".join(re.sub(r"[\x00-\x1f\x7f]", " ", text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - len(_CUT_MARK)] + _CUT_MARK


def fallback_fingerprint(labels: Mapping[str, str]) -> str:
    """A stable id for an alert whose sender gave none: a hash of its sorted labels."""
    canonical = json.dumps(sorted(labels.items()), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


# --- the pydantic models of the bodies (the senders' own field names) ---


class BodyModel(BaseModel):
    """A sender's body: strict types, fields we do not read ignored."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


def _empty_if_null(value: object) -> object:
    return {} if value is None else value


def _cut_annotations(values: dict[str, str]) -> dict[str, str]:
    return {name: cut(text, MAX_ANNOTATION_CHARS) for name, text in values.items()}


def _optional_time(value: object) -> datetime | None:
    return None if value is None else parse_timestamp(value)


def _end_time(value: object) -> datetime | None:
    """``endsAt``: absent, ``null`` or Go's zero time mean the alert has not ended."""
    parsed = _optional_time(value)
    return None if parsed == ZERO_TIME else parsed


Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS)]
Text = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
Key = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)]
Labels = Annotated[
    dict[Name, Annotated[str, Field(max_length=MAX_LABEL_VALUE_CHARS)]],
    BeforeValidator(_empty_if_null),
    Field(max_length=MAX_LABELS),
]
Annotations = Annotated[
    dict[Name, str],
    BeforeValidator(_empty_if_null),
    Field(max_length=MAX_LABELS),
    AfterValidator(_cut_annotations),
]
Timestamp = Annotated[datetime, BeforeValidator(parse_timestamp)]
OptionalTimestamp = Annotated[datetime | None, BeforeValidator(_optional_time)]
EndTimestamp = Annotated[datetime | None, BeforeValidator(_end_time)]


class _AlertIn(BodyModel):
    status: Status
    labels: Labels
    annotations: Annotations = Field(default_factory=dict)
    startsAt: Timestamp
    endsAt: EndTimestamp = None
    generatorURL: Text = ""
    fingerprint: Annotated[str, Field(max_length=MAX_NAME_CHARS)] = ""

    def link_fields(self) -> dict[str, str]:
        return {}

    def to_alert(self) -> Alert:
        return Alert(
            fingerprint=self.fingerprint or fallback_fingerprint(self.labels),
            status=self.status,
            labels=self.labels,
            annotations=self.annotations,
            starts_at=self.startsAt,
            ends_at=self.endsAt,
            generator_url=web_url(self.generatorURL),
            links={name: url for name, url in self.link_fields().items() if web_url(url)},
        )


class _GrafanaAlertIn(_AlertIn):
    silenceURL: Text = ""
    dashboardURL: Text = ""
    panelURL: Text = ""
    imageURL: Text = ""

    def link_fields(self) -> dict[str, str]:
        return {
            "dashboard": self.dashboardURL,
            "panel": self.panelURL,
            "silence": self.silenceURL,
            "image": self.imageURL,
        }


_AlertT = TypeVar("_AlertT", bound=_AlertIn)


class _GroupIn(BodyModel, Generic[_AlertT]):
    """Alertmanager's body (``_GroupIn[_AlertIn]``), and Grafana's (its alerts carry links)."""

    version: str
    groupKey: Key
    truncatedAlerts: int = Field(default=0, ge=0)
    status: Status
    receiver: Text
    groupLabels: Labels = Field(default_factory=dict)
    commonLabels: Labels = Field(default_factory=dict)
    commonAnnotations: Annotations = Field(default_factory=dict)
    externalURL: Text = ""
    alerts: Annotated[list[_AlertT], Field(min_length=1)]


_VERSIONS = {"4": "an Alertmanager webhook", "1": "a Grafana webhook"}
_FORMATS = {"alertmanager": "the Alertmanager webhook format", "grafana": "Grafana's webhook format"}


def _parse_grouped(body: bytes, source: Source, version: str, model: type[_GroupIn[_AlertT]]) -> Notification:
    data = load_json_object(body)
    given = data.get("version")
    if given != version:
        shown = shorten(given) if isinstance(given, str) else json_type(given)
        shown = shown if "version" in data else "missing"
        guess = f" ({_VERSIONS[given]}?)" if isinstance(given, str) and given in _VERSIONS else ""
        raise AlertPayloadError(f'version: must be "{version}" ({_FORMATS[source]}), not {shown}{guess}')
    alerts, dropped = data.get("alerts"), 0
    if isinstance(alerts, list) and len(alerts) > MAX_ALERTS:
        # Validate only what is kept: the rest would cost time and change nothing.
        data, dropped = {**data, "alerts": alerts[:MAX_ALERTS]}, len(alerts) - MAX_ALERTS
    try:
        message = model.model_validate(data)
    except ValidationError as exc:
        raise AlertPayloadError(describe(exc)) from None
    parsed = tuple(alert.to_alert() for alert in message.alerts)
    return Notification(
        source=source,
        group_key=message.groupKey,
        status=message.status,
        receiver=message.receiver,
        group_labels=message.groupLabels,
        common_labels=message.commonLabels,
        common_annotations=message.commonAnnotations,
        external_url=web_url(message.externalURL),
        truncated_alerts=message.truncatedAlerts + dropped,
        alerts=parsed,
        title=_group_title(parsed, message.commonLabels, message.groupLabels),
    )


def _group_title(alerts: tuple[Alert, ...], common: Mapping[str, str], group: Mapping[str, str]) -> str:
    """The alert name all alerts share, else the first one's "and N more", else its summary."""
    shared = common.get("alertname") or group.get("alertname")
    if shared:
        return one_line(shared)
    names = list(
        dict.fromkeys(alert.labels["alertname"] for alert in alerts if alert.labels.get("alertname"))
    )
    if names:
        return one_line(names[0] + (f" and {len(names) - 1} more" if len(names) > 1 else ""))
    return one_line(alerts[0].annotations.get("summary", "") or "alert")
