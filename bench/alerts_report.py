"""What the alert benchmark measured (``Stream``, ``Sent``, ``Drain``) and how it is reported: the
tables, the targets met or not, the plot (``bench.alerts`` runs it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench import loadgen
from bench.alert_checks import AlertCheck, shown_problems
from bench.alert_traffic import Expected
from bench.common import Options, Result, percentile, save_plot

NAME = "alerts"
TARGET_P99_MS = 50.0


@dataclass
class Stream:
    """What one path measured while both streams were sent."""

    what: str
    rate: int
    sent: int
    errors: int
    latencies_ms: list[float]
    dues: list[float]  # each request's due time, seconds after the start (for the plot)
    achieved_rate: float
    retried: int
    error_kinds: str

    def p(self, q: float) -> float:
        return percentile(self.latencies_ms, q)

    @property
    def max(self) -> float:
        return max(self.latencies_ms, default=float("nan"))

    def figures(self) -> dict[str, float]:
        return {"p50": self.p(50), "p99": self.p(99), "max": self.max, "errors": self.errors}


def stream(what: str, rate: int, outcomes: Sequence[loadgen.Outcome], elapsed: float, phase: str) -> Stream:
    failed = [o for o in outcomes if o.status != 200]
    result = Stream(
        what=what,
        rate=rate,
        sent=len(outcomes),
        errors=len(failed),
        latencies_ms=[o.latency * 1000 for o in outcomes],
        dues=[o.due for o in outcomes],
        achieved_rate=len(outcomes) / max(elapsed, 1e-9),
        retried=sum(1 for o in outcomes if o.retried),
        error_kinds=", ".join(sorted({o.error or str(o.status) for o in failed})),
    )
    print(
        f"{phase}: {what}: {rate}/s, sent {result.sent}, errors {result.errors} {result.error_kinds}, "
        f"resent {result.retried}, p50 {result.p(50):.2f} ms, p99 {result.p(99):.2f} ms, max {result.max:.1f} ms"
    )
    return result


@dataclass
class Sent:
    """One sending phase: both streams' figures, what was accepted, the CPU used meanwhile."""

    alerts: Stream
    events: Stream
    expected: dict[str, Expected]  # the alert groups, by key, as the accepted notifications make them
    acked_events: list[str]  # the ts of the mentions answered 200
    cores: dict[str, float]  # CPU seconds per second of sending, per process


@dataclass(frozen=True)
class Drain:
    """How the wait for the workers to apply every accepted notification went."""

    seconds: float
    queued: int  # jobs in the queue when the sending stopped
    left: int  # notifications still unapplied when the wait ended (0: drained)
    workers: int
    limit: float  # the most it could wait


def report(
    result: Result,
    sent: Sent,
    check: AlertCheck,
    runs: tuple[bool, str],
    drain: Drain,
    seconds: float,
    *,
    worker: bool = True,
) -> None:
    alerts, events = sent.alerts, sent.events
    beside = "one worker at nice 19 on the same 2 cores" if worker else "no worker while sending"
    result.add_table(
        f"Acknowledgement latency: Alertmanager notifications at {alerts.rate}/s and signed Slack mentions "
        f"at {events.rate}/s at once into chatops web for {seconds:.0f} s ({beside}), milliseconds from each "
        "request's due time",
        ["path", "rate/s", "sent/s", "requests", "errors", "resent", "p50 ms", "p99 ms", "max ms"],
        [
            [s.what, s.rate, f"{s.achieved_rate:.0f}", s.sent, s.errors, s.retried, s.p(50), s.p(99), s.max]
            for s in (alerts, events)
        ],
    )
    result.add_table(
        "CPU while sending (cores: CPU seconds per second of sending)",
        ["process", "cores"],
        [[name, f"{value:.2f}"] for name, value in sent.cores.items()],
    )
    drained = (
        f"every accepted notification applied {drain.seconds:.0f} s after the sending stopped"
        if not drain.left
        else f"**{drain.left} notifications still unapplied after {drain.limit:.0f} s**"
    )
    result.add_table(
        f"After the drain ({drained}, by {drain.workers} workers; {drain.queued:,} jobs were queued when the "
        "sending stopped: the alerts' jobs on their own queue, which every worker takes first, the mentions' "
        "runs behind it)",
        ["check", "expected", "found", "ok"],
        [
            [t.what, t.shown_expected, t.found, "yes" if t.ok else "**no**"]
            for t in [*check.lost, *check.duplicated]
        ],
    )
    result.note(f"alert groups: {shown_problems(check)}; mentions: {runs[1]}")
    result.data.update(
        alerts=alerts.figures(),
        events=events.figures(),
        drain={
            "seconds": drain.seconds,
            "queued": drain.queued,
            "left": drain.left,
            "workers": drain.workers,
        },
        cores=sent.cores,
        problems=check.problems,
    )
    _targets(result, sent, check, runs, drain)


def _targets(result: Result, sent: Sent, check: AlertCheck, runs: tuple[bool, str], drain: Drain) -> None:
    alerts, events = sent.alerts, sent.events
    result.target(
        f"alert webhooks p99 <= {TARGET_P99_MS:.0f} ms and no errors at {alerts.rate}/s with "
        f"{events.rate} Slack events/s alongside",
        f"p99 {alerts.p(99):.1f} ms (p50 {alerts.p(50):.1f}, max {alerts.max:.0f}); "
        f"{alerts.errors} alert and {events.errors} event errors",
        alerts.p(99) <= TARGET_P99_MS and alerts.errors == 0,
    )
    differences = sum(1 for t in check.lost if not t.ok) + sum(
        1 for kind, _ in check.problems if kind == "lost"
    )
    lost = f"{differences} differences in {len(sent.expected)} groups"
    if drain.left:
        lost += f"; not drained: {drain.left} notifications unapplied after {drain.limit:.0f} s"
    result.target("zero lost: every accepted notification applied to its group", lost, check.nothing_lost)
    doubled = sum(1 for t in check.duplicated if not t.ok) + sum(
        1 for k, _ in check.problems if k == "duplicate"
    )
    result.target(
        "zero duplicates: one group record and one root message per group, each mention one run",
        f"{doubled} differences in {len(sent.expected)} groups; {check.alert_runs} automatic runs; mentions: "
        + ("each exactly one run" if runs[0] else "**not each exactly one run**"),
        check.nothing_duplicated and runs[0],
    )


def plot(options: Options, result: Result, sent: Sent) -> None:
    def draw(axes: Any) -> None:
        for s, marker in ((sent.events, "."), (sent.alerts, "x")):
            axes.scatter(s.dues, s.latencies_ms, s=4, marker=marker, label=f"{s.what} ({s.rate}/s)")
        axes.axhline(TARGET_P99_MS, color="grey", linestyle="--", linewidth=0.8, label="alert p99 target")
        axes.set_yscale("log")
        axes.set_xlabel("seconds into the measurement (due time)")
        axes.set_ylabel("ack latency, ms")
        axes.legend(loc="upper left", fontsize="small")

    save_plot(options, NAME, draw, result)
