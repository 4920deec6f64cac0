"""The tools a run is offered when the inventory names targets, each call routed to its target.

Which tools act on a machine, and on which kinds of target each can run:

* the built-in host tools (health, logs, files, cleanup): ``runner`` and ``local`` targets, where
  Python code can run; the service tools also on ``kubernetes`` targets (the target's context and
  namespace); the Kubernetes tools (``kube_*``) only there;
* catalog ``run:`` tools: the kinds their ``targets:`` names (default ``[runner, local]``), ``ssh``
  among them when the catalog says so;
* network tools (``http_check``, ``tcp_check``, ``dns_lookup``) and catalog ``http:`` tools act on
  no machine: they run where the worker runs, through the egress policy, and take no target.

A channel may narrow the targets (``CHATOPS_CHANNEL_TARGETS``: a target name, its default, or a
label filter; one match is the default). A tool none of the channel's targets can run is not
offered there at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from agent.tooling import Tool
from tools.inventory import Inventory, Target, parse_selector
from tools.targets import TargetedTool

HOST_KINDS = frozenset({"runner", "local"})
SERVICE_KINDS = frozenset({"runner", "local", "kubernetes"})
# The built-in tools that act on the machine they run on (the rest reach the network from the worker).
HOST_TOOLS = frozenset(
    {
        "disk_usage",
        "cpu_load",
        "memory",
        "top_processes",
        "tail_log",
        "list_logs",
        "clean_old_logs",
        "largest_files",
    }
)
SERVICE_TOOLS = frozenset({"service_status", "service_restart"})

RouteFactory = Callable[[Tool, Target], Tool | None]
"""The route of a (local tool, target) pair for one kind of target; ``None``: it cannot run there."""
KindsOf = Callable[[str], frozenset[str] | None]
"""The kinds of target a tool runs on (``None``: it acts on no machine and takes no target)."""


def builtin_kinds(name: str) -> frozenset[str] | None:
    if name in HOST_TOOLS:
        return HOST_KINDS
    if name in SERVICE_TOOLS:
        return SERVICE_KINDS
    return None


@dataclass
class Fleet:
    """The inventory and how to reach each kind of target; ``tools_for(channel)`` builds a run's list.

    ``kinds_of`` says where each local tool may run; ``routes`` builds a route per kind of target
    (``local`` is the tool itself); ``target_tools`` adds tools that exist only on some targets
    (the Kubernetes tools of a ``kubernetes`` target, by name).
    """

    inventory: Inventory
    local_tools: Sequence[Tool]
    kinds_of: KindsOf
    routes: Mapping[str, RouteFactory]
    target_tools: Callable[[Target], Sequence[Tool]] = lambda _target: ()
    channel_targets: Mapping[str, str] = field(default_factory=dict)

    def tools_for(self, channel: str) -> list[Tool]:
        """The tools of a run in ``channel``, sorted by name (the run's cacheable prefix)."""
        if self.inventory.implicit:
            return list(self.local_tools)  # one host, today's behaviour: no target argument at all
        targets, default = self._channel_targets(channel)
        offered: dict[str, Tool] = {}
        routes: dict[str, dict[str, tuple[Target, Tool]]] = {}
        bases: dict[str, Tool] = {}
        for tool in self.local_tools:
            kinds = self.kinds_of(tool.definition.name)
            if kinds is None:
                offered[tool.definition.name] = tool
                continue
            bases[tool.definition.name] = tool
            for target in targets:
                route = self._route(tool, target, kinds)
                if route is not None:
                    routes.setdefault(tool.definition.name, {})[target.name] = (target, route)
        for target in targets:
            for tool in self.target_tools(target):
                name = tool.definition.name
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

    def _channel_targets(self, channel: str) -> tuple[list[Target], str | None]:
        """The targets a run in ``channel`` may name, and its default target (if any)."""
        everything = list(self.inventory)
        rule = self.channel_targets.get(channel)
        if not rule:
            return everything, everything[0].name if len(everything) == 1 else None
        selector = parse_selector(rule)
        chosen = self.inventory.select(rule)
        if selector.name is not None:  # a name: the default; every target stays reachable
            return everything, selector.name if chosen else None
        return chosen, chosen[0].name if len(chosen) == 1 else None
