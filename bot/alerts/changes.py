"""What changed on an alert's target before it fired (``bot.changes``), and how it is shown: the
changes in the ``WINDOW_SECONDS`` before the alert's ``startsAt`` (none after it) go into the run's
first message, quoted as data under a note, and the root shows "Changed before this alert:" with
at most ``ROOT_LINES`` of them, newest first, each with its time (the presenter makes them inert).

The target is the one the route found in the alert's labels (``RoutedNotification.target``, as
for its runbook and past incidents); it is read only when a run in the alert's channel may name
it (``ChangeReader.before``), and only sealed entries come back (``bot.changes.journal``). A
lookup that fails is logged and the alert goes on without (``bot.alerts.lookup``).
"""

from __future__ import annotations

from bot.alerts.lookup import looked_up, started_at
from bot.alerts.store import RoutedNotification
from bot.changes.reader import ChangeReader
from bot.changes.text import DATA_NOTE, describe, root_line, utc
from tools.changes.record import Change

WINDOW_SECONDS = 2 * 3600  # the changes that may explain an alert: the two hours before it started
MAX_TOLD = 20  # in the run's first message (the newest of the window); recent_changes has the rest
ROOT_LINES = 5
DIFF_TOLD = 600  # of each change's diff in the first message
CHANGES_NOTE = "Changed on {target} in the 2 hours before this alert started ({since} to {at}), oldest first. {note} More with recent_changes:"


def alert_changes(reader: ChangeReader | None, routed: RoutedNotification) -> list[Change]:
    """The changes on the alert's target before its ``startsAt``, oldest first (none without a
    reader, a target or a start)."""
    target, start = routed.target, started_at(routed.notification)
    if reader is None or not target or start is None:
        return []
    at = start.timestamp()
    return looked_up(
        "changes",
        routed,
        lambda: reader.before(routed.channel, target, at, WINDOW_SECONDS, limit=MAX_TOLD),
        [],
    )


def change_lines(routed: RoutedNotification, found: list[Change]) -> list[str]:
    """The first message's lines about recent changes (none without any)."""
    start = started_at(routed.notification)
    if not found or start is None or not routed.target:
        return []
    at = start.timestamp()

    head = CHANGES_NOTE.format(
        target=routed.target, since=utc(at - WINDOW_SECONDS), at=utc(at), note=DATA_NOTE
    )
    return [head, *(describe(change, diff_chars=DIFF_TOLD) for change in found)]


def change_note(found: list[Change]) -> tuple[tuple[str, str], ...]:
    """The root's lines: at most ``ROOT_LINES`` changes, newest first."""
    return tuple(root_line(change) for change in sorted(found, key=lambda c: c.at, reverse=True)[:ROOT_LINES])
