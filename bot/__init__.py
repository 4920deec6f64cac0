"""chatops, the bot: Slack -> the web process -> the queue -> a worker's agent run -> tools.

The names below are the public API for embedding the bot (a runtime of your own for
``CHATOPS_RUNTIME``, a worker or the web app in your own process); the modules they come from
are the implementation and may move. Each is imported on first use: importing any part of
``bot`` loads nothing else, so a worker, which imports ``bot.runs``, never loads the Slack
transport, and the root modules (settings, errors, keys, claims) never import a sub-package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.errors import BotError
    from bot.keys import Keys
    from bot.ops.worker import build_worker, default_runtime, run_worker
    from bot.redis_connection import open_redis
    from bot.runs.presenter import InMemoryPresenter, LoggingPresenter, Presenter
    from bot.runs.record import RunRecord
    from bot.runs.runtime import Runtime, RuntimeFactory
    from bot.runs.service import RunOptions, RunService
    from bot.settings import Settings
    from bot.web.server import create_app

_HOME = {
    "BotError": "bot.errors",
    "InMemoryPresenter": "bot.runs.presenter",
    "Keys": "bot.keys",
    "LoggingPresenter": "bot.runs.presenter",
    "Presenter": "bot.runs.presenter",
    "RunOptions": "bot.runs.service",
    "RunRecord": "bot.runs.record",
    "RunService": "bot.runs.service",
    "Runtime": "bot.runs.runtime",
    "RuntimeFactory": "bot.runs.runtime",
    "Settings": "bot.settings",
    "build_worker": "bot.ops.worker",
    "create_app": "bot.web.server",
    "default_runtime": "bot.ops.worker",
    "open_redis": "bot.redis_connection",
    "run_worker": "bot.ops.worker",
}

__all__ = [
    "BotError",
    "InMemoryPresenter",
    "Keys",
    "LoggingPresenter",
    "Presenter",
    "RunOptions",
    "RunRecord",
    "RunService",
    "Runtime",
    "RuntimeFactory",
    "Settings",
    "build_worker",
    "create_app",
    "default_runtime",
    "open_redis",
    "run_worker",
]


def __getattr__(name: str) -> object:
    """``bot.Settings`` and the rest of ``__all__``, imported from their module when first asked for."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'bot' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
