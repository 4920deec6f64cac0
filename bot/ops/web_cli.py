"""``chatops web``: the web process (``bot.ops.compose_web.serve_web``), with its command-line overrides."""

from __future__ import annotations

import argparse

from bot.ops.compose_web import check_web, serve_web
from bot.settings import Settings


def configure_cli(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, help="port to listen on (overrides PORT)")
    parser.add_argument("--host", help="interface to bind (overrides WEB_HOST)")
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
    return serve_web(settings)
