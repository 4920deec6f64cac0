"""Run the emulator on its own: ``python -m emulator.slack --port 3100 --events-url ... --signing-secret ...``.

Secrets default to ``SLACK_SIGNING_SECRET`` / ``SLACK_BOT_TOKEN`` from the environment so the bot
and the emulator can share one ``.env``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from types import FrameType

from emulator.slack.config import UserGroupSpec, WorkspaceConfig
from emulator.slack.server import SlackEmulator


def _pairs(values: list[str] | None, flag: str) -> dict[str, str] | None:
    """``ID:name`` arguments as a dict (None when the flag was not given)."""
    if not values:
        return None
    pairs: dict[str, str] = {}
    for value in values:
        key, sep, name = value.partition(":")
        if not sep or not key or not name:
            raise SystemExit(f"{flag} expects ID:name, got {value!r}")
        pairs[key] = name
    return pairs


def _group(value: str) -> UserGroupSpec:
    """``S_ID:handle:U1,U2`` as a user group."""
    parts = value.split(":")
    if len(parts) != 3:
        raise SystemExit(f"--usergroup expects ID:handle:U1,U2, got {value!r}")
    return UserGroupSpec(id=parts[0], handle=parts[1], users=tuple(u for u in parts[2].split(",") if u))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m emulator.slack", description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=3100)
    p.add_argument("--events-url", default=os.environ.get("SLACK_EVENTS_URL"))
    p.add_argument("--interactivity-url", default=None, help="defaults to --events-url")
    p.add_argument(
        "--signing-secret", default=os.environ.get("SLACK_SIGNING_SECRET") or "emulator-signing-secret"
    )
    p.add_argument("--bot-token", default=os.environ.get("SLACK_BOT_TOKEN") or "xoxb-emulator-token")
    p.add_argument("--bot-user-id", default="U_OPS")
    p.add_argument("--bot-id", default="B_OPS")
    p.add_argument("--bot-name", default="ops")
    p.add_argument("--user", action="append", help="ID:name, repeatable (default U_ALICE:alice U_BOB:bob)")
    p.add_argument("--channel", action="append", help="ID:name, repeatable (default C_INCIDENT:incident ...)")
    p.add_argument("--bot-channel", action="append", help="channel ID the bot is in (default C_INCIDENT)")
    p.add_argument("--usergroup", action="append", help="ID:handle:U1,U2, repeatable")
    p.add_argument("--event-timeout", type=float, default=3.0, help="seconds to wait for the bot's 2xx")
    p.add_argument(
        "--retry-delays", default="0,60,300", help="seconds before each Events API retry (Slack: 0,60,300)"
    )
    p.add_argument(
        "--no-rate-limits",
        action="store_true",
        help="turn off Slack's rate tiers (on by default: 429 + Retry-After)",
    )
    p.add_argument("--enterprise-id", default=None, help="an Enterprise Grid org's E... id on every envelope")
    return p.parse_args(argv)


def build_config(args: argparse.Namespace) -> WorkspaceConfig:
    """A workspace configuration from parsed arguments."""
    config = WorkspaceConfig(
        bot_token=args.bot_token,
        signing_secret=args.signing_secret,
        events_url=args.events_url,
        interactivity_url=args.interactivity_url,
        bot_user_id=args.bot_user_id,
        bot_id=args.bot_id,
        bot_name=args.bot_name,
        event_timeout=args.event_timeout,
        retry_delays=tuple(float(d) for d in args.retry_delays.split(",") if d.strip()),
        rate_limits=not args.no_rate_limits,
        enterprise_id=args.enterprise_id,
    )
    users = _pairs(args.user, "--user")
    if users:
        config.users = dict(users.items())
    config.channels = _pairs(args.channel, "--channel") or config.channels
    if args.bot_channel:
        config.bot_channels = tuple(args.bot_channel)
    if args.usergroup:
        config.usergroups = tuple(_group(g) for g in args.usergroup)
    return config


def main(argv: list[str] | None = None) -> int:
    """Serve until interrupted."""
    args = parse_args(argv)
    emulator = SlackEmulator(build_config(args), host=args.host, port=args.port)

    def stop(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:  # a SIGTERM may come as soon as the banner is out, while the second line is printed
        emulator.start()
        print(f"Slack emulator: page {emulator.url}/  Web API {emulator.api_url}", flush=True)
        print(f"events -> {emulator.config.events_url or '(not set: POST /control/config)'}", flush=True)
        emulator.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        emulator.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
