"""``ToolRegistry`` and ``build_registry``: the built-in tools plus the YAML catalog, by name.

Typical start-up (the bot)::

    registry = build_registry_from_settings(settings)         # raises ToolConfigError on mistakes
    output_filter = build_output_filter(settings, registry)   # the run's tool_output_filter
    RunConfig(..., tools=registry.tools(), tool_output_filter=output_filter)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from agent.tooling import Tool
from agent.types import ToolDef
from tools.builtin import builtin_tools
from tools.catalog import load_catalog
from tools.config import ToolsConfig, ToolSettings
from tools.errors import DuplicateToolError
from tools.safety import OutputFilter, OutputSettings


class ToolRegistry:
    """Tools by name; iteration and ``tools()`` are sorted by name, so the tool list is stable."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self.secret_values: list[str] = []
        """Values to redact besides the configured ones (catalog headers read from the environment)."""
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool, *, replace: bool = False) -> None:
        """Add ``tool``; a second tool with the same name is a ``DuplicateToolError`` unless ``replace``."""
        name = tool.definition.name
        if name in self._tools and not replace:
            raise DuplicateToolError(f"two tools are named {name!r}")
        self._tools[name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools())

    def names(self) -> list[str]:
        return sorted(self._tools)

    def tools(self) -> list[Tool]:
        """All tools, sorted by name."""
        return [self._tools[name] for name in self.names()]

    def definitions(self) -> list[ToolDef]:
        """What the model is offered, sorted by name."""
        return [tool.definition for tool in self.tools()]


def build_registry(config: ToolsConfig | None = None) -> ToolRegistry:
    """The built-in tools, then the catalog (``config.tools_file``) on top.

    Raises ``ToolConfigError`` (``CatalogError``, ``DuplicateToolError``) on any mistake, so a
    bad configuration stops start-up instead of half-loading.
    """
    config = config or ToolsConfig()
    egress = config.egress_policy()  # one policy for built-in and catalog network tools
    registry = ToolRegistry(builtin_tools(config, egress))
    if config.tools_file is not None:
        catalog = load_catalog(
            config.tools_file,
            env=config.environment(),
            command_env=config.command_env(),
            builtin_names=set(registry.names()),
            egress=egress,
        )
        for tool in catalog.tools:
            registry.register(tool, replace=tool.definition.name in catalog.overrides)
        registry.secret_values.extend(catalog.secret_values)
    return registry


def build_registry_from_settings(
    settings: ToolSettings, env: Mapping[str, str] | None = None
) -> ToolRegistry:
    """``build_registry`` from a ``bot.settings.Settings`` (or anything with the same fields)."""
    return build_registry(ToolsConfig.from_settings(settings, env))


def build_output_filter(
    settings: OutputSettings, registry: ToolRegistry | None = None, env: Mapping[str, str] | None = None
) -> OutputFilter:
    """The run's ``tool_output_filter``: settings' redaction and cap, plus the registry's secrets."""
    extra = registry.secret_values if registry is not None else ()
    return OutputFilter.from_settings(settings, env=env, extra_secrets=extra)
