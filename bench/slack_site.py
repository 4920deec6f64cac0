"""The Slack side of the benchmarks that drive ``chatops web`` as deployed (``bench.ingress``,
``bench.alerts``): the mentions they send, the check that each became exactly one run, and the
environment of the web and worker processes talking to the Slack emulator.

Mentions are spread over ``CHANNELS`` channels and people, as a workspace's traffic is, so no
channel's set of active runs grows unrealistically; each is a new thread whose message ``ts``
is unique per batch and never one the emulator hands out itself.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence

from agent.redis_util import as_text
from bench.common import BenchRedis, run_records
from bench.processes import worker_env
from bench.slack_events import BOT_USER, SECRET, TOKEN, mention_request
from bot.keys import Keys

CHANNELS = 1000
INSTANT_RUNTIME = "bench.runtimes:instant_runtime"

_TS_BASE = int(time.time()) - 10_000_000
_BATCHES = itertools.count()


def channel_of(ts: str) -> str:
    """The channel of the event whose message has ``ts`` (spread by the event's index)."""
    return f"C_B{int(ts.split('.')[1]) % CHANNELS:04d}"


def event_requests(port: int, tag: str, count: int) -> tuple[list[bytes], list[str]]:
    """``count`` signed ``app_mention`` deliveries (each a new thread), and their message ts."""
    stamp = str(int(time.time()))
    base = _TS_BASE + next(_BATCHES) * 100  # unique per batch; never the emulator's own ts
    requests, tss = [], []
    text = f"<@{BOT_USER}> web-03 is out of disk, deal with it"
    for index in range(count):
        ts = f"{base}.{index:06d}"
        user = f"U_B{index % CHANNELS:04d}"
        requests.append(mention_request(port, stamp, f"Ev{tag}{index:07d}", channel_of(ts), ts, user, text))
        tss.append(ts)
    return requests, tss


def check_runs(bench: BenchRedis, tss: Sequence[str], expected_total: int) -> tuple[bool, str]:
    """Every event is exactly one run: its message claim names a run started by it, none shared;
    and there are ``expected_total`` run records under the prefix (every run started so far)."""
    keys = Keys(bench.prefix)
    client = bench.client
    pipe = client.pipeline(transaction=False)
    for ts in tss:
        pipe.get(keys.seen_message(channel_of(ts), ts))
    run_ids = [as_text(v) or "" for v in pipe.execute()]
    missing = sum(1 for r in run_ids if not r or r in ("pending", "done"))
    pipe = client.pipeline(transaction=False)
    for run_id in run_ids:
        pipe.hget(keys.run(run_id or "none"), "message_ts")
    mismatched = sum(1 for ts, got in zip(tss, pipe.execute(), strict=True) if as_text(got) != ts)
    distinct = len(set(run_ids))
    records = len(run_records(bench))
    ok = missing == 0 and mismatched == 0 and distinct == len(tss) and records == expected_total
    detail = (
        f"{len(tss)} events -> {distinct} distinct runs; {missing} without a run, {mismatched} not "
        f"matching; {records} run records in Redis for {expected_total} runs so far"
    )
    return ok, detail


def server_env(
    bench: BenchRedis, queue: str, api_url: str, port: int, runtime: str = INSTANT_RUNTIME, **extra: str
) -> dict[str, str]:
    """The environment of ``chatops web`` and ``chatops worker``: the benchmark's Redis prefix and
    queue, the workspace's token and signing secret, the emulator's Web API at ``api_url``."""
    return worker_env(
        bench,
        queue,
        runtime,
        SLACK_BOT_TOKEN=TOKEN,
        SLACK_SIGNING_SECRET=SECRET,
        SLACK_API_URL=api_url,
        PORT=str(port),
        WEB_HOST="127.0.0.1",
        **extra,
    )
