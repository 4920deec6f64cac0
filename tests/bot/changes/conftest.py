"""Fixtures of the change journal's tests: the end-to-end web process (``tests.support.slack_fixtures``)
for the deploy markers' webhooks."""

from __future__ import annotations

from tests.support.slack_fixtures import control, emulator, make_bot

__all__ = ["control", "emulator", "make_bot"]
