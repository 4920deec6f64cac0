"""Fixtures for the bot's tests: keys under the test's unique prefix."""

from __future__ import annotations

import pytest

from agent.keys import Keys


@pytest.fixture
def keys(key_prefix: str) -> Keys:
    return Keys(key_prefix)
