"""Where a tool may run: a property of the tool, declared where the tool is defined.

With an inventory, a call of a tool that reads or changes a machine must run on the machine it
is about, never on the worker's own host by accident. So every tool says where it runs:

* ``Placement.target(*kinds)``: it acts on the machine it runs on. With an inventory each call
  names its ``target`` and runs there, on that target's route (its runner, SSH, or the
  Kubernetes tools with its context); ``kinds`` are the kinds of target (``via``) that can run it:
  ``HOST`` (``runner``, ``local``) for Python code that reads files or runs commands, ``SERVICE``
  adds ``kubernetes`` for the service tools, a catalog ``run:`` tool has its ``targets:``;
* ``WORKER``: it runs in the worker process and touches no machine (it calls an HTTP API through
  the egress policy, or reads run state); it takes no ``target`` and is offered as it is.

The registry refuses a tool that declares neither (``tools.registry.ToolRegistry.register``), so a
new host tool cannot silently run where the worker runs; the fleet reads the declaration to route
each call (``bot.fleet.routing``). Wrappers forward it (``agent.tooling.WrapperTool``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from tools.errors import ToolConfigError

Where = Literal["target", "worker"]
TargetKind = Literal["runner", "local", "ssh", "kubernetes"]
"""A kind of target, as the inventory says how it is reached (``tools.inventory_types.Via``)."""
TARGET_KINDS: tuple[str, ...] = get_args(TargetKind)


@dataclass(frozen=True)
class Placement:
    """Where a tool runs (see the module docstring); build it with ``Placement.target`` or ``WORKER``."""

    where: Where
    kinds: frozenset[str] = frozenset()
    """The kinds of target that can run it (``where == "target"`` only)."""

    def __post_init__(self) -> None:
        if self.where not in get_args(Where):
            raise ToolConfigError(f"placement {self.where!r} is not one of {', '.join(get_args(Where))}")
        if self.where == "worker" and self.kinds:
            raise ToolConfigError("a tool placed in the worker runs on no kind of target")
        if self.where == "target" and not self.kinds:
            raise ToolConfigError("a tool placed on its target needs the kinds of target that can run it")
        unknown = sorted(self.kinds - set(TARGET_KINDS))
        if unknown:
            raise ToolConfigError(f"unknown kind of target {unknown[0]!r} (one of {', '.join(TARGET_KINDS)})")

    @classmethod
    def target(cls, *kinds: str) -> Placement:
        return cls("target", frozenset(kinds))

    @property
    def on_target(self) -> bool:
        return self.where == "target"

    def describe(self) -> str:
        """``worker``, or ``target (kubernetes, local, runner)``: for listings and errors."""
        return f"target ({', '.join(sorted(self.kinds))})" if self.on_target else "worker"


WORKER = Placement("worker")
HOST = Placement.target("runner", "local")
"""Python code that reads or changes the machine it runs on: a runner's host, or the worker's own."""
SERVICE = Placement.target("runner", "local", "kubernetes")
"""A service tool: on a host through its backend, or on a Kubernetes target with its context."""


def placement_of(tool: object) -> Placement | None:
    """What ``tool`` declares (its optional ``placement``); ``None`` when it declares nothing."""
    found = getattr(tool, "placement", None)
    return found if isinstance(found, Placement) else None


def require_placement(tool: object, name: str) -> Placement:
    """``tool``'s placement, or a ``ToolConfigError`` naming it: a start-up error, never a guess."""
    found = placement_of(tool)
    if found is None:
        raise ToolConfigError(
            f"tool {name} declares no placement: say where it runs where it is defined, "
            "placement=HOST (or Placement.target(...)) for a tool that reads or changes the machine it "
            "runs on, placement=WORKER for one that touches no machine (it calls an API through the "
            "egress policy or reads run state); see docs/TOOLS.md, 'Where a tool runs'"
        )
    return found
