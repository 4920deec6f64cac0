"""One change on one target, as every collector, deploy marker and reader of the journal sees it.

Every text in a change came from the host or from a webhook: it is untrusted. It is bounded here
(``MAX_WHAT``, ``MAX_DIFF``), redacted by whoever built it before it is stored, shown inert in
Slack and quoted as data to the model. ``from_json`` refuses anything that is not exactly this
shape (a hostile Redis writer), and every reader skips what it refuses.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, replace
from typing import Any

from tools.errors import MalformedChange

PACKAGE = "package"  # installed, upgraded, removed (dpkg, apt)
FILE = "file"  # a watched file edited, created or deleted
UNIT = "unit"  # a systemd unit file created, edited or removed
RESTART = "restart"  # a service (re)started
FAILURE = "failure"  # a service failed
REBOOT = "reboot"  # the boot id changed
CRONTAB = "crontab"  # a crontab edited, created or deleted
DEPLOY = "deploy"  # a deploy marker (webhook, GitHub, Argo CD, CLI, rollout history)
EVENT = "event"  # a Kubernetes event of the namespace
KINDS = frozenset({PACKAGE, FILE, UNIT, RESTART, FAILURE, REBOOT, CRONTAB, DEPLOY, EVENT})

MAX_WHAT = 300  # one line: "upgrade nginx 1.24.0-1 -> 1.24.0-2", "edited /etc/nginx/nginx.conf"
MAX_FIELD = 200  # who, source, url, target
MAX_DIFF = 4_000  # a unified diff, cut with a note (``cut_diff``)
DIFF_CUT_NOTE = "\n[diff cut: {hidden} more characters]"  # within MAX_DIFF


@dataclass(frozen=True)
class Change:
    """``at`` is when it happened, in Unix seconds; when only the time it was *seen* is known (a
    watched file's edit found by a scan), ``seen`` is true and ``at`` is the scan's time."""

    target: str
    kind: str
    at: float
    what: str
    who: str = ""
    diff: str = ""
    source: str = ""  # runner, ssh, local, webhook, github, argocd, cli, kubernetes
    url: str = ""
    seen: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise MalformedChange(f"unknown kind of change {self.kind!r}")
        if self.at != self.at or self.at < 0:  # NaN or negative
            raise MalformedChange(f"not a time: {self.at!r}")

    @property
    def id(self) -> str:
        """Stable over rescans and redeliveries: the same change is stored once."""
        body = "\n".join((self.target, self.kind, f"{self.at:.3f}", self.what, self.diff))
        return hashlib.sha256(body.encode()).hexdigest()[:24]

    def bounded(self) -> Change:
        """This change with every text cut to its bound (builders call it before storing)."""
        return replace(
            self,
            target=self.target[:MAX_FIELD],
            what=_one_line(self.what)[:MAX_WHAT],
            who=_one_line(self.who)[:MAX_FIELD],
            source=_one_line(self.source)[:MAX_FIELD],
            url=_one_line(self.url)[:MAX_FIELD],
            diff=cut_diff(self.diff),
        )

    def within_bounds(self) -> bool:
        """Whether ``bounded()`` would leave this change as it is (checked without building it:
        every journal read checks every change)."""
        lines = (self.what, self.who, self.source, self.url)
        return (
            len(self.target) <= MAX_FIELD
            and len(self.what) <= MAX_WHAT
            and all(len(text) <= MAX_FIELD for text in lines[1:])
            and all(_one_line(text) == text for text in lines)
            and len(self.diff) <= MAX_DIFF
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> Change:
        try:
            raw = json.loads(text)
            if not isinstance(raw, dict) or set(raw) - _FIELDS:
                raise TypeError("not an object of a change's fields")
            at = raw["at"]
            if isinstance(at, bool) or not isinstance(at, int | float):
                raise TypeError("at is not a number")
            seen = raw.get("seen", False)
            if not isinstance(seen, bool):
                raise TypeError("seen is not a boolean")
            change = cls(
                target=_text(raw["target"]),
                kind=_text(raw["kind"]),
                at=float(at),
                what=_text(raw["what"]),
                who=_text(raw.get("who", "")),
                diff=_text(raw.get("diff", "")),
                source=_text(raw.get("source", "")),
                url=_text(raw.get("url", "")),
                seen=seen,
            )
        except (ValueError, TypeError, KeyError) as error:
            raise MalformedChange(f"not a change record: {error}") from error
        if not change.within_bounds():
            raise MalformedChange("a change record over its bounds")
        return change


_FIELDS = frozenset(Change.__dataclass_fields__)


def cut_diff(diff: str) -> str:
    if len(diff) <= MAX_DIFF:
        return diff
    # The note counts within the bound, so a cut diff is within it and cutting again keeps it.
    longest_note = DIFF_CUT_NOTE.format(hidden=len(diff))
    kept = MAX_DIFF - len(longest_note)
    return diff[:kept] + DIFF_CUT_NOTE.format(hidden=len(diff) - kept)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected text, got {type(value).__name__}")
    return value
