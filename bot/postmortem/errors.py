"""The postmortem's errors (one root: ``bot.errors.BotError``).

Tree::

    PostmortemError         a postmortem cannot be made (the message is the one line shown)
    └── BadThreadLink       the text is neither a run id nor a Slack thread link
"""

from __future__ import annotations

from bot.errors import BotError


class PostmortemError(BotError):
    """A postmortem cannot be made; the message says why, on one line."""


class BadThreadLink(PostmortemError):
    """Not a Slack message link (``https://…/archives/C…/p…``)."""
