"""A burst of mentions through the whole bot: 3,000 signed mentions at 300/s, 2 workers, zero-latency model.

``chatops web`` (its own HTTP server, as deployed) and two ``chatops worker`` processes (forking, as
deployed) on one Redis, started as shipped: each the ``Procfile``'s line, run as a Procfile runner
runs it (``sh -c LINE`` in a session of its own, like honcho), at the priority the bot gives itself
(the workers lower theirs, ``bot/ops/priority.py``); ``--worker-nice N`` nices the workers from the
outside instead, as the benchmark did before (issue 29). ``--busy N`` runs N busy loops (``yes >
/dev/null``, each in a session of its own at nice 0, as a user's stray job) beside it for the
burst. The Slack emulator in a process of its own (at ``--slack-nice``: it stands for Slack's
servers, which are elsewhere) serves the Web API the workers'
real ``SlackPresenter`` calls (run card, "is working" status, card updates, answer). Each mention
starts a new thread (``plan: check``: one read-only tool call, then the answer) in one of 100
channels; the root messages are created in the emulator first, then a lean open-loop generator
(``bench.loadgen``: pre-signed requests, keep-alive) sends the ``app_mention`` events at 300/s.

Measured in the same run: the acknowledgement latency of every event (from its due time to the
whole answer), and the runs' completions over time (the ``chatops_runs_finished`` counter the
report of each run increments once it has shown the run's end in the thread, sampled 10 times a
second), until every mention is a completed run. Afterwards every run is checked to be completed
and its card to show the final state.

Targets (issue 13): ack p99 at most 20 ms; every mention a completed run within 120 s, i.e. at
least 25 runs/s on 2 workers.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from agent.redis_util import as_text
from agent.types import RunStatus
from bench import loadgen
from bench.burst_report import MENTIONS, NAME, Burst, plot, print_burst, report
from bench.common import (
    BenchRedis,
    Result,
    bench_redis,
    delete_run_jobs,
    parse_options,
    queue_name,
    settle,
)
from bench.cpu_meter import CpuMeter
from bench.processes import (
    Process,
    as_shipped,
    chatops_command,
    free_port,
    processes,
    procfile,
    start_process,
    wait_for_web,
    wait_until,
    worker_env,
)
from bench.slack_events import BOT_USER, SECRET, TOKEN, mention_request
from bot.keys import Keys
from bot.observability.metrics import RUNS_FINISHED, metric_key
from emulator.slack import SlackEmulatorClient

RATE = 300
QUICK_MENTIONS, QUICK_RATE = 40, 40
WARM_MENTIONS = 30
WORKERS = 2
SLACK_NICE = 19
CHANNELS = 100
TEXT = "plan: check"
WAIT_SECONDS = 600.0  # how long the benchmark waits for the last run (past the target: to measure it)
SAMPLE_SECONDS = 0.1


@dataclass(frozen=True)
class Mention:
    channel: str
    ts: str
    user: str


def channel_name(index: int) -> str:
    return f"C_B{index % CHANNELS:03d}"


def emulator_command(port: int) -> list[str]:
    """The emulator on its own port and process (its CPU is Slack's, not the bench's)."""
    # Slack's rate tiers off (the tests keep them on): the burst measures chatops, not Slack's pacing.
    command = [*chatops_command()[:1], "-m", "emulator.slack", "--port", str(port), "--no-rate-limits"]
    command += ["--signing-secret", SECRET, "--bot-token", TOKEN, "--bot-user-id", BOT_USER]
    for index in range(CHANNELS):
        command += [
            "--channel",
            f"{channel_name(index)}:bench-{index:03d}",
            "--bot-channel",
            channel_name(index),
        ]
    return command


def create_threads(control: SlackEmulatorClient, count: int, tag: str) -> list[Mention]:
    """The mentions' root messages in the emulator (the bot replies in their threads)."""

    def post(index: int) -> Mention:
        channel, user = channel_name(index), "U_ALICE" if index % 2 else "U_BOB"
        posted = control.post_message(channel, user, f"{tag} {index}: web-03 is out of disk")
        return Mention(channel, str(posted["ts"]), user)

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(post, range(count)))


def requests_for(port: int, mentions: Sequence[Mention], tag: str) -> list[bytes]:
    stamp = str(int(time.time()))
    return [
        mention_request(port, stamp, f"Ev{tag}{index:07d}", m.channel, m.ts, m.user, f"<@{BOT_USER}> {TEXT}")
        for index, m in enumerate(mentions)
    ]


class Completions:
    """Samples the runs-finished counter from a thread: (seconds since ``start``, completed runs)."""

    def __init__(self, bench: BenchRedis) -> None:
        self._redis = bench.client
        self._key = metric_key(Keys(bench.prefix), RUNS_FINISHED)
        self._field = json.dumps([RunStatus.COMPLETED.value])
        self._stop = threading.Event()
        self.samples: list[tuple[float, int]] = []
        self.loads: list[tuple[float, float]] = []  # (seconds, 1-minute load average), once a second
        self.start = 0.0

    def count(self) -> int:
        return int(float(as_text(self._redis.hget(self._key, self._field)) or 0))

    def run(self, start: float, base: int) -> threading.Thread:
        self.start = start

        def sample() -> None:
            while not self._stop.wait(SAMPLE_SECONDS):
                now = time.monotonic() - start
                self.samples.append((now, self.count() - base))
                if not self.loads or now - self.loads[-1][0] >= 1.0:
                    self.loads.append((now, os.getloadavg()[0]))

        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()


def run_burst(
    bench: BenchRedis,
    control: SlackEmulatorClient,
    port: int,
    count: int,
    rate: float,
    tag: str,
    meters: dict[str, CpuMeter],
    wait: float = WAIT_SECONDS,
) -> Burst:
    mentions = create_threads(control, count, tag)
    requests = requests_for(port, mentions, tag)
    completions = Completions(bench)
    base = completions.count()
    before = {name: meter.read() for name, meter in meters.items()}
    calls_before = redis_calls(bench)
    start = time.monotonic() + 0.05  # the generator's first due time (it starts 50 ms after its call)
    sampler = completions.run(start, base)
    outcomes = loadgen.run("127.0.0.1", port, requests, rate)
    send_seconds = time.monotonic() - start
    deadline = start + wait
    acked = sum(1 for o in outcomes if o.status == 200)
    while completions.count() - base < acked and time.monotonic() < deadline:
        time.sleep(SAMPLE_SECONDS / 2)
    done_at = time.monotonic() - start if completions.count() - base >= acked else None
    completions.stop()
    sampler.join()
    cpu = {name: meter.read() - before[name] for name, meter in meters.items()}
    calls = {name: n - calls_before.get(name, 0) for name, n in redis_calls(bench).items()}
    return Burst(
        sent=len(requests),
        acked=acked,
        errors=len(outcomes) - acked,
        latencies_ms=[o.latency * 1000 for o in outcomes],
        send_seconds=send_seconds,
        last_done=done_at,
        completions=completions.samples,
        loads=completions.loads,
        cpu_seconds=cpu,
        redis_calls={name: n for name, n in calls.items() if n > 0},
    )


def redis_calls(bench: BenchRedis) -> dict[str, int]:
    """Commands run so far by the Redis server, by name (``INFO commandstats``): per run only on a
    Redis of the benchmark's own (``REDIS_URL``), since every client of the server counts."""
    stats = bench.client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(value["calls"]) for name, value in stats.items()}


def check_runs(bench: BenchRedis, control: SlackEmulatorClient, tag: str) -> tuple[int, int, int]:
    """(runs completed, cards showing the final state, answers) for the burst's threads."""
    keys = Keys(bench.prefix)
    completed = cards = answers = 0
    for index in range(CHANNELS):
        channel = channel_name(index)
        for message in control.messages(channel):
            if not str(message.get("text", "")).startswith(tag):
                continue
            run_id = as_text(bench.client.get(keys.seen_message(channel, str(message["ts"]))))
            status = as_text(bench.client.hget(keys.run(run_id or "none"), "status"))
            completed += status == RunStatus.COMPLETED.value
            replies = [r for r in message.get("replies") or [] if r.get("user") == BOT_USER]
            cards += bool(replies) and "Done" in json.dumps(replies[0].get("blocks"))
            answers += sum(1 for r in replies if str(r.get("text", "")).startswith("done:"))
    return completed, cards, answers


def main(argv: Sequence[str] | None = None) -> int:
    def extra(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--mentions", type=int, help=f"mentions in the burst (default {MENTIONS})")
        parser.add_argument("--rate", type=float, help=f"mentions per second (default {RATE})")
        parser.add_argument(
            "--slack-nice",
            type=int,
            default=SLACK_NICE,
            help=f"nice value of the Slack emulator (default {SLACK_NICE}): it stands for Slack's "
            "servers, which are not on the bot's machine",
        )
        parser.add_argument(
            "--worker-nice",
            type=int,
            help="nice the workers (and their session's scheduling group) from outside, as the benchmark "
            "did before issue 29 (default: as shipped, the workers set their own priority)",
        )
        parser.add_argument(
            "--busy", type=int, default=0, help="busy loops (yes > /dev/null) beside the burst (default 0)"
        )
        parser.add_argument(
            "--workers", type=int, default=WORKERS, help=f"worker processes (default {WORKERS})"
        )
        parser.add_argument(
            "--simple", action="store_true", help="workers run jobs in their own process (no fork per job)"
        )

    options, args = parse_options(__doc__ or NAME, argv, extra)
    count = args.mentions or (QUICK_MENTIONS if options.quick else MENTIONS)
    rate = args.rate or (QUICK_RATE if options.quick else RATE)
    logs = Path(f"/tmp/chatops-bench-{NAME}-{uuid.uuid4().hex[:6]}")
    print(f"# logs in {logs}")
    with bench_redis(NAME) as bench:
        queue = queue_name(NAME)
        slack_port, port = free_port(), free_port()
        env = worker_env(
            bench,
            queue,
            "bench.runtimes:plan_runtime",
            SLACK_BOT_TOKEN=TOKEN,
            SLACK_SIGNING_SECRET=SECRET,
            SLACK_API_URL=f"http://127.0.0.1:{slack_port}/api/",
            PORT=str(port),
            WEB_HOST="127.0.0.1",
            **{k: v for k, v in os.environ.items() if k.startswith("BENCH_CHATOPS_")},
        )
        env = {k.removeprefix("BENCH_"): v for k, v in env.items()}  # BENCH_CHATOPS_X=... sets CHATOPS_X
        started: list[Process] = []
        try:
            with processes(started):
                started.append(
                    start_process("slack", emulator_command(slack_port), env, logs, args.slack_nice)
                )
                control = SlackEmulatorClient(f"http://127.0.0.1:{slack_port}")
                wait_until(lambda: _answers(control), 30, "the Slack emulator", watch=started)
                started += start_bot(env, logs, args)
                wait_for_web(port, started)
                meters = {p.name: CpuMeter(p.popen.pid) for p in started}
                meters["Redis"] = CpuMeter(redis_client=bench.client)
                if not options.quick and args.workers:  # the web's threads, the bot's identity, imports
                    run_burst(bench, control, port, WARM_MENTIONS, 30, "warm", meters)
                load = settle(options.settle)
                result = Result(NAME, "Mention burst", options.quick, load)
                wait = WAIT_SECONDS if args.workers else 0.0  # no workers: the acks alone
                for number in range(args.busy):  # after the settling: it waits for a quiet machine
                    busy = start_process(f"busy{number}", ["/bin/sh", "-c", "exec yes > /dev/null"], {}, logs)
                    started.append(busy)
                    meters[busy.name] = CpuMeter(busy.popen.pid)
                burst = run_burst(bench, control, port, count, rate, "burst", meters, wait)
                print_burst(burst)
                completed, cards, answers = check_runs(bench, control, "burst")
        finally:
            delete_run_jobs(bench, queue)
    report(result, burst, count, rate, args, (completed, cards, answers))
    plot(options, result, burst, rate)
    result.save(options)
    return 0


def start_bot(env: dict[str, str], logs: Path, args: argparse.Namespace) -> list[Process]:
    """The web process and the workers, each from its ``Procfile`` line as a Procfile runner starts
    it; the workers niced from outside only with ``--worker-nice``."""
    lines = procfile()
    command, shipped_env = as_shipped(lines["web"], env)
    started = [start_process("web", command, shipped_env, logs)]
    for number in range(args.workers):
        command, shipped_env = as_shipped(lines["worker"] + (" --simple" if args.simple else ""), env)
        started.append(start_process(f"worker{number}", command, shipped_env, logs, args.worker_nice or 0))
    return started


def _answers(control: SlackEmulatorClient) -> bool:
    try:
        control.calls(method="api.test")
    except OSError:
        return False
    return True


if __name__ == "__main__":
    raise SystemExit(main())
