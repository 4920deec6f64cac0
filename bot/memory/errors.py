"""The incident memory's errors (one root: ``bot.errors.BotError``)."""

from __future__ import annotations

from bot.errors import BotError


class IncidentMemoryError(BotError):
    """Root of the incident memory's errors."""


class MalformedIncident(IncidentMemoryError):
    """A stored incident that is not one this code wrote (a hostile or older writer): skipped."""
