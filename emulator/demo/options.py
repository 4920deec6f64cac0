"""The demo's options: ``python -m emulator.demo.main``'s command line (``make demo``'s ``DEMO_ARGS``)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

DEFAULT_PAGE_PORT = 3100


@dataclass
class Options:
    directory: Path = Path(".demo")
    port: int | None = None
    scenario: str = "demo"
    latency: float | None = None
    redis_url: str | None = None  # None: an embedded Redis of the demo's own
    open_browser: bool = True
    activity: bool = True


def parse_args(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m emulator.demo.main",
        description="Run the whole bot on this machine: the Slack emulator's page, a scripted model "
        "(or LLM_BASE_URL's), Redis, chatops web and chatops worker, and a simulated host.",
    )
    parser.add_argument(
        "--port", type=int, help=f"the page's port (default {DEFAULT_PAGE_PORT}, or any free one)"
    )
    parser.add_argument("--scenario", default="demo", help="scenario (set) name or YAML path (default: demo)")
    parser.add_argument(
        "--latency", type=float, help="seconds before each scripted answer (default: the scenario's)"
    )
    parser.add_argument(
        "--dir", default=".demo", help="the demo's folder: host, logs, Redis data (default .demo)"
    )
    parser.add_argument(
        "--redis-url",
        help="use this Redis (it must answer; the demo's keys are prefixed and removed on exit) "
        "instead of an embedded one of its own, the default",
    )
    parser.add_argument("--no-browser", action="store_true", help="do not open the page in a browser")
    parser.add_argument("--quiet", action="store_true", help="do not print a line per Slack message")
    args = parser.parse_args(argv)
    return Options(
        directory=Path(args.dir),
        port=args.port,
        scenario=args.scenario,
        latency=args.latency,
        redis_url=args.redis_url,
        open_browser=not args.no_browser,
        activity=not args.quiet,
    )
