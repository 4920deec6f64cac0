"""Fixtures of the fleet tests: two runner targets with simulated roots, and their heartbeats."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from bot.fleet.heartbeats import Heartbeats
from bot.keys import Keys
from tests.support.runners import HEARTBEAT_SECONDS, FleetSite

TARGETS = {"web-03": {"env": "prod", "role": "web"}, "db-01": {"env": "prod", "role": "db"}}


@pytest.fixture
def site(tmp_path: Path, redis_url: str, key_prefix: str, queue_name: str) -> Iterator[FleetSite]:
    fleet_site = FleetSite(tmp_path, redis_url, key_prefix, queue_name, TARGETS)
    yield fleet_site
    fleet_site.stop_all()


@pytest.fixture
def heartbeats(redis_client: redis.Redis, keys: Keys) -> Heartbeats:
    return Heartbeats(redis_client, keys, HEARTBEAT_SECONDS)
