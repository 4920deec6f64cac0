"""``chatops policy check [FILE]`` and ``chatops policy explain --user U… --tool NAME [--target T]``.

``check`` reads the policy file (``CHATOPS_POLICY_FILE`` or ``FILE``) and prints every mistake,
each naming the file, the rule and the field (exit 1), or a summary of its rules (exit 0).
``explain`` says what applies to one call and why: offered or not, denied by which rule, who may
request it, who may approve it and how many must, and whether ``--user`` may approve it. The
target's labels come from the inventory (``CHATOPS_INVENTORY_FILE``), the tool's category from
the registry (or ``--category``); group memberships from Slack (the bot token) and an active
break-glass from Redis, or, offline, from ``--member-of`` (then ``--user`` is taken as a full
member of the workspace) and ``--break-glass``.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from agent.tooling import ToolCategory
from bot.errors import BotConfigurationError
from bot.policy.explain import explain
from bot.policy.file import load_policy
from bot.policy.rules import AccountKind, Identity, Policy, Subject
from bot.settings import Settings


@dataclass(frozen=True)
class StatedIdentity:
    """Memberships stated on the command line: ``user`` a full member, in ``groups``."""

    user: str
    groups: frozenset[str]

    def kind(self, user: str) -> AccountKind | None:
        return AccountKind.MEMBER if user == self.user else None

    def members(self, group: str) -> frozenset[str] | None:
        return frozenset({self.user}) if group in self.groups else frozenset()


def configure_cli(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="policy_command", required=True, metavar="ACTION")
    check = commands.add_parser("check", help="validate a policy file")
    check.add_argument("file", nargs="?", help="the file (default: CHATOPS_POLICY_FILE)")
    why = commands.add_parser("explain", help="what applies to one call, and why")
    why.add_argument("--file", help="the policy file (default: CHATOPS_POLICY_FILE)")
    why.add_argument("--user", required=True, help="the Slack user ID asking or approving (U…)")
    why.add_argument("--tool", required=True, help="the tool's name")
    why.add_argument("--target", default="", help="the inventory target the call acts on")
    why.add_argument("--channel", default="", help="the channel ID of the run (C…)")
    why.add_argument("--category", choices=[c.value for c in ToolCategory], help="default: the tool's own")
    why.add_argument("--requester", default="", help="whose run it is (default: someone else)")
    why.add_argument(
        "--member-of", default=None, help="comma-separated groups --user is in (offline: Slack is not asked)"
    )
    why.add_argument(
        "--break-glass",
        action="store_true",
        help="offline: take --user as holding an active break-glass (online it is read from Redis)",
    )


def _load(settings: Settings, file: str | None) -> Policy:
    path = Path(file) if file else settings.chatops_policy_file
    if path is None:
        raise BotConfigurationError("no policy file: pass FILE or set CHATOPS_POLICY_FILE")
    return load_policy(path, tuple(settings.chatops_approvers))


def _category(settings: Settings, tool: str, given: str | None) -> ToolCategory:
    if given:
        return ToolCategory(given)
    from tools.config import ToolsConfig
    from tools.registry import build_registry

    registry = build_registry(ToolsConfig.from_settings(settings))
    found = next((t for t in registry.tools() if t.definition.name == tool), None)
    if found is None:
        raise BotConfigurationError(f"no tool {tool!r} in the registry: pass --category")
    return found.category


def _labels(settings: Settings, target: str) -> tuple[tuple[str, str], ...]:
    if not target:
        return ()
    from bot.ops.fleet import load_fleet_inventory

    found = load_fleet_inventory(settings).get(target)
    if found is None:
        raise BotConfigurationError(f"no target {target!r} in the inventory")
    return tuple(sorted(found.labels.items()))


def _identity(settings: Settings, args: argparse.Namespace, policy: Policy) -> tuple[Identity, float | None]:
    """Who ``--user`` is and until when they hold break-glass: stated (``--member-of``), or
    asked of Slack and Redis as the bot does (through Sentinel when it is configured)."""
    if args.member_of is not None:
        groups = frozenset(g.strip() for g in args.member_of.split(",") if g.strip())
        if not args.break_glass:
            return StatedIdentity(args.user, groups), None
        if policy.break_glass is None:
            raise BotConfigurationError("--break-glass: the policy has no break_glass section")
        return StatedIdentity(args.user, groups), time.time() + policy.break_glass.minutes * 60
    if args.break_glass:
        raise BotConfigurationError("--break-glass is for offline use, with --member-of")
    from bot.keys import Keys
    from bot.observability.audit import AuditLog
    from bot.policy.break_glass import BreakGlassLog
    from bot.redis_connection import open_redis
    from bot.slack.policy_identity import worker_policy

    client = open_redis(settings)
    keys = Keys(settings.chatops_redis_prefix)
    run_policy = worker_policy(settings, client, keys)
    if run_policy is None:
        raise BotConfigurationError("no policy file: set CHATOPS_POLICY_FILE or pass --member-of")
    audit = AuditLog(client, keys, max_len=settings.chatops_audit_max_len)  # unused: only read here
    until = BreakGlassLog(client, keys, audit).active_until(args.user)
    return run_policy.identity, until


def run_cli(args: argparse.Namespace, settings: Settings) -> int:
    try:
        if args.policy_command == "check":
            policy = _load(settings, args.file)
            print(f"{policy.source}: OK, {len(policy.rules)} rule(s)")
            for rule in policy.rules:
                kind = (
                    "deny"
                    if rule.deny
                    else "+".join(
                        part
                        for part, present in (("request", rule.request), ("approve", rule.approve))
                        if present
                    )
                )
                print(f"  - {rule.name}: {kind}")
            if policy.break_glass is not None:
                print(f"  break-glass: {policy.break_glass.minutes} minutes")
            return 0
        policy = _load(settings, args.file)
        subject = Subject(
            args.user,
            args.channel,
            args.tool,
            _category(settings, args.tool, args.category),
            args.target,
            _labels(settings, args.target),
        )
        identity, until = _identity(settings, args, policy)
        result = explain(policy, subject, identity, requester=args.requester, break_glass_until=until)
    except BotConfigurationError as error:
        print(f"chatops policy: {error}", file=sys.stderr)
        return 1
    print("\n".join(result.lines))
    return 0
