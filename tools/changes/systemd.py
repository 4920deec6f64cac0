"""Service restarts and failures from systemd's own timestamps.

A reader (injected; ``systemctl_reader`` is the real one, run through ``tools.process`` like the
``service_status`` tool's systemd backend) returns, per unit, the properties of
``systemctl show``: ``ActiveState``, ``Result``, ``ActiveEnterTimestamp``,
``ExecMainStartTimestamp``, ``NRestarts``. Between two scans, a unit whose start timestamp
changed was restarted at that time (``RESTART``; "automatic" when ``NRestarts`` grew), and a
unit that went ``failed`` (or whose ``Result`` is no longer ``success``) failed (``FAILURE``,
at the scan that saw it). The first scan reports the units that are failed, and the restarts
after the boot settled (``BOOT_SETTLE`` seconds after it: the boot's own starts are no change).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime

from tools.changes.record import FAILURE, RESTART, Change
from tools.errors import ToolCallError
from tools.process import run_command

SystemdReader = Callable[[], Mapping[str, Mapping[str, str]]]
"""unit name -> its ``systemctl show`` properties; raises ``OSError``/``ValueError`` when it cannot."""

PROPERTIES = ("Id", "ActiveState", "Result", "ActiveEnterTimestamp", "ExecMainStartTimestamp", "NRestarts")
BOOT_SETTLE = 300.0
MAX_UNITS = 2_000
_SHOW_BATCH = 200
_TIMESTAMP = re.compile(
    r"(?:[A-Za-z]{2,3} )?(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)?(?: ([A-Za-z0-9+:/_-]{1,40}))?"
)
_UNIT_NAME = re.compile(r"[A-Za-z0-9@._:\\-]{1,256}")


def service_changes(
    units: Mapping[str, Mapping[str, str]],
    previous: Mapping[str, Mapping[str, str]] | None,
    *,
    target: str,
    source: str,
    now: float,
    boot: float | None,
) -> tuple[list[Change], dict[str, dict[str, str]]]:
    """The restarts and failures between ``previous`` (``None``: the first scan) and ``units``."""
    changes: list[Change] = []
    kept: dict[str, dict[str, str]] = {}
    for unit, props in sorted(units.items())[:MAX_UNITS]:
        start = props.get("ActiveEnterTimestamp") or props.get("ExecMainStartTimestamp") or ""
        state = {
            "start": start[:80],
            "restarts": props.get("NRestarts", "")[:20],
            "failed": _failure(props)[:80],
        }
        kept[unit] = state
        before = previous.get(unit) if previous is not None else None
        at = parse_timestamp(start)
        if at is not None and _restarted(before, state, at, previous is None, boot):
            automatic = before is not None and _count(state["restarts"]) > _count(before.get("restarts", ""))
            what = f"{'automatic restart' if automatic else 'restart'} of {unit}"
            changes.append(Change(target, RESTART, at, what, source=source).bounded())
        if state["failed"] and (before is None or before.get("failed") != state["failed"]):
            what = f"{unit} failed ({state['failed']})"
            changes.append(Change(target, FAILURE, now, what, source=source, seen=True).bounded())
    return changes, kept


def _restarted(
    before: Mapping[str, str] | None, state: Mapping[str, str], at: float, first: bool, boot: float | None
) -> bool:
    if boot is not None and boot - 1 <= at <= boot + BOOT_SETTLE:
        return False  # started by the boot (a reboot is its own change)
    if first or before is None:  # the baseline, or a unit not there at the last scan
        return boot is not None and at > boot + BOOT_SETTLE
    return before.get("start") != state["start"]


def _failure(props: Mapping[str, str]) -> str:
    result = props.get("Result", "")
    if props.get("ActiveState") == "failed":
        return f"result {result}" if result and result != "success" else "state failed"
    return f"result {result}" if result not in ("", "success") else ""


def _count(text: object) -> int:
    return int(text) if isinstance(text, str) and text.isascii() and text.isdigit() else 0


def parse_timestamp(text: str) -> float | None:
    """``Thu 2026-12-03 10:01:02 UTC``, ``@1764756062`` or nothing (``n/a``, empty)."""
    text = text.strip()
    if text.startswith("@") and text[1:].isdigit():
        return float(text[1:])
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        return None
    try:
        moment = datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S")
        if match[2] in ("UTC", "GMT", "Z"):
            moment = moment.replace(tzinfo=UTC)
        at = moment.timestamp()  # another zone's name: the host's local time, as systemd prints it
    except (ValueError, OverflowError, OSError):
        return None
    return at if at > 0 else None


def parse_show(output: str) -> dict[str, dict[str, str]]:
    """``systemctl show`` output of several units (blocks split by blank lines or a new ``Id=``)."""
    units: dict[str, dict[str, str]] = {}
    block: dict[str, str] = {}

    def close() -> None:
        unit = block.get("Id", "")
        if _UNIT_NAME.fullmatch(unit) and len(units) < MAX_UNITS:
            units[unit] = dict(block)
        block.clear()

    for line in output.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            if not line.strip():
                close()
            continue
        if key == "Id" and "Id" in block:
            close()
        block[key] = value.strip()
    close()
    return units


def systemctl_reader(
    units: Sequence[str] = (), env: Mapping[str, str] | None = None, timeout: float = 20.0
) -> SystemdReader:
    """The real reader: ``units``, or every service unit systemd knows (``list-units``)."""

    def run(argv: list[str]) -> str:
        try:
            result = run_command(argv, timeout=timeout, env=env)
        except ToolCallError as error:  # systemctl is not there
            raise OSError(str(error)) from error
        if not result.ok:
            raise OSError(result.failure_message())
        return result.stdout

    def read() -> Mapping[str, Mapping[str, str]]:
        names = list(units)
        if not names:
            listed = run(
                ["systemctl", "list-units", "--type=service", "--all", "--plain", "--no-legend", "--no-pager"]
            )
            names = [line.split()[0] for line in listed.splitlines() if line.split()]
        names = [name for name in names if _UNIT_NAME.fullmatch(name) and not name.startswith("-")][
            :MAX_UNITS
        ]
        found: dict[str, dict[str, str]] = {}
        for first in range(0, len(names), _SHOW_BATCH):
            batch = names[first : first + _SHOW_BATCH]
            argv = ["systemctl", "show", "--no-pager", f"--property={','.join(PROPERTIES)}", *batch]
            found.update(parse_show(run(argv)))
        return found

    return read
