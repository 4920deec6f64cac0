"""A cProfile of ``chatops web``'s ack path, in the benchmark's own process: the WSGI app called
directly with the requests a load generator sends (signed Slack deliveries, alert webhooks; no
HTTP server), so what it shows is chatops's own work."""

from __future__ import annotations

import cProfile
import io
import pstats
import re
import time
from collections.abc import Sequence
from typing import Any

from bench.common import ROOT, BenchRedis
from bench.processes import NEVER_LIMITED
from bench.slack_events import SECRET, TOKEN

PROFILE_EVENTS = 300
WARM_UP = 20  # deliveries sent before profiling starts
_PROFILED = re.compile(
    r"(bot/|agent/|rq/queue\.py.*\(enqueue\)|slack_bolt/app/app\.py.*\(dispatch\)|"
    r"redis/client\.py.*\((_execute_command|execute)\)|redis/commands/core\.py.*\(__call__\))"
)


def profile_ack_path(
    bench: BenchRedis, api_url: str, queue: str, requests: Sequence[bytes], **settings: Any
) -> tuple[str, float]:
    """cProfile of the web app's ack path in this process (WSGI calls, no HTTP server) for
    ``requests`` (HTTP requests as ``bench.loadgen`` sends them, each answered 200; the first
    ``WARM_UP`` not profiled), the emulator's Web API at ``api_url`` and any further ``settings``:
    the cumulative time of chatops's functions and of the libraries they call, and the seconds
    per request."""
    from bot.settings import Settings
    from bot.web.server import create_app

    limits: dict[str, Any] = {name.lower(): int(value) for name, value in NEVER_LIMITED.items()}
    app = create_app(
        Settings(
            _env_file=None,  # type: ignore[call-arg]
            slack_bot_token=TOKEN,
            slack_signing_secret=SECRET,
            slack_api_url=api_url,
            redis_url=bench.url,
            chatops_redis_prefix=bench.prefix,
            chatops_queue=queue,
            **{**limits, **settings},
        )
    )
    count = len(requests) - WARM_UP

    def call(raw: bytes) -> None:
        head, _, body = raw.partition(b"\r\n\r\n")
        method, path, _ = head.decode().split(" ", 2)
        environ: dict[str, Any] = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "0",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body),
            "CONTENT_LENGTH": str(len(body)),
        }
        for line in head.decode().split("\r\n")[1:]:
            name, _, value = line.partition(": ")
            key = name.upper().replace("-", "_")
            environ[key if key == "CONTENT_TYPE" else f"HTTP_{key}"] = value
        statuses: list[str] = []
        b"".join(app(environ, lambda status, headers, exc_info=None: statuses.append(status)))
        assert statuses[0].startswith("200"), statuses

    for raw in requests[:WARM_UP]:
        call(raw)  # warm-up
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    for raw in requests[WARM_UP:]:
        call(raw)
    profiler.disable()
    per_event = (time.perf_counter() - started) / count
    stream = io.StringIO()
    pstats.Stats(profiler, stream=stream).sort_stats("cumulative").print_stats(_PROFILED.pattern, 30)
    text = stream.getvalue()
    text = text[max(text.find("   ncalls"), 0) :]
    text = re.sub(r"\S*/site-packages/", "", text).replace(f"{ROOT}/", "")
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip()), per_event
