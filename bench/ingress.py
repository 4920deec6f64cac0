"""Slack ingress: signed ``app_mention`` events at steady rates into ``chatops web`` as deployed.

``chatops web`` (its production server, default ``WEB_WORKERS`` / ``WEB_THREADS``) with a
real Redis, one ``chatops worker`` draining the runs (``nice`` 19: on a 2-core machine it takes
only what the web process leaves), and the Slack emulator answering the bot's ``auth.test``.
A lean open-loop generator (``bench.loadgen``: pre-signed requests, keep-alive, one asyncio loop)
sends each rate for a fixed time. Afterwards every event is checked to have become exactly one
run: its message claim names a run whose record has the event's ``ts``, no two events share a
run, and there are exactly as many run records as events.

In the same run: a bare Bolt app on the same server and Bolt options whose handler only acks
(``bench.bare_app``), at the same rates; and 300 events/s again with 200 slow-loris connections
held open (``bench.slow_clients`` in a process of its own, reopening each one the server cuts).

Targets: p99 at most 20 ms at 300 events/s (load generator on the same 2 cores), zero errors,
p50 within 1.3x of the bare app; with 200 slow connections open, zero errors and p99 within
Slack's 3 s.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import hashlib
import hmac
import io
import itertools
import json
import os
import pstats
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from agent.keys import Keys
from agent.redis_memory import as_text
from bench import loadgen
from bench.common import (
    NEVER_LIMITED,
    ROOT,
    BenchRedis,
    Options,
    Process,
    Result,
    bench_redis,
    chatops_command,
    free_port,
    http_status,
    parse_options,
    percentile,
    processes,
    rq_patterns,
    save_plot,
    settle,
    start_process,
    wait_until,
    worker_env,
)
from emulator.slack import SlackEmulator, WorkspaceConfig

NAME = "ingress"
RATES = (100, 300, 500)
SECONDS = 20.0
QUICK_RATES = (20,)
QUICK_SECONDS = 1.0
SECRET = "bench-signing-secret"
TOKEN = "xoxb-bench-token"
CHANNELS = 1000  # events are spread over this many channels and people, as a workspace's traffic is
BOT_USER = "U_OPS"
TARGET_RATE = 300
TARGET_P99_MS = 20.0
TARGET_P50_RATIO = 1.3
# The slow-client case: this many slow-loris connections held open (half trickling a head, half a
# body, a byte a second, each opened again when the server cuts it) while TARGET_RATE is sent.
SLOW_CLIENTS = 200
QUICK_SLOW_CLIENTS = 20
SLOW_SERVER = "chatops, slow clients"
SLACK_DEADLINE_MS = 3000.0


_TS_BASE = int(time.time()) - 10_000_000
_BATCHES = itertools.count()


@dataclass
class Step:
    server: str
    rate: int
    sent: int
    ok: int
    errors: int
    latencies_ms: list[float]
    achieved_rate: float
    retried: int = 0
    error_kinds: str = ""
    cpu_ms: dict[str, float] = field(default_factory=dict)
    runs_ok: bool | None = None
    runs_detail: str = ""
    slow: dict[str, Any] = field(default_factory=dict)  # the slow-client case's tally

    def p(self, q: float) -> float:
        return percentile(self.latencies_ms, q)


def channel_of(ts: str) -> str:
    """The channel of the event whose message has ``ts`` (spread by the event's index)."""
    return f"C_B{int(ts.split('.')[1]) % CHANNELS:04d}"


def mention_request(
    port: int, stamp: str, event_id: str, channel: str, ts: str, user: str, text: str
) -> bytes:
    """One signed ``app_mention`` delivery (an HTTP/1.1 request with keep-alive), as Slack sends it."""
    event = {"type": "app_mention", "user": user, "text": text, "ts": ts, "channel": channel, "event_ts": ts}
    body = json.dumps(
        {
            "token": "unused",
            "team_id": "T_EMULATOR",
            "api_app_id": "A_OPS",
            "event": event,
            "type": "event_callback",
            "event_id": event_id,
            "event_time": int(stamp),
            "authorizations": [{"team_id": "T_EMULATOR", "user_id": BOT_USER, "is_bot": True}],
        }
    ).encode()
    base_string = b"v0:" + stamp.encode() + b":" + body
    signature = "v0=" + hmac.new(SECRET.encode(), base_string, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": signature,
    }
    return loadgen.post("127.0.0.1", port, "/slack/events", body, headers)


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


def send(
    port: int, server: str, rate: int, seconds: float, tag: str, meters: dict[str, CpuMeter] | None = None
) -> tuple[Step, list[str]]:
    """Send one rate; returns the step and the ts of the events that were acknowledged (200)."""
    requests, tss = event_requests(port, tag, int(rate * seconds))
    before = {name: meter.read() for name, meter in (meters or {}).items()}
    started = time.monotonic()
    outcomes = loadgen.run("127.0.0.1", port, requests, rate)
    elapsed = time.monotonic() - started
    cpu = {
        name: (meter.read() - before[name]) / len(requests) * 1000 for name, meter in (meters or {}).items()
    }
    ok = [o for o in outcomes if o.status == 200]
    step = Step(
        server=server,
        rate=rate,
        sent=len(requests),
        ok=len(ok),
        errors=len(outcomes) - len(ok),
        latencies_ms=[o.latency * 1000 for o in outcomes],
        achieved_rate=len(requests) / max(elapsed, 1e-9),
        retried=sum(1 for o in outcomes if o.retried),
        error_kinds=", ".join(sorted({o.error or str(o.status) for o in outcomes if o.status != 200})),
        cpu_ms=cpu,
    )
    print(
        f"{server:8s} {rate:4d}/s: sent {step.sent}, ok {step.ok}, errors {step.errors} {step.error_kinds}, "
        f"resent on a stale keep-alive connection {step.retried}, "
        f"p50 {step.p(50):.2f} ms, p99 {step.p(99):.2f} ms, max {max(step.latencies_ms):.1f} ms; CPU ms/event "
        + ", ".join(f"{name} {value:.2f}" for name, value in cpu.items())
    )
    acked = {o.index for o in ok}
    return step, [ts for index, ts in enumerate(tss) if index in acked]


class CpuMeter:
    """CPU seconds used so far by a process tree (reaped children included), or by Redis."""

    def __init__(self, pid: int | None = None, redis_client: Any = None, *, tree: bool = True) -> None:
        self._process = psutil.Process(pid) if pid is not None else None
        self._redis = redis_client
        self._tree = tree

    def read(self) -> float:
        if self._redis is not None:
            info = self._redis.info("cpu")
            return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
        assert self._process is not None
        if not self._tree:  # this process alone (its children are the servers, metered apart)
            times = self._process.cpu_times()
            return float(times.user + times.system)
        total = 0.0
        for process in [self._process, *self._process.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                times = process.cpu_times()
                total += times.user + times.system + times.children_user + times.children_system
        return total


def check_runs(bench: BenchRedis, tss: Sequence[str], expected_total: int) -> tuple[bool, str]:
    """Every event is exactly one run: its message claim names a run started by it, none shared."""
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
    records = len(_run_keys(bench))
    ok = missing == 0 and mismatched == 0 and distinct == len(tss) and records == expected_total
    detail = (
        f"{len(tss)} events -> {distinct} distinct runs; {missing} without a run, {mismatched} not "
        f"matching; {records} run records in Redis for {expected_total} events so far"
    )
    return ok, detail


PROFILE_EVENTS = 300
_PROFILED = re.compile(
    r"(bot/|agent/|rq/queue\.py.*\(enqueue\)|slack_bolt/app/app\.py.*\(dispatch\)|"
    r"redis/client\.py.*\((_execute_command|execute)\)|redis/commands/core\.py.*\(__call__\))"
)


def profile_ack_path(bench: BenchRedis, slack: SlackEmulator, queue: str, count: int) -> tuple[str, float]:
    """cProfile of the web app's ack path in this process (WSGI calls, no HTTP server): the
    cumulative time of chatops's functions and of the libraries they call, per event."""
    from bot.settings import Settings
    from bot.slack.web import create_app

    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        slack_bot_token=TOKEN,
        slack_signing_secret=SECRET,
        slack_api_url=slack.api_url,
        redis_url=bench.url,
        chatops_redis_prefix=bench.prefix,
        chatops_queue=queue,
        **{name.lower(): int(value) for name, value in NEVER_LIMITED.items()},
    )
    app = create_app(settings)
    requests, _ = event_requests(0, "P", count + 20)

    def call(raw: bytes) -> None:
        head, _, body = raw.partition(b"\r\n\r\n")
        environ: dict[str, Any] = {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": "/slack/events",
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

    for raw in requests[:20]:
        call(raw)  # warm-up
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    for raw in requests[20:]:
        call(raw)
    profiler.disable()
    per_event = (time.perf_counter() - started) / count
    stream = io.StringIO()
    pstats.Stats(profiler, stream=stream).sort_stats("cumulative").print_stats(_PROFILED.pattern, 30)
    text = stream.getvalue()
    text = text[max(text.find("   ncalls"), 0) :]
    text = re.sub(r"\S*/site-packages/", "", text).replace(f"{ROOT}/", "")
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip()), per_event


def _port_open(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True
    return False


@contextlib.contextmanager
def emulator() -> Iterator[SlackEmulator]:
    slack = SlackEmulator(WorkspaceConfig(signing_secret=SECRET, bot_token=TOKEN)).start()
    try:
        yield slack
    finally:
        slack.close()


def server_env(bench: BenchRedis, queue: str, slack: SlackEmulator, port: int) -> dict[str, str]:
    return worker_env(
        bench,
        queue,
        "bench.runtimes:instant_runtime",
        SLACK_BOT_TOKEN=TOKEN,
        SLACK_SIGNING_SECRET=SECRET,
        SLACK_API_URL=slack.api_url,
        PORT=str(port),
        WEB_HOST="127.0.0.1",
    )


def send_with_slow_clients(
    port: int, rate: int, seconds: float, meters: dict[str, CpuMeter], count: int, logs: Path
) -> tuple[Step, list[str]]:
    """``send`` while ``count`` slow clients (``bench.slow_clients``, a process of their own) hold
    connections to the web process; the step's ``slow`` says what became of them."""
    logs.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "bench.slow_clients", "--port", str(port), "--reconnect"]
    command += [
        "--headers",
        str(count // 2),
        "--body",
        str(count - count // 2),
        "--seconds",
        str(seconds + 30),
    ]
    with subprocess.Popen(command, stdout=subprocess.PIPE, cwd=ROOT, text=True) as slow:
        assert slow.stdout is not None
        ready = json.loads(slow.stdout.readline())
        step, tss = send(port, SLOW_SERVER, rate, seconds, f"S{rate}", meters)
        slow.send_signal(signal.SIGTERM)
        tally = json.loads(slow.stdout.readline())
    step.slow = {"count": count, "open_at_start": ready["ready"], **tally}
    print(f"  slow clients: {step.slow}")
    return step, tss


def _report_slow_clients(result: Result, steps: list[Step]) -> None:
    slow = next(s for s in steps if s.server == SLOW_SERVER)
    none = next((s for s in steps if s.server == "chatops" and s.rate == slow.rate), None)
    rows: list[list[object]] = []
    for label, step in (("none", none), (f"{slow.slow['count']} open", slow)):
        if step is not None:
            rows.append(
                [
                    label,
                    step.rate,
                    f"{step.achieved_rate:.0f}",
                    step.sent,
                    step.errors,
                    step.p(50),
                    step.p(99),
                    max(step.latencies_ms),
                ]
            )
    result.add_table(
        f"Slow clients: signed mentions at {slow.rate}/s into chatops web with and without slow-loris "
        f"connections open (each trickles a head or a body a byte a second and is opened again when "
        f"the server cuts it after its header or body timeout), ack latency in milliseconds",
        ["slow connections", "events/s", "sent/s", "events", "errors", "p50 ms", "p99 ms", "max ms"],
        rows,
    )
    result.note(
        f"slow clients: {slow.slow['open_at_start']} open at the start, {slow.slow['open_at_end']} at the end; "
        f"{slow.slow['cut_by_server']} cut by the server (median lifetime {slow.slow['median_lifetime_s']} s) "
        f"and opened again; {slow.slow['answered']} answered; {slow.runs_detail}"
    )
    result.data["slow_clients"] = {"p50": slow.p(50), "p99": slow.p(99), "errors": slow.errors, **slow.slow}
    result.target(
        f"with {slow.slow['count']} slow connections open: zero errors, p99 within Slack's 3 s",
        f"{slow.errors} errors, p99 {slow.p(99):.1f} ms",
        slow.errors == 0 and slow.p(99) <= SLACK_DEADLINE_MS,
    )


def main(argv: Sequence[str] | None = None) -> int:
    def extra(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--no-worker",
            action="store_true",
            help="no worker on the machine (to see what its forks cost the acks)",
        )

    options, args = parse_options(__doc__ or NAME, argv, extra)
    rates = QUICK_RATES if options.quick else RATES
    seconds = QUICK_SECONDS if options.quick else SECONDS
    logs = Path(f"/tmp/chatops-bench-{NAME}-{uuid.uuid4().hex[:6]}")
    steps: list[Step] = []
    with bench_redis(NAME) as bench, emulator() as slack:
        queue = f"bench-{NAME}-{uuid.uuid4().hex[:8]}"
        try:
            load = settle(options.settle)
            result = Result(NAME, "Slack ingress", options.quick, load)
            # The comparison first, on an idle machine: the bare Bolt app on the same server.
            port = free_port()
            started: list[Process] = []
            with processes(started):
                env = server_env(bench, queue, slack, port)
                started.append(start_process("bare", [sys.executable, "-m", "bench.bare_app"], env, logs))
                wait_until(lambda: _port_open(port), 30, "the bare app to listen", watch=started)
                meters = _meters(bench, started)
                if not options.quick:
                    send(port, "bare", rates[0], 2.0, "warm")  # warm-up
                for rate in rates:
                    steps.append(send(port, "bare", rate, seconds, f"B{rate}", meters)[0])
                    time.sleep(1)
            # chatops web as deployed, with a worker draining the runs.
            port = free_port()
            started = []
            with processes(started):
                env = server_env(bench, queue, slack, port)
                started.append(start_process("web", [*chatops_command(), "web"], env, logs))
                if not args.no_worker:
                    started.append(
                        start_process("worker", [*chatops_command(), "worker"], env, logs, nice=19)
                    )
                wait_until(
                    lambda: http_status(f"http://127.0.0.1:{port}/healthz") == 200,
                    30,
                    "chatops web",
                    watch=started,
                )
                meters = _meters(bench, started)
                total = 0
                if not options.quick:
                    _, warm_tss = send(port, "chatops", rates[0], 2.0, "warm")
                    total += len(warm_tss)
                for rate in rates:
                    step, tss = send(port, "chatops", rate, seconds, f"C{rate}", meters)
                    total += len(tss)
                    step.runs_ok, step.runs_detail = check_runs(bench, tss, total)
                    print(f"  runs: {'OK' if step.runs_ok else 'WRONG'}: {step.runs_detail}")
                    steps.append(step)
                    time.sleep(1)
                slow_rate = rates[0] if options.quick else TARGET_RATE
                slow_count = QUICK_SLOW_CLIENTS if options.quick else SLOW_CLIENTS
                step, tss = send_with_slow_clients(port, slow_rate, seconds, meters, slow_count, logs)
                total += len(tss)
                step.runs_ok, step.runs_detail = check_runs(bench, tss, total)
                print(f"  runs: {'OK' if step.runs_ok else 'WRONG'}: {step.runs_detail}")
                steps.append(step)
                finished = _finished_runs(bench)
            profiled_events = 30 if options.quick else PROFILE_EVENTS
            profile, profiled_per_event = profile_ack_path(bench, slack, queue, profiled_events)
        finally:
            _cleanup(bench, queue)
    _report(result, [s for s in steps if s.server != SLOW_SERVER], rates, seconds, finished)
    _report_slow_clients(result, steps)
    if args.no_worker:
        result.note("**No worker ran during this measurement (`--no-worker`).**")
    result.data["profile"] = profile
    result.note(
        f"cProfile of the ack path in one process (the WSGI app called directly, {profiled_events} mentions, "
        f"{profiled_per_event * 1000:.2f} ms per mention under the profiler), cumulative time of chatops's "
        f"functions and the library calls they make:\n\n```\n{profile}\n```"
    )
    _plot(options, result, steps, rates)
    result.save(options)
    return 0


def _meters(bench: BenchRedis, started: Sequence[Process]) -> dict[str, CpuMeter]:
    meters = {process.name: CpuMeter(process.popen.pid) for process in started}
    meters["Redis"] = CpuMeter(redis_client=bench.client)
    meters["bench process"] = CpuMeter(os.getpid(), tree=False)
    return meters


def _run_keys(bench: BenchRedis) -> list[bytes]:
    """The run records under our prefix (not their ``:messages``, ``:lease``, ... keys)."""
    skip = len(bench.prefix)
    return [
        key
        for key in bench.client.scan_iter(match=f"{bench.prefix}run:*", count=5000)
        if key[skip:].count(b":") == 1
    ]


def _finished_runs(bench: BenchRedis) -> int:
    keys = Keys(bench.prefix)
    return int(bench.client.zcard(keys.active_runs()))


def _cleanup(bench: BenchRedis, queue: str) -> None:
    """RQ's job hashes are not under our prefix: delete the ones our runs enqueued, then the queue."""
    client = bench.client
    batch = _run_keys(bench)
    for start in range(0, len(batch), 1000):
        pipe = client.pipeline(transaction=False)
        for key in batch[start : start + 1000]:
            pipe.hget(key, "job_id")
        jobs = [as_text(j) for j in pipe.execute() if j]
        if jobs:
            client.delete(*[f"rq:job:{j}" for j in jobs])
    bench.cleanup(*rq_patterns(queue))


def _report(result: Result, steps: list[Step], rates: Sequence[int], seconds: float, active: int) -> None:
    bare = {s.rate: s for s in steps if s.server == "bare"}
    ours = {s.rate: s for s in steps if s.server == "chatops"}
    rows: list[list[object]] = []
    for rate in rates:
        for step in (ours[rate], bare[rate]):
            rows.append(
                [
                    "chatops web" if step.server == "chatops" else "bare Bolt app",
                    rate,
                    f"{step.achieved_rate:.0f}",
                    step.sent,
                    step.errors,
                    step.retried,
                    step.p(50),
                    step.p(99),
                    max(step.latencies_ms),
                    f"{step.p(50) / bare[rate].p(50):.2f}x",
                    "-" if step.runs_ok is None else ("yes" if step.runs_ok else "NO"),
                ]
            )
    result.add_table(
        f"Ack latency in milliseconds ({seconds:.0f} s per rate, open loop, keep-alive; "
        "p50 ratio against the bare Bolt app at the same rate; resent: sent again after the server had "
        "closed the idle keep-alive connection it went out on)",
        [
            "server",
            "events/s",
            "sent/s",
            "events",
            "errors",
            "resent",
            "p50 ms",
            "p99 ms",
            "max ms",
            "p50 / bare",
            "one run each",
        ],
        rows,
    )
    names = sorted(
        {name for s in steps for name in s.cpu_ms}, key=lambda n: (n == "Redis", n.startswith("bench"), n)
    )
    cpu_rows: list[list[object]] = []
    for rate in rates:
        for step in (ours[rate], bare[rate]):
            total = sum(step.cpu_ms.values())
            cpu_rows.append(
                [
                    "chatops web" if step.server == "chatops" else "bare Bolt app",
                    rate,
                    *[step.cpu_ms.get(name, float("nan")) for name in names],
                    total,
                    f"{total * rate / 1000:.2f}",
                ]
            )
    result.add_table(
        "CPU milliseconds per event, by process (the web server's and the worker's trees, Redis, the bench "
        "process running the load generator), and the cores they keep busy at that rate (of 2)",
        ["server", "events/s", *names, "total", "cores busy"],
        cpu_rows,
    )
    for rate in rates:
        result.note(f"{rate} events/s: {ours[rate].runs_detail}")
    result.note(
        f"runs still queued or running when the load stopped (the nice'd worker drains them later): {active}"
    )
    result.data = {
        "steps": [
            {
                "server": s.server,
                "rate": s.rate,
                "p50": s.p(50),
                "p90": s.p(90),
                "p99": s.p(99),
                "max": max(s.latencies_ms),
                "errors": s.errors,
                "sent": s.sent,
                "runs_ok": s.runs_ok,
                "cpu_ms": s.cpu_ms,
            }
            for s in steps
        ]
    }
    target = ours.get(TARGET_RATE) or ours[rates[-1]]
    errors = sum(s.errors for s in ours.values())
    result.target(
        f"p99 at most {TARGET_P99_MS:.0f} ms at {target.rate} events/s",
        f"{target.p(99):.1f} ms",
        target.p(99) <= TARGET_P99_MS,
    )
    result.target("zero errors (every rate)", f"{errors} errors", errors == 0)
    ratio = target.p(50) / bare[target.rate].p(50)
    result.target(
        f"p50 within {TARGET_P50_RATIO}x of the bare Bolt app at {target.rate} events/s",
        f"{target.p(50):.2f} ms vs {bare[target.rate].p(50):.2f} ms = {ratio:.2f}x",
        ratio <= TARGET_P50_RATIO,
    )
    every = all(s.runs_ok for s in ours.values())
    result.target("every event became exactly one run", "yes" if every else "NO", every)


def _plot(options: Options, result: Result, steps: list[Step], rates: Sequence[int]) -> None:
    def draw(axes: Any) -> None:
        for server, color in (("chatops", "tab:blue"), ("bare", "tab:gray")):
            chosen = [s for s in steps if s.server == server]
            label = "chatops web" if server == "chatops" else "bare Bolt app"
            axes.plot(
                [s.rate for s in chosen], [s.p(50) for s in chosen], "-o", color=color, label=f"{label} p50"
            )
            axes.plot(
                [s.rate for s in chosen], [s.p(99) for s in chosen], "--s", color=color, label=f"{label} p99"
            )
        axes.axhline(
            TARGET_P99_MS,
            color="red",
            linewidth=0.8,
            linestyle=":",
            label=f"p99 target {TARGET_P99_MS:.0f} ms",
        )
        axes.set_yscale("log")
        axes.set_xticks(list(rates))
        axes.set_xlabel("events per second (open loop)")
        axes.set_ylabel("ack latency (ms)")
        axes.set_title("Slack ingress: ack latency, chatops web vs a bare Bolt app")
        axes.legend(fontsize=7)
        axes.grid(True, which="both", alpha=0.3)

    save_plot(options, NAME, draw, result)


if __name__ == "__main__":
    raise SystemExit(main())
