"""Alert webhooks under load: Alertmanager notifications at 100/s while Slack mentions flow at 300/s.

``chatops web`` as deployed (its production server, default ``WEB_WORKERS`` / ``WEB_THREADS``)
with ``CHATOPS_ALERTS_FILE`` and ``CHATOPS_ALERTS_TOKEN``, one ``chatops worker`` at ``nice`` 19
draining the queue, and the Slack emulator in a process of its own (the worker posts every
alert thread to it; in this process it would take the interpreter lock from the load generator
and show up as ack latency). For a fixed time one open-loop generator (``bench.loadgen``) sends,
on the same keep-alive connections, Alertmanager's version-4 notifications (``bench.alert_traffic``:
about 200 groups opening over the run, repeats, new alerts joining, ``Authorization: Bearer``)
and signed ``app_mention`` events (``bench.slack_site``), each at its own steady rate.

The route is ``investigate: auto`` with a storm limit of ``STORM_RUNS`` runs an hour, not
``button``: so the alert path that starts runs (the storm script, a run submitted from the
alert job, its answer shown on the root) is under load too, and the limit holding is itself
checked (exactly ``STORM_RUNS`` automatic runs, each in its own group's thread); the other
groups are held with the Investigate button, as in a real storm. The runs answer at once
(``worker_runtime``: the instant model of ``bench.runtimes``, the production Slack presenter
for the alert threads, the production ``on_finished``).

Afterwards ``DRAIN_WORKERS`` more workers join the measured one (the alerts' jobs wait in the runs'
queue behind thousands of mention runs, and one forking worker on two cores turns over only
about 20 jobs a second) and the benchmark waits, bounded, until every accepted notification was
applied. Several workers also put the groups' locks to work: two notifications of one group are
never applied at once, and one that finds the lock taken comes back a second later. Then it
checks nothing was lost or done twice (``bench.alert_checks``) and that every mention became
exactly one run (``bench.slack_site.check_runs``). The figures: ``bench.alerts_report``.

Targets: alert webhooks p99 at most 50 ms (and no errors) at 100/s with 300 events/s alongside;
zero lost; zero duplicates.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from rq import Queue

from bench import loadgen
from bench.ack_profile import WARM_UP, profile_ack_path
from bench.alert_checks import check_alerts, pending_notifications
from bench.alert_traffic import LABEL, PATH, AlertPlan, Expected, expectations, plan
from bench.alerts_report import NAME, Drain, Sent, plot, report, stream
from bench.common import BenchRedis, Result, bench_redis, delete_run_jobs, parse_options, queue_name, settle
from bench.cpu_meter import CpuMeter
from bench.processes import (
    Process,
    chatops_command,
    free_port,
    http_status,
    processes,
    start_process,
    wait_for_web,
    wait_until,
)
from bench.runtimes import instant_runtime
from bench.slack_events import SECRET, TOKEN
from bench.slack_site import check_runs, event_requests, server_env
from bot.alerts.jobs import PRESENTER, announce_answer
from bot.runs.queueing import worker_queue_names
from bot.runs.runtime import Runtime
from bot.settings import Settings
from emulator.slack import SlackEmulatorClient

ALERT_RATE, EVENT_RATE, SECONDS, GROUPS = 100, 300, 30.0, 200
QUICK_ALERT_RATE, QUICK_EVENT_RATE, QUICK_SECONDS, QUICK_GROUPS = 50, 50, 2.0, 60
WARM_SECONDS, WARM_GROUPS = 2.0, 20  # both streams at full rate before measuring (checked too)
DRAIN_WORKERS = 2  # started when the sending stops, beside the measured worker
DRAIN_SECONDS, QUICK_DRAIN_SECONDS = 900.0, 60.0
PROFILED, PROFILED_QUICK = 300, 30  # notifications profiled in this process at the end
CHANNEL = "C0BENCHALERTS"
ALERTS_TOKEN = "bench-alerts-token-0123456789abcdef"
STORM_RUNS = 10
ROUTES = f"""alerts:
  routes:
    - name: bench
      matchers: ['{LABEL}']
      channel: {CHANNEL}
      investigate: auto
      storm: {{max_runs: {STORM_RUNS}, window_seconds: 3600}}
"""
_SHOWN_NAMES = {"slack": "Slack emulator", "web": "chatops web", "worker": "chatops worker (nice 19)"}


def worker_runtime(settings: Settings) -> Runtime:
    """``CHATOPS_RUNTIME=bench.alerts:worker_runtime``: runs answered at once (``instant_runtime``),
    alert threads posted to Slack (the emulator) by the production presenter, redacted as the
    production worker does, and a finished run's answer shown on its alert's root message."""
    from bot.slack.delivery.alert_presenter import SlackAlertPresenter
    from bot.slack.delivery.client import make_client
    from tools.safety import Redactor

    presenter = SlackAlertPresenter(make_client(settings), Redactor.from_settings(settings).redact)
    return replace(instant_runtime(settings), extras={PRESENTER: presenter}, on_finished=announce_answer)


class Site:
    """The emulator, ``chatops web`` and its worker (nice 19), each a process of its own."""

    def __init__(
        self, bench: BenchRedis, queue: str, logs: Path, started: list[Process], *, worker: bool = True
    ) -> None:
        self.bench, self.queue, self.started = bench, queue, started
        slack_port, self.port = free_port(), free_port()
        self.slack_url = f"http://127.0.0.1:{slack_port}"
        emulator = [sys.executable, "-m", "emulator.slack", "--port", str(slack_port)]
        emulator += ["--signing-secret", SECRET, "--bot-token", TOKEN]
        emulator += ["--channel", f"{CHANNEL}:alerts", "--bot-channel", CHANNEL]
        # Slack's rate tiers off (the tests keep them on): this measures chatops. Slack paces one
        # channel's posts to about one a second and a method's updates to Tier 3, which would make
        # the drain of a 3,200-notification storm into one channel an hour of waiting on Slack.
        emulator += ["--no-rate-limits"]
        started.append(start_process("slack", emulator, {}, logs))
        ready = f"{self.slack_url}/control/state"
        wait_until(lambda: http_status(ready) == 200, 30, "the Slack emulator", watch=started)
        routes = logs / "alerts.yaml"
        routes.write_text(ROUTES)
        self.env = server_env(
            bench,
            queue,
            f"{self.slack_url}/api/",
            self.port,
            runtime="bench.alerts:worker_runtime",
            CHATOPS_ALERTS_FILE=str(routes),
            CHATOPS_ALERTS_TOKEN=ALERTS_TOKEN,
        )
        self.logs = logs
        started.append(start_process("web", [*chatops_command(), "web"], self.env, logs))
        if worker:
            started.append(start_process("worker", [*chatops_command(), "worker"], self.env, logs, nice=19))
        wait_for_web(self.port, started)
        self.meters = {_SHOWN_NAMES[p.name]: CpuMeter(p.popen.pid) for p in started}
        self.meters["Redis"] = CpuMeter(redis_client=bench.client)
        self.meters["load generator (this process)"] = CpuMeter(os.getpid(), tree=False)

    def send(self, alert_plan: AlertPlan, rates: tuple[int, int], seconds: float, phase: str) -> Sent:
        """Both streams at once for ``seconds``: the notifications of ``alert_plan`` and mentions."""
        events, tss = event_requests(self.port, phase[0].upper(), int(rates[1] * seconds))
        before = {name: meter.read() for name, meter in self.meters.items()}
        machine_before = machine_cpu()
        started = time.monotonic()
        alert_outcomes, event_outcomes = loadgen.run_streams(
            "127.0.0.1", self.port, [(alert_plan.requests, rates[0]), (events, rates[1])]
        )
        elapsed = time.monotonic() - started
        cores = {name: (meter.read() - before[name]) / elapsed for name, meter in self.meters.items()}
        machine = [
            (after - first) / elapsed for first, after in zip(machine_before, machine_cpu(), strict=True)
        ]
        cores["the whole machine (every process)"], cores["stolen by the hypervisor"] = machine
        accepted = {o.index for o in alert_outcomes if o.status == 200}
        acked = {o.index for o in event_outcomes if o.status == 200}
        return Sent(
            stream(f"Alertmanager webhooks (POST {PATH})", rates[0], alert_outcomes, elapsed, phase),
            stream("Slack events (POST /slack/events)", rates[1], event_outcomes, elapsed, phase),
            expectations(alert_plan, accepted),
            [ts for index, ts in enumerate(tss) if index in acked],
            cores,
        )

    def drain(self, limit: float) -> Drain:
        """Start ``DRAIN_WORKERS`` more workers (the measurement is over; on two cores one forking
        worker turns over only about 20 jobs a second) and wait, at most ``limit`` seconds, until
        every accepted notification was applied."""
        queues = [Queue(name, connection=self.bench.client) for name in worker_queue_names(self.queue)]

        def queued_jobs() -> int:
            return sum(queue.count for queue in queues)

        queued = queued_jobs()
        for number in range(DRAIN_WORKERS):
            command = [*chatops_command(), "worker"]
            self.started.append(start_process(f"drain-worker{number}", command, self.env, self.logs))
        started = shown = time.monotonic()
        while (left := pending_notifications(self.bench)) and time.monotonic() - started < limit:
            if any(process.popen.poll() is not None for process in self.started):
                raise RuntimeError("a process exited while the workers drained the queue")
            if time.monotonic() - shown >= 10:
                shown = time.monotonic()
                print(f"  draining: {left} notifications left, {queued_jobs()} jobs queued")
            time.sleep(1)
        took = time.monotonic() - started
        print(f"  drained for {took:.1f} s ({queued} jobs were queued); {left} notifications left")
        return Drain(took, queued, left, sum(1 for p in self.started if "worker" in p.name), limit)

    def profile(self, count: int) -> tuple[str, float]:
        """cProfile of the alert webhook's ack path in this process (``bench.ack_profile``), with
        the workers stopped first (they would share the cores and apply what it accepts)."""
        for process in self.started:
            if "worker" in process.name:
                process.stop()
        requests = plan(0, ALERTS_TOKEN, count + WARM_UP, 100.0, 50, prefix="ProfiledAlert").requests
        try:
            return profile_ack_path(
                self.bench,
                f"{self.slack_url}/api/",
                self.queue,
                requests,
                chatops_alerts_file=self.logs / "alerts.yaml",
                chatops_alerts_token=ALERTS_TOKEN,
            )
        finally:
            # Its jobs were never run: RQ deletes them with the queue (delete_run_jobs knows runs' only).
            for name in worker_queue_names(self.queue):
                Queue(name, connection=self.bench.client).empty()  # type: ignore[no-untyped-call]


def machine_cpu() -> tuple[float, float]:
    """CPU seconds the machine has been busy (every process, the kernel's work for them) and had
    stolen by the hypervisor since boot (``/proc/stat``; zeros where there is none). On a VM the
    cores' speed is the hypervisor's: stolen time is time the benchmark waited for a core."""
    try:
        fields = [float(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return 0.0, 0.0
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / tick, steal / tick


def measure(site: Site, rates: tuple[int, int], seconds: float, quick: bool) -> tuple[Sent, list[str]]:
    """The warm-up (not in quick mode) and the measurement; the measurement's figures with the
    groups both made, and the ts of every mention acknowledged."""
    expected: dict[str, Expected] = {}
    acked: list[str] = []
    if not quick:
        count = int(rates[0] * WARM_SECONDS)
        warm = plan(site.port, ALERTS_TOKEN, count, rates[0], WARM_GROUPS, prefix="WarmAlert")
        warmed = site.send(warm, rates, WARM_SECONDS, "warm-up")
        expected.update(warmed.expected)
        acked += warmed.acked_events
    count = int(rates[0] * seconds)
    measured = plan(site.port, ALERTS_TOKEN, count, rates[0], QUICK_GROUPS if quick else GROUPS)
    sent = site.send(measured, rates, seconds, "measured")
    expected.update(sent.expected)
    return replace(sent, expected=expected), acked + sent.acked_events


def main(argv: Sequence[str] | None = None) -> int:
    def extra(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--alert-rate", type=int, help=f"notifications a second (default {ALERT_RATE})")
        parser.add_argument("--event-rate", type=int, help=f"Slack events a second (default {EVENT_RATE})")
        parser.add_argument(
            "--no-worker", action="store_true", help="no worker while sending (to see what its forks cost)"
        )

    options, args = parse_options(__doc__ or NAME, argv, extra)
    quick = options.quick
    rates = (QUICK_ALERT_RATE, QUICK_EVENT_RATE) if quick else (ALERT_RATE, EVENT_RATE)
    rates = (
        rates[0] if args.alert_rate is None else args.alert_rate,
        rates[1] if args.event_rate is None else args.event_rate,
    )
    seconds = QUICK_SECONDS if quick else SECONDS
    logs = Path(f"/tmp/chatops-bench-{NAME}-{uuid.uuid4().hex[:6]}")
    with bench_redis(NAME) as bench:
        queue = queue_name(NAME)
        started: list[Process] = []
        try:
            result = Result(NAME, "Alert webhooks alongside Slack events", quick, settle(options.settle))
            with processes(started):
                site = Site(bench, queue, logs, started, worker=not args.no_worker)
                sent, acked = measure(site, rates, seconds, quick)
                drain = site.drain(QUICK_DRAIN_SECONDS if quick else DRAIN_SECONDS)
                roots = SlackEmulatorClient(site.slack_url, timeout=60).messages(CHANNEL)
                check = check_alerts(bench, sent.expected, roots, STORM_RUNS)
                runs = check_runs(bench, acked, len(acked) + check.alert_runs)
                profiled = PROFILED_QUICK if quick else PROFILED
                profile, per_request = site.profile(profiled)
        finally:
            delete_run_jobs(bench, queue)
    report(result, sent, check, runs, drain, seconds, worker=not args.no_worker)
    if args.no_worker:
        result.note(
            "**No worker ran while sending (`--no-worker`); the drain's workers applied everything.**"
        )
    result.data["profile"] = profile
    result.note(
        f"cProfile of the alert webhook's ack path in one process (the WSGI app called directly, {profiled} "
        f"Alertmanager notifications, {per_request * 1000:.2f} ms each under the profiler), cumulative time "
        f"of chatops's functions and the library calls they make:\n\n```\n{profile}\n```"
    )
    plot(options, result, sent)
    result.save(options)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
