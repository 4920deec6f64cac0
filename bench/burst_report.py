"""What the burst benchmark measured (``Burst``), its targets, and how it is reported: the tables,
the targets met or not, the plot."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from bench.common import Options, Result, median, percentile, save_plot

NAME = "burst"
MENTIONS = 3000
TARGET_P99_MS = 20.0
TARGET_SECONDS = 120.0
TARGET_RATE = MENTIONS / TARGET_SECONDS  # 25 runs/s


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


def print_burst(burst: Burst) -> None:
    done = f"{burst.last_done:.1f} s" if burst.last_done is not None else "not within the wait"
    print(
        f"sent {burst.sent} in {burst.send_seconds:.1f} s, acked {burst.acked}, errors {burst.errors}; "
        f"ack p50 {burst.p(50):.2f} ms, p99 {burst.p(99):.2f} ms, max {max(burst.latencies_ms):.1f} ms; "
        f"last run done after {done}"
    )


def completion_rate(burst: Burst) -> float:
    """Runs completed per second, from the first due time to the last completion."""
    if burst.last_done is None or burst.last_done <= 0:
        done = burst.completions[-1][1] if burst.completions else 0
        elapsed = burst.completions[-1][0] if burst.completions else 1.0
        return done / elapsed
    return burst.acked / burst.last_done


def report(
    result: Result,
    burst: Burst,
    count: int,
    rate: float,
    args: argparse.Namespace,
    checked: tuple[int, int, int],
) -> None:
    completed, cards, answers = checked
    runs_per_second = completion_rate(burst)
    done = burst.last_done if burst.last_done is not None else float("nan")
    result.add_table(
        f"{count:,} signed mentions at {rate:g}/s into `chatops web`, {args.workers} "
        f"{'`chatops worker --simple`' if args.simple else 'forking `chatops worker`'}s, zero-latency "
        "model, one read-only tool call per run, the real Slack presenter against the emulator (its own "
        f"process at nice {args.slack_nice}); {launch(args)}; seconds from the first mention's due time",
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
        "launch": launch(args),
        "worker_nice": args.worker_nice,
        "busy_loops": args.busy,
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


def launch(args: argparse.Namespace) -> str:
    """How the bot's processes were started, and what ran beside them."""
    if args.worker_nice is None:
        text = "web and workers started as shipped (each its Procfile line, `sh -c` in a session of its own)"
    else:
        text = f"web and workers from the Procfile, the workers niced to {args.worker_nice} from outside"
    loops = f"{args.busy} busy loop{'s' if args.busy != 1 else ''} (`yes > /dev/null`, nice 0) beside it"
    return f"{text}; {loops if args.busy else 'nothing else running'}"


def plot(options: Options, result: Result, burst: Burst, rate: float) -> None:
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
