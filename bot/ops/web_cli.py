"""``chatops web``: the web process (``bot.ops.compose_web.serve_web``), with its command-line overrides."""

from __future__ import annotations

import argparse
import socket

from bot.errors import BotConfigurationError
from bot.ops.compose_web import check_web, serve_web
from bot.settings import Settings
from bot.web import prefork


def configure_cli(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, help="port to listen on (overrides PORT)")
    parser.add_argument("--host", help="interface to bind (overrides WEB_HOST)")
    parser.add_argument(
        "--fd",
        type=int,
        help="listen on the TCP socket inherited as this file descriptor instead of binding "
        "WEB_HOST:PORT (systemd socket activation passes 3; any supervisor that bound the port itself)",
    )
    parser.add_argument(
        "--workers", type=int, help="worker processes sharing the port (overrides WEB_WORKERS)"
    )
    parser.add_argument("--threads", type=int, help="app threads per worker process (overrides WEB_THREADS)")


def run_cli(args: argparse.Namespace, settings: Settings) -> int:
    updates = {
        name: value
        for name, value in (
            ("port", args.port),
            ("web_host", args.host),
            ("web_workers", args.workers),
            ("web_threads", args.threads),
        )
        if value is not None
    }
    settings = settings.model_copy(update=updates)
    check_web(settings)  # before the port is bound: a mistake is one line and exit 2 (bot.ops.cli)
    return serve_web(settings, None if args.fd is None else inherited_socket(args.fd, settings))


def inherited_socket(fd: int, settings: Settings) -> socket.socket:
    """``--fd``'s socket, or the one-line error that names what is wrong with it."""
    if settings.slack_app_token:
        raise BotConfigurationError(
            f"--fd {fd} serves Slack's requests over HTTP, but SLACK_APP_TOKEN is set and the bot uses "
            "Socket Mode, which listens on no port; fix: drop --fd, or unset SLACK_APP_TOKEN"
        )
    try:
        return prefork.inherited(fd)
    except ValueError as error:
        raise BotConfigurationError(
            f"--fd {fd}: {error}; fix: pass the descriptor of the TCP socket the supervisor bound, "
            "or drop --fd to bind WEB_HOST:PORT"
        ) from None
