"""Approval waits: runs awaiting a human hold no worker, little Redis, and resume in bulk.

One ``chatops worker`` (forking, scheduler on, production recovery interval) and a scripted
zero-latency model (``bench.runtimes:plan_runtime``).

1. A new run (three read-only steps and an answer) is timed from ``submit`` to ``completed``,
   alone, then again with 1,000 runs awaiting approval (each asked for a mutating tool); the
   waiting runs are set up by an in-process worker (the same job code) to save time.
2. Redis memory per waiting run: ``MEMORY USAGE`` (exact) of the run's keys (record + state hash,
   fence, approvals index, approval record, thread claim) minus the history list; RQ's scheduled
   expiry job and the run's share of shared structures are shown beside it.
3. 1,000 approvals clicked within one second (``RunService.decide``, what the web process calls
   for a click), then the time until every resumed run finished.

Targets: the new run at most 1.1x its time alone; at most 4 KB per waiting run beyond its history.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis

from agent.redis_util import as_text
from agent.types import RunStatus
from bench.common import (
    BenchRedis,
    Options,
    Result,
    bench_redis,
    median,
    parse_options,
    percentile,
    queue_name,
    rq_patterns,
    save_plot,
    settle,
)
from bench.processes import (
    Process,
    chatops_command,
    processes,
    start_process,
    wait_until,
    worker_env,
)
from bench.runtimes import plan_runtime
from bot.keys import Keys
from bot.ops.worker import build_worker
from bot.runs.service import RunOptions, RunService
from bot.settings import Settings

NAME = "approvals"
WAITING = 1000
QUICK_WAITING = 20
SAMPLES = 20
QUICK_SAMPLES = 2
NEW_RUN = "plan: check check check"
WAITING_RUN = "plan: restart"
TARGET_RATIO = 1.1
TARGET_BYTES = 4096
CHANNEL = "C_BENCH"


def settings_for(bench: BenchRedis, queue: str) -> Settings:
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        redis_url=bench.url,
        chatops_redis_prefix=bench.prefix,
        chatops_queue=queue,
        chatops_retention_days=1,
    )


def time_new_run(service: RunService, thread: str) -> float:
    """Seconds from ``submit`` until the run's status is ``completed``."""
    started = time.perf_counter()
    run_id = service.submit(CHANNEL, thread, requester="U_ALICE", text=NEW_RUN).run_id
    key = service.keys.run(run_id)
    while as_text(service.redis.hget(key, "status")) != RunStatus.COMPLETED.value:
        if time.perf_counter() - started > 60:
            raise TimeoutError(f"run {run_id} did not finish")
        time.sleep(0.001)
    return time.perf_counter() - started


def memory_per_run(client: redis.Redis, keys: Keys, run_id: str) -> dict[str, int]:
    """``MEMORY USAGE`` of each key of one waiting run (exact: ``SAMPLES 0``)."""

    def usage(key: str) -> int:
        return int(client.memory_usage(key, samples=0) or 0)

    record = client.hgetall(keys.run(run_id))
    approvals = [as_text(a) or "" for a in client.hvals(keys.approvals(run_id))]
    thread = keys.thread(as_text(record[b"channel"]) or "", as_text(record[b"thread_ts"]) or "")
    sizes = {
        "run hash (record + state)": usage(keys.run(run_id)),
        "fence counter": usage(keys.fence(run_id)),
        "approvals index": usage(keys.approvals(run_id)),
        "approval record": sum(usage(keys.approval(a)) for a in approvals),
        "thread claim": usage(thread),
        "lease (released)": usage(keys.lease(run_id)),
        "inbox (empty)": usage(keys.inbox(run_id)),
        "history list (excluded)": usage(keys.messages(run_id)),
    }
    return sizes


def main(argv: Sequence[str] | None = None) -> int:
    options, _ = parse_options(__doc__ or NAME, argv)
    waiting = QUICK_WAITING if options.quick else WAITING
    samples = QUICK_SAMPLES if options.quick else SAMPLES
    logs = Path(f"/tmp/chatops-bench-{NAME}-{uuid.uuid4().hex[:6]}")
    with bench_redis(NAME) as bench:
        queue = queue_name(NAME)
        settings = settings_for(bench, queue)
        keys = Keys(bench.prefix)
        service = RunService(bench.client, keys, RunOptions.from_settings(settings))
        try:
            load = settle(options.settle)
            result = Result(NAME, "Approval waits", options.quick, load)
            started: list[Process] = []
            with processes(started):
                env = worker_env(bench, queue, "bench.runtimes:plan_runtime")
                started.append(start_process("worker", [*chatops_command(), "worker"], env, logs))
                time_new_run(service, "warm.1")  # the worker is up and warm
                alone = [time_new_run(service, f"alone.{n}") for n in range(samples)]
                print(f"alone: median {median(alone) * 1000:.1f} ms")
                started[0].stop()  # the waiting runs are set up in-process (same job code, no fork)
                started.clear()
                waiting_ids = _set_up_waiting(bench, settings, service, waiting)
                started.append(start_process("worker", [*chatops_command(), "worker"], env, logs))
                time_new_run(service, "warm.2")
                loaded = [time_new_run(service, f"loaded.{n}") for n in range(samples)]
                print(f"with {waiting} waiting: median {median(loaded) * 1000:.1f} ms")
                sizes = _memory(bench, keys, queue, waiting_ids)
                sweep = _sweep_seconds(service)
                clicks, drained, finished = _click_all(bench, service, waiting_ids)
                print(f"{waiting} clicks in {clicks:.2f} s; all resumed runs finished after {drained:.1f} s")
                # Alone again (nothing waits any more): with the first set, this cancels any drift of
                # the machine's speed during the benchmark.
                alone += [time_new_run(service, f"after.{n}") for n in range(samples)]
        finally:
            _cleanup(bench, queue)
    _report(result, waiting, alone, loaded, sizes, sweep, clicks, drained, finished)
    _plot(options, result, alone, loaded, finished, waiting)
    result.save(options)
    return 0


def _set_up_waiting(bench: BenchRedis, settings: Settings, service: RunService, count: int) -> list[str]:
    started = time.perf_counter()
    run_ids = [
        service.submit(CHANNEL, f"wait.{n}", requester="U_ALICE", text=WAITING_RUN).run_id
        for n in range(count)
    ]
    worker = build_worker(
        settings, runtime_factory=lambda: plan_runtime(settings), simple=True, connection=bench.client
    )
    worker.work(burst=True, with_scheduler=False, logging_level="WARNING")
    statuses = _statuses(bench.client, Keys(bench.prefix), run_ids)
    waiting = sum(1 for s in statuses if s == RunStatus.AWAITING_APPROVAL.value)
    if waiting != count:
        raise RuntimeError(f"only {waiting} of {count} runs await approval: {set(statuses)}")
    print(f"{count} runs awaiting approval (set up in {time.perf_counter() - started:.1f} s)")
    return run_ids


def _statuses(client: redis.Redis, keys: Keys, run_ids: Sequence[str]) -> list[str]:
    pipe = client.pipeline(transaction=False)
    for run_id in run_ids:
        pipe.hget(keys.run(run_id), "status")
    return [as_text(s) or "" for s in pipe.execute()]


def _memory(bench: BenchRedis, keys: Keys, queue: str, run_ids: Sequence[str]) -> dict[str, float]:
    """Average bytes per waiting run, key by key, plus RQ's scheduled expiry job and shared shares."""
    client = bench.client
    sample = run_ids[: min(50, len(run_ids))]
    totals: dict[str, float] = {}
    for run_id in sample:
        for name, size in memory_per_run(client, keys, run_id).items():
            totals[name] = totals.get(name, 0) + size / len(sample)
    scheduled = f"rq:scheduled:{queue}"
    jobs = [as_text(j) or "" for j in client.zrange(scheduled, 0, len(sample) - 1)]
    job_bytes = sum(int(client.memory_usage(f"rq:job:{j}", samples=0) or 0) for j in jobs) / max(len(jobs), 1)
    count = max(int(client.zcard(scheduled)), 1)
    totals["RQ expiry job (rq:job hash)"] = job_bytes
    totals["share of RQ's scheduled registry"] = int(client.memory_usage(scheduled, samples=0) or 0) / count
    totals["share of the active-runs set"] = int(
        client.memory_usage(keys.active_runs(), samples=0) or 0
    ) / max(int(client.zcard(keys.active_runs())), 1)
    return totals


def _sweep_seconds(service: RunService) -> float:
    """How long one recovery sweep takes (a worker runs it between jobs, every recovery interval)."""
    started = time.perf_counter()
    service.recover()
    return time.perf_counter() - started


def _click_all(
    bench: BenchRedis, service: RunService, run_ids: Sequence[str]
) -> tuple[float, float, list[float]]:
    """Approve every waiting run within about a second; wait until all resumed runs finished."""
    approvals = []
    for run_id in run_ids:
        (approval,) = service.approvals.for_run(run_id)
        approvals.append(approval.id)
    keys = Keys(bench.prefix)
    start = time.time()
    spacing = 1.0 / len(approvals)
    for index, approval_id in enumerate(approvals):
        delay = start + index * spacing - time.time()
        if delay > 0:
            time.sleep(delay)
        service.lifecycle.decide(approval_id, user="U_BOB", approve=True)
    clicks = time.time() - start
    wait_until(
        lambda: all(s == RunStatus.COMPLETED.value for s in _statuses(bench.client, keys, run_ids)),
        timeout=900,
        what="every approved run to finish",
        interval=0.2,
    )
    pipe = bench.client.pipeline(transaction=False)
    for run_id in run_ids:
        pipe.hget(keys.run(run_id), "saved_at")
    finished = sorted(float(as_text(v) or 0) - start for v in pipe.execute())
    return clicks, finished[-1], finished


def _cleanup(bench: BenchRedis, queue: str) -> None:
    client = bench.client
    jobs: list[str] = []
    for registry in (f"rq:scheduled:{queue}", f"rq:finished:{queue}", f"rq:failed:{queue}"):
        jobs += [as_text(j) or "" for j in client.zrange(registry, 0, -1)]
    jobs += [as_text(j) or "" for j in client.lrange(f"rq:queue:{queue}", 0, -1)]
    for start in range(0, len(jobs), 1000):
        client.delete(*[f"rq:job:{j}" for j in jobs[start : start + 1000]])
    bench.cleanup(*rq_patterns(queue))


def _report(
    result: Result,
    waiting: int,
    alone: list[float],
    loaded: list[float],
    sizes: dict[str, float],
    sweep: float,
    clicks: float,
    drained: float,
    finished: list[float],
) -> None:
    ratio = median(loaded) / median(alone)
    result.add_table(
        f"A new run (3 read-only steps and an answer) from submit to completed, one worker "
        f"({len(loaded)} samples with the runs waiting; {len(alone)} alone: half before, half after them)",
        ["", "median ms", "p90 ms", "max ms", "ratio (median)"],
        [
            ["alone", median(alone) * 1000, percentile(alone, 90) * 1000, max(alone) * 1000, "1.00x"],
            [
                f"with {waiting:,} runs awaiting approval",
                median(loaded) * 1000,
                percentile(loaded, 90) * 1000,
                max(loaded) * 1000,
                f"{ratio:.2f}x",
            ],
        ],
    )
    own = [name for name in sizes if not name.startswith(("RQ", "share", "history"))]
    per_run = sum(sizes[name] for name in own)
    extra = sum(v for k, v in sizes.items() if k.startswith(("RQ", "share")))
    rows: list[list[object]] = [[name, f"{value:,.0f}"] for name, value in sizes.items()]
    rows.append(["**the run's keys minus its history**", f"**{per_run:,.0f}**"])
    rows.append(["with RQ's expiry job and shared shares", f"{per_run + extra:,.0f}"])
    result.add_table(
        "Redis memory per waiting run (bytes, MEMORY USAGE SAMPLES 0, mean of 50 runs)",
        ["key", "bytes"],
        rows,
    )
    throughput = len(finished) / drained if drained else float("nan")
    result.add_table(
        f"{waiting:,} approvals clicked within one second, one worker",
        ["clicks took (s)", "all finished after (s)", "p50 finished (s)", "p90 finished (s)", "runs/s"],
        [[clicks, drained, percentile(finished, 50), percentile(finished, 90), throughput]],
    )
    result.note(
        f"One recovery sweep over the {waiting:,} waiting runs took {sweep * 1000:,.0f} ms. A worker runs it "
        "between jobs once per lease (CHATOPS_LEASE_TTL_SECONDS, default 30 s), so a job arriving during "
        "a sweep waits that long at most."
    )
    result.data = {
        "sweep_ms": sweep * 1000,
        "alone_ms": [a * 1000 for a in alone],
        "loaded_ms": [a * 1000 for a in loaded],
        "sizes": sizes,
        "finished": finished,
    }
    result.target(f"new run at most {TARGET_RATIO}x its time alone", f"{ratio:.2f}x", ratio <= TARGET_RATIO)
    result.target(
        f"at most {TARGET_BYTES:,} bytes per waiting run beyond its history",
        f"{per_run:,.0f} bytes",
        per_run <= TARGET_BYTES,
    )


def _plot(
    options: Options,
    result: Result,
    alone: list[float],
    loaded: list[float],
    finished: list[float],
    waiting: int,
) -> None:
    def draw(axes: Any) -> None:
        axes.plot(finished, range(1, len(finished) + 1), color="tab:blue")
        axes.set_xlabel("seconds after the first click")
        axes.set_ylabel("resumed runs finished")
        axes.set_title(f"{waiting:,} approvals clicked within 1 s, one worker")
        axes.grid(True, alpha=0.3)

    save_plot(options, NAME, draw, result)


if __name__ == "__main__":
    raise SystemExit(main())
