"""The change journal's readers' errors (one root: ``bot.errors.BotError``).

Tree::

    BotError
    └── ChangeJournalError   the change journal (``bot.changes``)
        └── NotATime             a time a reader could not read (also a ``ValueError``; the message
                                 says what is accepted: RFC 3339 or a duration such as 2h)

A change record a hostile writer slipped into Redis is ``tools.errors.MalformedChange``: the
journal skips it, it is never raised to a reader.
"""

from __future__ import annotations

from bot.errors import BotError


class ChangeJournalError(BotError):
    """Root of the change journal's errors."""


class NotATime(ChangeJournalError, ValueError):
    """A time a reader could not read (the message says what is accepted)."""
