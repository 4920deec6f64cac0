"""Ops tools for the agent: registry, built-in host tools, YAML catalog, output safety.

Public API::

    from tools import build_registry_from_settings, build_output_filter
    registry = build_registry_from_settings(settings)
    output_filter = build_output_filter(settings, registry)

A tool declares where it runs (``tools.placement``: ``HOST`` or ``WORKER``); the registry refuses
one that does not. Never imports Slack or the bot; ``bot.settings.Settings`` is read through protocols.
"""

from tools.base import FunctionTool, ToolContext, tool
from tools.config import ToolsConfig
from tools.errors import CatalogError, DuplicateToolError, ToolConfigError, ToolError
from tools.placement import HOST, WORKER, Placement
from tools.registry import ToolRegistry, build_output_filter, build_registry, build_registry_from_settings
from tools.safety import OutputFilter, Redactor

__all__ = [
    "HOST",
    "WORKER",
    "CatalogError",
    "DuplicateToolError",
    "FunctionTool",
    "OutputFilter",
    "Placement",
    "Redactor",
    "ToolConfigError",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "ToolsConfig",
    "build_output_filter",
    "build_registry",
    "build_registry_from_settings",
    "tool",
]
