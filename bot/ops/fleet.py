"""The fleet built from the settings (for the composition root, ``bot.ops.compose``): the inventory,
each kind of target's routes, the runner's key and policy.

``load_fleet_inventory`` is the one place the inventory is loaded and checked (once per process, at
its start: the web process, a worker, a runner). ``build_fleet`` is what a worker's runtime offers a
run (``bot.fleet.routing.Fleet``): local targets run the worker's own tools, runner targets dispatch
to the target's queue (``bot.fleet.dispatch``), SSH targets run catalog commands over SSH
(``tools.ssh``), Kubernetes targets run the service and ``kube_*`` tools with their context and
namespace. The other side, ``chatops runner --target NAME``, is ``bot.ops.compose.build_runner``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import redis

from agent.redis_util import redis_clock
from agent.tooling import Tool, ToolCategory
from bot.errors import BotConfigurationError
from bot.fleet.direct_grants import GrantCheckedRoute, PolicyNeeds
from bot.fleet.dispatch import Dispatcher, RunnerTool
from bot.fleet.grants import GrantSigner, PolicyNeed
from bot.fleet.heartbeats import Heartbeats
from bot.fleet.routing import Fleet
from bot.keys import Keys
from bot.policy.file import current_policy, load_policy
from bot.policy.rules import Policy, Subject
from bot.settings import Settings
from tools.base import ToolContext
from tools.changes.record import Change
from tools.config import ToolsConfig
from tools.errors import ToolConfigError, ToolError
from tools.inventory import Inventory, SshDefaults, Target, load_inventory
from tools.registry import ToolRegistry

VERIFIED_VIAS = frozenset({"runner", "ssh", "kubernetes"})  # a changing call there needs a signed grant


def load_fleet_inventory(settings: Settings, *, runner: bool = False) -> Inventory:
    """``CHATOPS_INVENTORY_FILE`` (or the implicit local target); a mistake stops start-up.
    ``runner``: for ``chatops runner``, which may hold only its target's key (``CHATOPS_RUNNER_KEY``)."""
    defaults = SshDefaults(
        user=settings.chatops_ssh_user or None,
        key_file=settings.chatops_ssh_key_file,
        known_hosts=settings.chatops_ssh_known_hosts,
    )
    try:
        inventory = load_inventory(settings.chatops_inventory_file, ssh_defaults=defaults)
    except ToolConfigError as error:
        raise BotConfigurationError(str(error)) from error
    remote = sorted({target.via for target in inventory if target.via in VERIFIED_VIAS})
    has_key = runner and bool(settings.chatops_runner_key)  # a runner may hold only its target's key
    if remote and not (settings.chatops_runner_secret or has_key):
        raise BotConfigurationError(
            f"the inventory has {' and '.join(remote)} targets: set CHATOPS_RUNNER_SECRET (the same value "
            "for the web process, the workers and the runners) so runners, and workers before an SSH or "
            "Kubernetes call, can verify approvals"
        )
    _check_channel_targets(settings, inventory)
    return inventory


def _check_channel_targets(settings: Settings, inventory: Inventory) -> None:
    for channel, rule in settings.chatops_channel_targets.items():
        try:
            chosen = inventory.select(rule)
        except ToolError as error:
            raise BotConfigurationError(f"CHATOPS_CHANNEL_TARGETS: {channel}: {error}") from error
        if not chosen:
            raise BotConfigurationError(
                f"CHATOPS_CHANNEL_TARGETS: {channel}: {rule!r} matches no target of the inventory"
            )


def build_fleet(
    settings: Settings,
    client: redis.Redis,
    keys: Keys,
    registry: ToolRegistry,
    inventory: Inventory | None = None,
    env: Mapping[str, str] | None = None,
) -> Fleet:
    """The worker's fleet: how each call of a run reaches its target (``env``: the commands'
    environment, default ``os.environ``, as for the registry)."""
    inventory = inventory or load_fleet_inventory(settings)
    tools_config = ToolsConfig.from_settings(settings, env)
    heartbeats = Heartbeats(client, keys, settings.chatops_runner_heartbeat_seconds)
    dispatcher = Dispatcher(
        client, keys, settings.chatops_queue, heartbeats, settings.chatops_runner_secret.encode()
    )

    signer = GrantSigner(settings.chatops_runner_secret.encode(), 0.0, clock=redis_clock(client))

    def runner_route(tool: Tool, target: Target) -> Tool:
        return RunnerTool(tool, target.name, dispatcher)

    def checked(route: Tool | None, target: Target) -> Tool | None:
        """The worker runs this route itself: it verifies each changing call's grant first."""
        if route is None:
            return None
        return GrantCheckedRoute(route, target.name, signer, target_policy(settings, target), target.health)

    return Fleet(
        inventory=inventory,
        local_tools=registry.tools(),
        routes={
            "runner": runner_route,
            "ssh": lambda tool, target: checked(registry.over_ssh(tool.definition.name, target), target),
            "kubernetes": lambda tool, target: checked(kubernetes_route(tool, target, tools_config), target),
        },
        # Tools only some targets have: Kubernetes targets' kube_* tools, MCP servers bound to a target.
        target_tools=lambda target: [
            *(
                GrantCheckedRoute(t, target.name, signer, target_policy(settings, target), target.health)
                for t in kubernetes_only_tools(target, tools_config)
            ),
            *registry.mcp_target_tools(target),
        ],
        channel_targets=dict(settings.chatops_channel_targets),
    )


def kubernetes_route(tool: Tool, target: Target, config: ToolsConfig) -> Tool | None:
    """The service tools of a Kubernetes target: its context and namespace."""
    from tools.builtin.services import KubernetesBackend, service_tools

    if target.kubernetes is None:
        return None
    backend = KubernetesBackend(config.command_env(), target.kubernetes.namespace, target.kubernetes.context)
    return next((t for t in service_tools(backend) if t.definition.name == tool.definition.name), None)


def kubernetes_only_tools(target: Target, config: ToolsConfig) -> Sequence[Tool]:
    """The ``kube_*`` tools of a Kubernetes target (other targets have none)."""
    from tools.builtin.kubernetes import kubernetes_tools

    if target.via != "kubernetes" or target.kubernetes is None:
        return ()
    kube = target.kubernetes
    return kubernetes_tools(config.command_env(), kube.namespace, kube.context)


def kubernetes_changes_of(config: ToolsConfig) -> Callable[[Target, ToolContext, float, float], list[Change]]:
    """A Kubernetes target's rollouts and events in a window (``recent_changes``' live part)."""
    from tools.builtin.services import KubernetesBackend
    from tools.changes.kubernetes import kubernetes_changes

    def read(target: Target, ctx: ToolContext, since: float, until: float) -> list[Change]:
        if target.kubernetes is None:
            return []
        kube = target.kubernetes
        backend = KubernetesBackend(config.command_env(), kube.namespace, kube.context)
        return kubernetes_changes(backend, ctx, target.name, since, until)

    return read


def target_descriptions(inventory: Inventory) -> list[str]:
    """The inventory as the system prompt lists it (``{{targets}}``)."""
    if inventory.implicit:
        return []
    return [f"{target.describe()} via {target.via}" for target in inventory]


# -- the runner (built by ``bot.ops.compose.build_runner``) ---------------------------------------


def runner_key(settings: Settings) -> bytes:
    """``CHATOPS_RUNNER_KEY``: the runner's own target's key, hex (empty: derive it from the secret)."""
    try:
        key = bytes.fromhex(settings.chatops_runner_key)
    except ValueError as error:
        raise BotConfigurationError(
            "CHATOPS_RUNNER_KEY is not hex (chatops runner --print-key prints it)"
        ) from error
    if key and len(key) != 32:
        raise BotConfigurationError("CHATOPS_RUNNER_KEY must be 64 hex digits (chatops runner --print-key)")
    return key


def runner_policy(settings: Settings, target: Target) -> PolicyNeeds | None:
    """The runner's own reading of ``CHATOPS_POLICY_FILE`` for its target (``None`` without one),
    read once at start: what a call there needs, judged from its own inventory labels, never from
    what a grant says."""
    if settings.chatops_policy_file is None:
        return None
    policy = load_policy(settings.chatops_policy_file, tuple(settings.chatops_approvers))
    return policy_needs(lambda: policy, target)


def target_policy(settings: Settings, target: Target) -> PolicyNeeds | None:
    """The worker's reading of ``CHATOPS_POLICY_FILE`` for an SSH or Kubernetes target, as the file
    is right before the call runs (read again when it changes; unreadable: the call is refused)."""
    path = settings.chatops_policy_file
    if path is None:
        return None
    approvers = tuple(settings.chatops_approvers)
    return policy_needs(lambda: current_policy(path, approvers), target)


def policy_needs(read: Callable[[], Policy], target: Target) -> PolicyNeeds:
    """What a call of (tool, category) on ``target`` needs by ``Policy.decide`` on the policy
    ``read`` returns, with the inventory's labels of the target."""
    labels = tuple(sorted(target.labels.items()))

    def need(tool: str, category: ToolCategory) -> PolicyNeed:
        try:
            policy = read()
        except (OSError, BotConfigurationError) as error:
            return PolicyNeed(denied=f"the policy file cannot be read ({error})")
        # The host does not know the run's channel: a call is denied when it is in every channel,
        # and needs the fewest approvals any channel's rules ask for (the web judged the channel,
        # and signed the count it found into the grant, which is checked too).
        channels = sorted({"", *(c for rule in policy.rules for c in rule.match.channels)})
        decisions = [policy.decide(Subject("", c, tool, category, target.name, labels)) for c in channels]
        denied = decisions[0].deny_reason if all(d.denied for d in decisions) else ""
        fewest = min(d.requirement.approvals for d in decisions)
        return PolicyNeed(denied, fewest, policy.break_glass is not None)

    return need
