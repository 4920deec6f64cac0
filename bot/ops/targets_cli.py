"""``chatops targets``: the inventory, with each runner's last heartbeat (``bot.ops.fleet_cli``)."""

from __future__ import annotations

from bot.ops.fleet_cli import configure_targets as configure_cli
from bot.ops.fleet_cli import run_targets as run_cli

__all__ = ["configure_cli", "run_cli"]
