"""Every default is written once: what the runtime's own types default to is what the settings do.

``agent`` and ``tools`` keep their defaults as constants (``agent.defaults``, ``tools.config``) that
``bot.settings.Settings`` names; the bot's dataclasses built from settings default to
``bot.settings.DEFAULTS``. Each test builds the object both ways and compares the whole of it, so a
literal default that drifts from its setting (600 s against 900 s) fails here.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import redis

from agent.config import RunConfig
from agent.keys import MemoryKeys
from agent.memory import InMemoryMemory
from agent.models.endpoints import ClientOptions
from agent.models.retry import RetryPolicy
from agent.scripted import ScriptedModel
from agent.types import Limits
from bot.keys import Keys
from bot.models import client_options
from bot.runs.durability import Durability
from bot.runs.limits import LimitSettings
from bot.runs.service import RunOptions
from bot.settings import DEFAULTS, Settings
from bot.web.http_server import Limits as ConnectionLimits
from bot.web.server import limits_for
from tools.config import ToolsConfig
from tools.safety import OutputFilter

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The settings with nothing set: every field at its default."""
    for name in Settings.model_fields:
        monkeypatch.delenv(name.upper(), raising=False)
    return Settings(_env_file=None)  # type: ignore[call-arg]


def test_defaults_is_the_settings_with_nothing_set(settings: Settings) -> None:
    assert DEFAULTS.model_dump() == settings.model_dump()


def test_env_example_shows_every_default(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / ".env").write_text((ROOT / ".env.example").read_text())
    monkeypatch.chdir(tmp_path)
    assert Settings().model_dump() == settings.model_dump()


def test_run_options_and_run_limits(settings: Settings) -> None:
    built = RunOptions.from_settings(settings)
    assert replace(built, redactor=None) == RunOptions()
    assert built.limits == Limits()
    assert Limits().deadline_seconds == settings.chatops_deadline_seconds == 900


def test_loop_detection_and_model_clients(settings: Settings) -> None:
    config = RunConfig(models=[ScriptedModel([])], memory=InMemoryMemory())
    assert (config.loop_window, config.loop_warn_at, config.loop_stop_at) == (10, 3, 6)
    assert replace(client_options(settings), extra_headers={}) == ClientOptions()
    policy, options = RetryPolicy(), ClientOptions()
    assert (policy.max_attempts, policy.max_wait) == (options.max_attempts, options.max_retry_wait)


def test_admission_limits(settings: Settings) -> None:
    assert LimitSettings.from_settings(settings) == LimitSettings()


def test_web_connection_limits(settings: Settings) -> None:
    assert limits_for(settings) == ConnectionLimits()


def test_tools(settings: Settings) -> None:
    built = ToolsConfig.from_settings(settings)
    # REDIS_URL and PORT are the bot's own endpoints: a ToolsConfig made in code protects none.
    assert replace(built, redis_url=None, web_port=None) == ToolsConfig()
    assert OutputFilter.from_settings(settings).max_chars == OutputFilter().max_chars


def test_durability(settings: Settings) -> None:
    client = redis.Redis()  # never connected: only the options are compared
    built = Durability.from_settings(client, Keys("test:"), settings)
    default = Durability(client, Keys("test:").durability_probe())
    assert (built.mode, built.timeout_ms) == (default.mode, default.timeout_ms)


def test_key_prefix(settings: Settings) -> None:
    assert MemoryKeys().prefix == Keys().prefix == settings.chatops_redis_prefix
