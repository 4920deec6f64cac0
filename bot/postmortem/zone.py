"""A reader's time zone beside UTC: the timeline's second clock (pure: no Slack, no clock).

``Zone`` is what Slack says of a person (``users.info``: ``tz``, an IANA name, and ``tz_offset``,
seconds east of UTC now): a time is shown in the named zone as it was *then* (``zoneinfo``: a
daylight-saving change between the incident and the draft is counted); a name this machine's zone
database does not know falls back to the offset Slack gave, labelled ``UTC+05:45``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_+\-]{0,40}(?:/[A-Za-z0-9_+\-]{1,40}){0,3}")
MAX_OFFSET = 14 * 3600  # no zone is further from UTC (Pacific/Kiritimati: +14:00)


def _label(offset: int) -> str:
    sign = "+" if offset >= 0 else "-"
    hours, minutes = divmod(abs(offset) // 60, 60)
    return f"UTC{sign}{hours:02d}:{minutes:02d}"


@dataclass(frozen=True)
class Zone:
    name: str  # an IANA name ("Asia/Kathmandu") as Slack gave it
    offset: int  # seconds east of UTC, as Slack gave it (used when the name is unknown here)

    @classmethod
    def of(cls, tz: object, tz_offset: object) -> Zone | None:
        """The zone of a ``users.info`` answer's fields; ``None`` when they say nothing usable."""
        offset = tz_offset if isinstance(tz_offset, int) and not isinstance(tz_offset, bool) else None
        if offset is not None and abs(offset) > MAX_OFFSET:
            offset = None
        name = tz if isinstance(tz, str) and _NAME.fullmatch(tz) else ""
        if name and _zone_info(name) is not None:
            return cls(name, offset or 0)
        return cls("", offset) if offset is not None else None

    @property
    def utc(self) -> bool:
        """Nothing to add beside UTC."""
        return self.label in ("UTC", "Etc/UTC", "Etc/UCT", "UCT", "Etc/Zulu", "Zulu", "UTC+00:00")

    @property
    def label(self) -> str:
        return self.name or _label(self.offset)

    def local(self, at: float) -> str:
        """``at`` (Unix seconds) on this zone's clock: ``2026-12-04 13:27:32 Asia/Kathmandu``."""
        zone: tzinfo = _zone_info(self.name) or timezone(timedelta(seconds=self.offset))
        return datetime.fromtimestamp(at, UTC).astimezone(zone).strftime("%Y-%m-%d %H:%M:%S ") + self.label


def _zone_info(name: str) -> ZoneInfo | None:
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None
