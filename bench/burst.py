"""A burst of mentions through the whole bot: 3,000 signed mentions at 300/s, 2 workers, zero-latency model.

``chatops web`` (its own HTTP server, as deployed) and two ``chatops worker`` processes (forking, as
deployed) on one Redis; the Slack emulator in a process of its own serves the Web API the workers'
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.keys import Keys
from agent.redis_memory import as_text
from agent.types import RunStatus
from bench import loadgen
from bench.common import (
    BenchRedis,
    Options,
    Process,
    Result,
    bench_redis,
    chatops_command,
    free_port,
    http_status,
    median,
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
from bench.ingress import CpuMeter, mention_request
from bot.runs.metrics import RUNS_FINISHED, metric_key
from emulator.slack import SlackEmulatorClient

NAME = "burst"
MENTIONS, RATE = 3000, 300
QUICK_MENTIONS, QUICK_RATE = 40, 40
WARM_MENTIONS = 30
WORKERS = 2
NICE = 19
CHANNELS = 100
SECRET = "bench-signing-secret"
TOKEN = "xoxb-bench-token"
BOT_USER = "U_OPS"
TEXT = "plan: check"
TARGET_P99_MS = 20.0
TARGET_SECONDS = 120.0
TARGET_RATE = MENTIONS / TARGET_SECONDS  # 25 runs/s
WAIT_SECONDS = 600.0  # how long the benchmark waits for the last run (past the target: to measure it)
SAMPLE_SECONDS = 0.1


@dataclass(frozen=True)
class Mention:
    channel: str
    ts: str
    user: str


@dataclass
class Burst:
    """What one burst measured."""

    sent: int
    acked: int
    errors: int
    latencies_ms: list[float]
    send_seconds: float  # from the first due time to the last answer
    last_done: float | None  # seconds from the first due time until the last run was done
    completions: list[tuple[float, int]] = field(default_factory=list)  # (seconds, runs done)
    loads: list[tuple[float, float]] = field(default_factory=list)  # (seconds, 1-minute load average)
    cpu_seconds: dict[str, float] = field(default_factory=dict)
    redis_calls: dict[str, int] = field(default_factory=dict)  # commands Redis ran meanwhile, by name

    def p(self, q: float) -> float:
        return percentile(self.latencies_ms, q)


def channel_name(index: int) -> str:
    return f"C_B{index % CHANNELS:03d}"


def emulator_command(port: int) -> list[str]:
    """The emulator on its own port and process (its CPU is Slack's, not the bench's)."""
    command = [*chatops_command()[:1], "-m", "emulator.slack", "--port", str(port)]
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
            "--nice",
            type=int,
            default=NICE,
            help=f"nice value of the workers and the emulator (default {NICE}): the web process and "
            "Redis come first, as if the others ran on machines of their own",
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
        queue = f"bench-{NAME}-{uuid.uuid4().hex[:8]}"
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
                started.append(start_process("slack", emulator_command(slack_port), env, logs, args.nice))
                control = SlackEmulatorClient(f"http://127.0.0.1:{slack_port}")
                wait_until(lambda: _answers(control), 30, "the Slack emulator", watch=started)
                started.append(start_process("web", [*chatops_command(), "web"], env, logs))
                for number in range(args.workers):
                    command = [*chatops_command(), "worker", "--name", f"{queue}-{number}"]
                    command += ["--simple"] if args.simple else []
                    started.append(start_process(f"worker{number}", command, env, logs, args.nice))
                wait_until(
                    lambda: http_status(f"http://127.0.0.1:{port}/healthz") == 200,
                    30,
                    "chatops web",
                    watch=started,
                )
                meters = {p.name: CpuMeter(p.popen.pid) for p in started}
                meters["Redis"] = CpuMeter(redis_client=bench.client)
                if not options.quick and args.workers:  # the web's threads, the bot's identity, imports
                    run_burst(bench, control, port, WARM_MENTIONS, 30, "warm", meters)
                load = settle(options.settle)
                result = Result(NAME, "Mention burst", options.quick, load)
                wait = WAIT_SECONDS if args.workers else 0.0  # no workers: the acks alone
                burst = run_burst(bench, control, port, count, rate, "burst", meters, wait)
                _print(burst)
                completed, cards, answers = check_runs(bench, control, "burst")
        finally:
            _cleanup(bench, queue)
    _report(result, burst, count, rate, args, (completed, cards, answers))
    _plot(options, result, burst, rate)
    result.save(options)
    return 0


def _answers(control: SlackEmulatorClient) -> bool:
    try:
        control.calls(method="api.test")
    except OSError:
        return False
    return True


def _print(burst: Burst) -> None:
    done = f"{burst.last_done:.1f} s" if burst.last_done is not None else "not within the wait"
    print(
        f"sent {burst.sent} in {burst.send_seconds:.1f} s, acked {burst.acked}, errors {burst.errors}; "
        f"ack p50 {burst.p(50):.2f} ms, p99 {burst.p(99):.2f} ms, max {max(burst.latencies_ms):.1f} ms; "
        f"last run done after {done}"
    )


def _cleanup(bench: BenchRedis, queue: str) -> None:
    """RQ's job hashes are not under our prefix: delete the ones our runs enqueued, then the queue."""
    from bench.ingress import _cleanup as ingress_cleanup

    ingress_cleanup(bench, queue)
    bench.cleanup(*rq_patterns(queue))


def _rate(burst: Burst) -> float:
    """Runs completed per second, from the first due time to the last completion."""
    if burst.last_done is None or burst.last_done <= 0:
        done = burst.completions[-1][1] if burst.completions else 0
        elapsed = burst.completions[-1][0] if burst.completions else 1.0
        return done / elapsed
    return burst.acked / burst.last_done


def _report(
    result: Result,
    burst: Burst,
    count: int,
    rate: float,
    args: argparse.Namespace,
    checked: tuple[int, int, int],
) -> None:
    completed, cards, answers = checked
    runs_per_second = _rate(burst)
    done = burst.last_done if burst.last_done is not None else float("nan")
    result.add_table(
        f"{count:,} signed mentions at {rate:g}/s into `chatops web`, {args.workers} "
        f"{'`chatops worker --simple`' if args.simple else 'forking `chatops worker`'}s, zero-latency "
        "model, one read-only tool call per run, the real Slack presenter against the emulator (its own "
        f"process; it and the workers at nice {args.nice}); seconds from the first mention's due time",
        [
            "mentions",
            "acked",
            "errors",
            "ack p50 ms",
            "ack p99 ms",
            "ack max ms",
            "sent in s",
            "last run done after s",
            "runs/s",
            "completed",
            "cards final",
            "answers",
        ],
        [
            [
                burst.sent,
                burst.acked,
                burst.errors,
                burst.p(50),
                burst.p(99),
                max(burst.latencies_ms),
                burst.send_seconds,
                done,
                runs_per_second,
                completed,
                cards,
                answers,
            ]
        ],
    )
    total = sum(burst.cpu_seconds.values())
    result.add_table(
        "CPU seconds used during the burst (until the last run was done), by process tree",
        [*burst.cpu_seconds, "total"],
        [[*burst.cpu_seconds.values(), total]],
    )
    top = sorted(burst.redis_calls.items(), key=lambda item: -item[1])[:14]
    result.add_table(
        "Redis commands per run during the burst (`INFO commandstats`; on a shared Redis every "
        "client's commands count), the most frequent",
        [name for name, _ in top] + ["all"],
        [[n / max(burst.acked, 1) for _, n in top] + [sum(burst.redis_calls.values()) / max(burst.acked, 1)]],
    )
    result.data = {
        "redis_calls": burst.redis_calls,
        "latencies_ms": burst.latencies_ms,
        "completions": burst.completions,
        "loads": burst.loads,
        "cpu_seconds": burst.cpu_seconds,
        "last_done": burst.last_done,
        "runs_per_second": runs_per_second,
    }
    p99 = burst.p(99)
    result.target(
        f"ack p99 at most {TARGET_P99_MS:.0f} ms",
        f"{p99:.1f} ms ({p99 / TARGET_P99_MS:.2f}x the target)",
        p99 <= TARGET_P99_MS,
    )
    within = burst.last_done is not None and burst.last_done <= TARGET_SECONDS and completed == count
    result.target(
        f"every mention a completed run within {TARGET_SECONDS:.0f} s",
        f"{completed} of {count} completed, the last after {done:.1f} s "
        f"({done / TARGET_SECONDS:.2f}x the target)",
        within,
    )
    result.target(
        f"at least {TARGET_RATE:.0f} runs/s on {args.workers} workers",
        f"{runs_per_second:.1f} runs/s ({runs_per_second / TARGET_RATE:.2f}x the target)",
        runs_per_second >= TARGET_RATE,
    )
    result.note(
        f"ack latency median {median(burst.latencies_ms):.2f} ms over {len(burst.latencies_ms)} events"
    )
    result.note(f"cards showing the final state when the last run was done: {cards} of {count}")


def _plot(options: Options, result: Result, burst: Burst, rate: float) -> None:
    def draw(axes: Any) -> None:
        times = [t for t, _ in burst.completions]
        axes.plot(times, [n for _, n in burst.completions], label="runs completed")
        axes.plot(
            [0, burst.sent / rate], [0, burst.sent], linestyle="--", color="gray", label="mentions sent"
        )
        axes.plot([0, TARGET_SECONDS], [0, burst.sent], linestyle=":", color="red", label="target pace")
        axes.set_xlabel("seconds since the first mention")
        axes.set_ylabel("runs")
        axes.set_title("Mention burst: runs completed over time")
        axes.legend(fontsize=7)
        axes.grid(True, alpha=0.3)

    save_plot(options, NAME, draw, result)


if __name__ == "__main__":
    raise SystemExit(main())
