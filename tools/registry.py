"""``ToolRegistry`` and ``build_registry``: the built-in tools plus the YAML catalog, by name.

Typical start-up (the bot)::

    registry = build_registry_from_settings(settings)         # raises ToolConfigError on mistakes
    output_filter = build_output_filter(settings, registry)   # the run's tool_output_filter
    RunConfig(..., tools=registry.tools(), tool_output_filter=output_filter)

Every tool in a registry declares where it runs (``tools.placement``): the built-ins where they
are defined, catalog and MCP tools from what they are. One that does not stops start-up here,
whoever builds the registry (the worker's runtime, ``chatops runner``, ``tools list``, ``doctor``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from agent.tooling import Tool
from agent.types import ToolDef
from tools.builtin import builtin_tools
from tools.catalog import load_catalog
from tools.catalog.loader import Catalog, load_mcp_servers
from tools.config import ToolsConfig, ToolSettings
from tools.errors import CatalogError, DuplicateToolError, ToolConfigError
from tools.inventory import Target
from tools.mcp.listing import McpToolset
from tools.placement import require_placement
from tools.safety import OutputFilter, OutputSettings
from tools.ssh import SshRunner
from tools.verification import Declared, declaration_problems

if TYPE_CHECKING:
    from tools.mcp.pool import Pool
    from tools.mcp.sharing import McpHost

log = logging.getLogger(__name__)


class ToolRegistry:
    """Tools by name; iteration and ``tools()`` are sorted by name, so the tool list is stable."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self.secret_values: list[str] = []
        """Values to redact besides the configured ones (catalog headers read from the environment)."""
        self.catalog: Catalog | None = None
        """The catalog the tools came from (its specs build a tool again for an SSH target)."""
        self._ssh: dict[str, SshRunner] = {}
        self.mcp: McpToolset = McpToolset()
        """The catalog's MCP servers' tools: the unbound ones are registered, ``mcp_target_tools``
        gives the ones bound to a target; the servers' sessions belong to the process's pool."""
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool, *, replace: bool = False) -> None:
        """Add ``tool``; a second tool with the same name is a ``DuplicateToolError`` unless ``replace``.

        A tool that does not declare where it runs (``tools.placement``) is a ``ToolConfigError``
        naming it: with an inventory it would otherwise be guessed to run on the worker's own host."""
        name = tool.definition.name
        require_placement(tool, name)
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

    def over_ssh(self, name: str, target: Target) -> Tool | None:
        """The catalog tool ``name`` with its commands run on ``target`` over SSH (``None`` when
        the catalog does not let it run there); one SSH connection per target, reused."""
        spec = self.catalog.specs.get(name) if self.catalog is not None else None
        if spec is None or self.catalog is None or "ssh" not in spec.targets or target.ssh is None:
            return None
        runner = self._ssh.get(target.name)
        if runner is None:
            runner = self._ssh[target.name] = SshRunner(target.ssh, name=target.name)
        return self.catalog.build_for_runner(spec, runner.run)

    def mcp_target_tools(self, target: Target) -> list[Tool]:
        """The tools of the MCP servers bound to ``target`` (``target:`` in ``mcp_servers``)."""
        return list(self.mcp.by_target.get(target.name, []))

    def close(self) -> None:
        """Close the SSH connections opened for targets. MCP sessions stay open: they belong to the
        process's pool (``tools.mcp.pool``), reused by the next run and closed at exit."""
        for runner in self._ssh.values():
            runner.close()
        self._ssh.clear()


def build_registry(
    config: ToolsConfig | None = None, *, mcp_pool: Pool | None = None, extra: Iterable[Tool] = ()
) -> ToolRegistry:
    """The built-in tools and ``extra`` (a deployment's own Python tools), then the catalog
    (``config.tools_file``) on top.

    Raises ``ToolConfigError`` (``CatalogError``, ``DuplicateToolError``) on any mistake, so a
    bad configuration stops start-up instead of half-loading. The catalog's ``mcp_servers`` are
    listed now (``mcp_pool``, default: this process's pool): the worker builds the registry per
    job, and a run keeps the list its first job offered (``bot.runs.run_tools``)."""
    config = config or ToolsConfig()
    egress = config.egress_policy()  # one policy for built-in and catalog network tools
    registry = ToolRegistry([*builtin_tools(config, egress), *extra])
    if config.tools_file is not None:
        catalog = load_catalog(
            config.tools_file,
            env=config.environment(),
            command_env=config.command_env(),
            builtin_names=set(registry.names()),
            egress=egress,
            show_elapsed=config.show_elapsed,
        )
        for tool in catalog.tools:
            registry.register(tool, replace=tool.definition.name in catalog.overrides)
        registry.secret_values.extend(catalog.secret_values)
        registry.catalog = catalog
        if catalog.mcp_servers:
            # Here, not at the top: the MCP SDK takes about a second to import, in every chatops
            # process, and only a catalog with servers needs it.
            from tools.mcp.pool import process_pool
            from tools.mcp.toolset import build_toolset

            pool = mcp_pool or process_pool()
            registry.mcp = build_toolset(catalog.mcp_servers, pool, taken=registry.names())
            for mcp_tool in registry.mcp.tools:
                registry.register(mcp_tool)
            registry.secret_values.extend(registry.mcp.secret_values)
    check_declarations(registry.tools(), registry.catalog)
    return registry


def check_declarations(tools: Iterable[Tool], catalog: Catalog | None = None) -> None:
    """Every declared check, before-read and undo names a tool that is there, of the right kind,
    with arguments it has, from the action's parameters (``tools.verification``). A catalog
    tool's mistake is a ``CatalogError`` naming its file, tool and field; a built-in's, a
    ``ToolConfigError``."""
    offered = list(tools)
    by_name = {tool.definition.name: tool for tool in offered}
    catalog_names = set(catalog.specs) if catalog is not None else set()
    catalog_problems: list[str] = []
    for tool in offered:
        declared = getattr(tool, "declared", None)
        if not isinstance(declared, Declared):
            continue
        name = tool.definition.name
        params = set(tool.definition.parameters.get("properties", {}))
        for field_name, message in declaration_problems(declared, tool, params, by_name):
            if catalog is not None and name in catalog_names:
                catalog_problems.append(f"tool {name!r}, field {field_name!r}: {message}")
            else:
                raise ToolConfigError(f"built-in tool {name}, {field_name}: {message}")
    if catalog_problems and catalog is not None:
        raise CatalogError(str(catalog.path), catalog_problems)


def build_registry_from_settings(
    settings: ToolSettings, env: Mapping[str, str] | None = None, *, extra: Iterable[Tool] = ()
) -> ToolRegistry:
    """``build_registry`` from a ``bot.settings.Settings`` (or anything with the same fields)."""
    return build_registry(ToolsConfig.from_settings(settings, env), extra=extra)


def shared_mcp_sessions(config: ToolsConfig) -> McpHost | None:
    """The forking worker's MCP sessions for the catalog's servers, served to its work horses
    (``tools.mcp.sharing``); ``None`` without servers. Nothing starts until a horse asks. A
    catalog whose servers do not load is left to the jobs, which report it where runs report
    errors; a mistake in its tools does not stop the sharing (the jobs report that too)."""
    if config.tools_file is None:
        return None
    try:
        servers = load_mcp_servers(config.tools_file, env=config.environment())
    except ToolConfigError as exc:
        log.warning("MCP sessions are not shared with the work horses: %s", exc)
        return None
    if not servers:
        return None
    from tools.mcp.sharing import McpHost  # the MCP SDK, only when a server is configured

    return McpHost(servers)


def build_output_filter(
    settings: OutputSettings, registry: ToolRegistry | None = None, env: Mapping[str, str] | None = None
) -> OutputFilter:
    """The run's ``tool_output_filter``: settings' redaction and cap, plus the registry's secrets."""
    extra = registry.secret_values if registry is not None else ()
    return OutputFilter.from_settings(settings, env=env, extra_secrets=extra)
