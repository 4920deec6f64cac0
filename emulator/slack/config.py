"""The emulated workspace's configuration: who is in it, which channels exist, how events are delivered."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

GuestKind = Literal["", "multi_channel", "single_channel"]


@dataclass(frozen=True)
class UserSpec:
    """An account that is not a plain full member: a guest, a bot, a deactivated or external user.

    Slack marks a multi-channel guest ``is_restricted`` and a single-channel guest both
    ``is_restricted`` and ``is_ultra_restricted``. A user of another team (Slack Connect) carries
    that team's ``team_id``. ``channels`` lists the channel IDs the account is in (``None``: every
    channel, as for the plain members); a deactivated account is in none and cannot post or click.
    """

    name: str
    guest: GuestKind = ""
    is_bot: bool = False
    is_app_user: bool = False
    deleted: bool = False
    team_id: str = ""  # "" = the workspace's own team
    channels: tuple[str, ...] | None = None
    tz: str = "Etc/UTC"  # an IANA zone name: ``users.info`` answers it with its offset now

    def __post_init__(self) -> None:
        if self.guest == "single_channel" and (self.channels is None or len(self.channels) != 1):
            raise ValueError(f"a single-channel guest ({self.name}) is in exactly one channel")


@dataclass(frozen=True)
class UserGroupSpec:
    """A user group (``@oncall``): Slack calls these subteams and gives them ``S`` IDs."""

    id: str
    handle: str
    users: tuple[str, ...]
    name: str = ""


def _default_users() -> dict[str, str | UserSpec]:
    return {"U_ALICE": "alice", "U_BOB": "bob"}


def _default_channels() -> dict[str, str]:
    return {"C_INCIDENT": "incident", "C_RANDOM": "random"}


def _default_groups() -> tuple[UserGroupSpec, ...]:
    return (UserGroupSpec(id="S_ONCALL", handle="oncall", users=("U_ALICE",), name="On-call"),)


# Exactly the bot scopes of the app manifest (manifest.json; a test keeps the two equal): a call
# the manifest does not allow fails here as in a real install (``emulator.slack.scopes``).
DEFAULT_SCOPES = (
    "app_mentions:read",
    "channels:history",
    "channels:read",
    "chat:write",
    "commands",
    "files:write",
    "groups:history",
    "groups:read",
    "reactions:write",
    "usergroups:read",
    "users:read",
)


@dataclass
class WorkspaceConfig:
    """Everything a test or the demo may want to choose about the emulated Slack.

    ``events_url`` may stay ``None`` until the bot's port is known (``SlackEmulator.set_events_url``).
    Interactivity payloads go to ``interactivity_url``, or to ``events_url`` when it is unset (Bolt
    serves both on ``/slack/events``).
    """

    bot_token: str = "xoxb-emulator-token"
    signing_secret: str = "emulator-signing-secret"
    verification_token: str = "emulator-verification-token"
    events_url: str | None = None
    interactivity_url: str | None = None
    team_id: str = "T_EMULATOR"
    team_name: str = "Emulated Workspace"
    team_domain: str = "emulated"
    app_id: str = "A_OPS"
    bot_id: str = "B_OPS"
    bot_user_id: str = "U_OPS"
    bot_name: str = "ops"
    scopes: tuple[str, ...] = DEFAULT_SCOPES
    # ID -> name (a full member of the workspace) or a ``UserSpec`` (guests, bots, external users...).
    users: dict[str, str | UserSpec] = field(default_factory=_default_users)
    channels: dict[str, str] = field(default_factory=_default_channels)
    bot_channels: tuple[str, ...] = ("C_INCIDENT",)
    # Private channels (each also in ``channels``): ID -> the people in it. Nobody else is, plain
    # members included; the bot only if it is in ``bot_channels`` too.
    private_channels: dict[str, tuple[str, ...]] = field(default_factory=dict)
    usergroups: tuple[UserGroupSpec, ...] = field(default_factory=_default_groups)
    # Slack waits 3 s for a 2xx, then retries immediately, after 1 minute and after 5 minutes.
    event_timeout: float = 3.0
    retry_delays: tuple[float, ...] = (0.0, 60.0, 300.0)
    # Deliver the bot's own posts back to it as ``message`` events, as Slack does for message.channels.
    deliver_bot_messages: bool = True
    # A trigger_id may be exchanged for a modal only within 3 seconds of the interaction.
    trigger_ttl: float = 3.0
    # Slack's rate tiers and 1 message/s per channel (``emulator.slack.ratelimits``): 429 with
    # ``Retry-After``. Off only where a test measures something else and says so (never by default).
    rate_limits: bool = True
    # An Enterprise Grid org (``E...``): envelopes, payloads and ``auth.test`` carry it.
    enterprise_id: str | None = None
    enterprise_name: str = "Emulated Grid"

    def __post_init__(self) -> None:
        unnamed = sorted(set(self.private_channels) - set(self.channels))
        if unnamed:
            raise ValueError(f"private channels {unnamed} are not in channels (each needs a name)")
