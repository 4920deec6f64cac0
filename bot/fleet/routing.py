"""The tools a run is offered when the inventory names targets, each call routed to its target.

Where a tool may run is the tool's own declaration (``tools.placement``, made where it is
defined), never a list kept here:

* a tool placed on its ``target`` acts on a machine: with an inventory it takes a ``target``
  argument and each call runs on that target's route, on the kinds of target its placement names
  (the built-in host tools on ``runner`` and ``local`` targets, where Python code can run; the
  service tools also on ``kubernetes`` targets, with the target's context and namespace; a catalog
  ``run:`` tool on its ``targets:``, ``ssh`` among them when the catalog says so);
* a tool placed in the ``worker`` acts on no machine (the network tools, catalog ``http:`` tools,
  Prometheus and Alertmanager, an MCP server not bound to a target): it runs where the worker
  runs, through the egress policy, and takes no target;
* tools that exist only on some targets (the Kubernetes tools of a ``kubernetes`` target, an MCP
  server bound to one) come from ``target_tools``.

A tool that declares nothing is refused when the fleet is built (``BotConfigurationError``
naming it), as the registry refuses it: it is never guessed to run on the worker's own host.

A channel may narrow the targets (``CHATOPS_CHANNEL_TARGETS``: a target name, its default, or a
label filter; one match is the default). A tool none of the channel's targets can run is not
offered there at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from agent.tooling import Tool
from bot.errors import BotConfigurationError
from tools.errors import ToolConfigError
from tools.inventory import Inventory, Target, parse_selector
from tools.placement import Placement, require_placement
from tools.targets import TargetedTool

RouteFactory = Callable[[Tool, Target], Tool | None]
"""The route of a (local tool, target) pair for one kind of target; ``None``: it cannot run there."""


@dataclass
class Fleet:
    """The inventory and how to reach each kind of target; ``tools_for(channel)`` builds a run's list.

    Each local tool's placement says where it may run (checked here: one without is a start-up
    error); ``routes`` builds a route per kind of target (``local`` is the tool itself);
    ``target_tools`` adds tools that exist only on some targets (the Kubernetes tools of a
    ``kubernetes`` target, by name).
    """

    inventory: Inventory
    local_tools: Sequence[Tool]
    routes: Mapping[str, RouteFactory]
    target_tools: Callable[[Target], Sequence[Tool]] = lambda _target: ()
    channel_targets: Mapping[str, str] = field(default_factory=dict)
    placements: dict[str, Placement] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.placements = {tool.definition.name: _declared(tool) for tool in self.local_tools}

    def tools_for(self, channel: str) -> list[Tool]:
        """The tools of a run in ``channel``, sorted by name (the run's cacheable prefix)."""
        if self.inventory.implicit:
            return list(self.local_tools)  # one host, today's behaviour: no target argument at all
        targets, default = self._channel_targets(channel)
        offered: dict[str, Tool] = {}
        routes: dict[str, dict[str, tuple[Target, Tool]]] = {}
        bases: dict[str, Tool] = {}
        for tool in self.local_tools:
            placement = self.placements[tool.definition.name]
            if not placement.on_target:
                offered[tool.definition.name] = tool
                continue
            bases[tool.definition.name] = tool
            for target in targets:
                route = self._route(tool, target, placement.kinds)
                if route is not None:
                    routes.setdefault(tool.definition.name, {})[target.name] = (target, route)
        for target in targets:
            for tool in self.target_tools(target):
                name = tool.definition.name
                if not _declared(tool).on_target:
                    raise BotConfigurationError(
                        f"tool {name} is offered by target {target.name} but placed in the worker"
                    )
                bases.setdefault(name, tool)
                routes.setdefault(name, {})[target.name] = (target, tool)
        for name, by_target in routes.items():
            offered[name] = TargetedTool(bases[name], by_target, default=default)
        return [offered[name] for name in sorted(offered)]

    def _route(self, tool: Tool, target: Target, kinds: frozenset[str]) -> Tool | None:
        if target.via not in kinds:
            return None
        if target.via == "local":
            return tool
        factory = self.routes.get(target.via)
        return factory(tool, target) if factory is not None else None

    def targets_for(self, channel: str) -> tuple[list[Target], str | None]:
        """The targets a run in ``channel`` may name, and its default target (if any); also what
        the readers of the change journal check a target against (``bot.changes.reader``)."""
        return self._channel_targets(channel)

    def _channel_targets(self, channel: str) -> tuple[list[Target], str | None]:
        everything = list(self.inventory)
        rule = self.channel_targets.get(channel)
        if not rule:
            return everything, everything[0].name if len(everything) == 1 else None
        selector = parse_selector(rule)
        chosen = self.inventory.select(rule)
        if selector.name is not None:  # a name: the default; every target stays reachable
            return everything, selector.name if chosen else None
        return chosen, chosen[0].name if len(chosen) == 1 else None


def _declared(tool: Tool) -> Placement:
    try:
        return require_placement(tool, tool.definition.name)
    except ToolConfigError as error:
        raise BotConfigurationError(str(error)) from error
