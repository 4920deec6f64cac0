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
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

from bench import loadgen
from bench.ack_profile import PROFILE_EVENTS, WARM_UP, profile_ack_path
from bench.common import (
    ROOT,
    BenchRedis,
    Result,
    bench_redis,
    delete_run_jobs,
    parse_options,
    queue_name,
    settle,
)
from bench.cpu_meter import CpuMeter
from bench.ingress_report import (
    NAME,
    SLOW_SERVER,
    TARGET_RATE,
    Step,
    plot,
    report,
    report_slow_clients,
)
from bench.processes import (
    Process,
    chatops_command,
    free_port,
    processes,
    start_process,
    wait_for_web,
    wait_until,
)
from bench.slack_events import SECRET, TOKEN
from bench.slack_site import check_runs, event_requests, server_env
from bot.keys import Keys
from emulator.slack import SlackEmulator, WorkspaceConfig

RATES = (100, 300, 500)
SECONDS = 20.0
QUICK_RATES = (20,)
QUICK_SECONDS = 1.0
# The slow-client case: this many slow-loris connections held open (half trickling a head, half a
# body, a byte a second, each opened again when the server cuts it) while TARGET_RATE is sent.
SLOW_CLIENTS = 200
QUICK_SLOW_CLIENTS = 20


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


def _port_open(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True
    return False


@contextlib.contextmanager
def emulator() -> Iterator[SlackEmulator]:
    # Slack's rate tiers off (the tests keep them on): this measures chatops, not Slack's pacing.
    slack = SlackEmulator(WorkspaceConfig(signing_secret=SECRET, bot_token=TOKEN, rate_limits=False)).start()
    try:
        yield slack
    finally:
        slack.close()


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
        queue = queue_name(NAME)
        try:
            load = settle(options.settle)
            result = Result(NAME, "Slack ingress", options.quick, load)
            # The comparison first, on an idle machine: the bare Bolt app on the same server.
            port = free_port()
            started: list[Process] = []
            with processes(started):
                env = server_env(bench, queue, slack.api_url, port)
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
                env = server_env(bench, queue, slack.api_url, port)
                started.append(start_process("web", [*chatops_command(), "web"], env, logs))
                if not args.no_worker:
                    started.append(
                        start_process("worker", [*chatops_command(), "worker"], env, logs, nice=19)
                    )
                wait_for_web(port, started)
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
            profiling = event_requests(0, "P", profiled_events + WARM_UP)[0]
            profile, profiled_per_event = profile_ack_path(bench, slack.api_url, queue, profiling)
        finally:
            delete_run_jobs(bench, queue)
    report(result, [s for s in steps if s.server != SLOW_SERVER], rates, seconds, finished)
    report_slow_clients(result, steps)
    if args.no_worker:
        result.note("**No worker ran during this measurement (`--no-worker`).**")
    result.data["profile"] = profile
    result.note(
        f"cProfile of the ack path in one process (the WSGI app called directly, {profiled_events} mentions, "
        f"{profiled_per_event * 1000:.2f} ms per mention under the profiler), cumulative time of chatops's "
        f"functions and the library calls they make:\n\n```\n{profile}\n```"
    )
    plot(options, result, steps, rates)
    result.save(options)
    return 0


def _meters(bench: BenchRedis, started: Sequence[Process]) -> dict[str, CpuMeter]:
    meters = {process.name: CpuMeter(process.popen.pid) for process in started}
    meters["Redis"] = CpuMeter(redis_client=bench.client)
    meters["bench process"] = CpuMeter(os.getpid(), tree=False)
    return meters


def _finished_runs(bench: BenchRedis) -> int:
    keys = Keys(bench.prefix)
    return int(bench.client.zcard(keys.active_runs()))


if __name__ == "__main__":
    raise SystemExit(main())
