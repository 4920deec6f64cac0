"""``CHATOPS_EGRESS_UNLISTED=approve`` for the network tools: an unlisted destination needs a card.

A network tool hands ``FunctionTool`` a ``categorize`` made here (``unlisted_category``): a call
whose destination the policy does not list, and which an approval could open
(``EgressPolicy.needs_approval``, judged before any name is resolved), becomes a mutating call
with a reason the card shows. Once approved, the tool runs that one execution under
``policy_for``: the policy plus exactly the destination the card named. A call not approved for
that reason (``ToolContext.escalated`` unset) gets the policy as it is, so a mutating tool's
approval never opens a host, and nothing is remembered for the next call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from agent.tooling import CallCategory, ToolCategory
from tools.base import ToolContext
from tools.egress import Destination, EgressPolicy

ArgsT = TypeVar("ArgsT")
DestinationOf = Callable[[ArgsT], "Destination | None"]


def unlisted_category(egress: EgressPolicy, destination: Destination | None) -> CallCategory | None:
    """A mutating call, with the reason a person reads, when ``destination`` needs approval."""
    if destination is None or not egress.needs_approval(destination):
        return None
    return CallCategory(ToolCategory.MUTATING, approval_reason(destination))


def approval_reason(destination: Destination) -> str:
    """Why the card asks, in plain text (the host is the model's: the card shows it inert)."""
    if destination.port is None:
        return (
            f"This call looks up {destination.host} in DNS, a name that is not on the egress allow "
            "list (CHATOPS_EGRESS_ALLOW): the query itself carries the name to that domain's name "
            "servers. Approving sends this one lookup; the next call asks again."
        )
    return (
        f"This call connects to {destination.host} on port {destination.port}, which is not on "
        "the egress allow list (CHATOPS_EGRESS_ALLOW). Approving lets this one call reach that host "
        "and port only; loopback, cloud metadata and the bot's own ports stay closed, and the next "
        "call asks again."
    )


def categorizer(
    egress: EgressPolicy, destination_of: DestinationOf[ArgsT]
) -> Callable[[ArgsT], CallCategory | None]:
    """The ``categorize`` of a network tool whose arguments name ``destination_of(args)``."""

    def categorize(args: ArgsT) -> CallCategory | None:
        return unlisted_category(egress, destination_of(args))

    return categorize


def policy_for(egress: EgressPolicy, destination: Destination | None, ctx: ToolContext) -> EgressPolicy:
    """The policy this execution connects through: ``destination`` opened only if a person
    approved this call for it (and ``approving`` agrees it is one an approval may open)."""
    if not ctx.escalated or destination is None:
        return egress
    return egress.approving(destination)
