"""The incident memory built from the settings, for the worker (``bot.ops.compose``) and the web
process (``bot.ops.compose_web``): the same store, scope and retention in both."""

from __future__ import annotations

import redis

from bot.keys import Keys
from bot.memory.similar import IncidentMemory
from bot.memory.store import IncidentStore
from bot.settings import Settings


def incident_memory(settings: Settings, client: redis.Redis, keys: Keys) -> IncidentMemory | None:
    """Past incidents (``bot.memory``), kept ``CHATOPS_MEMORY_DAYS`` (0: none, and no tool)."""
    if settings.chatops_memory_days <= 0:
        return None
    store = IncidentStore(client, keys, retention_days=settings.chatops_memory_days)
    return IncidentMemory(store, scope=settings.chatops_memory_scope)
