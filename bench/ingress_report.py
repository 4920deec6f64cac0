"""What the ingress benchmark measured at one rate (``Step``), its targets, and how it is reported:
the tables, the targets met or not, the plot."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.common import Options, Result, percentile, save_plot

NAME = "ingress"
TARGET_RATE = 300
TARGET_P99_MS = 20.0
TARGET_P50_RATIO = 1.3
SLOW_SERVER = "chatops, slow clients"
SLACK_DEADLINE_MS = 3000.0


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


def report_slow_clients(result: Result, steps: list[Step]) -> None:
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


def report(result: Result, steps: list[Step], rates: Sequence[int], seconds: float, active: int) -> None:
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


def plot(options: Options, result: Result, steps: list[Step], rates: Sequence[int]) -> None:
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
