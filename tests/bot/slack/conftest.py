"""End-to-end fixtures: the Slack emulator, the bot's web app on a real port, a real RQ worker.

The fixtures are ``tests.support.slack_fixtures``' (the reliability suite uses them too), the bot
they serve is ``tests.support.slack_bot.SlackBot``.
"""

from __future__ import annotations

from tests.support.slack_fixtures import bot, control, emulator, make_bot

__all__ = ["bot", "control", "emulator", "make_bot"]
