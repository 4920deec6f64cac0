"""Scale-out: throughput with 1, 2, 4 and 8 worker processes against one Redis, as a ratio to linear.

The model is the scripted OpenAI-compatible server (``emulator.models.openai_server``) answering every
request after 500 ms, reached over HTTP by the production ``LLMClient``; a run is 5 iterations
(4 calls to a read-only tool, then the answer). Each configuration gets the same 200 runs, all
submitted at once, and is timed from the first submit to the last run finished (about 8 minutes
with one worker). Linear = workers x the one-worker throughput of the same run.

Target: at least 0.9x linear up to 8 workers.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rq import Worker

from agent.redis_util import as_text
from agent.types import RunStatus
from bench.common import (
    BenchRedis,
    Options,
    Result,
    bench_redis,
    parse_options,
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
from bot.keys import Keys
from bot.runs.service import RunOptions, RunService
from emulator.models.openai_server import OpenAIServer, Reply, ScriptedToolCall

NAME = "scaleout"
WORKERS = (1, 2, 4, 8)
QUICK_WORKERS = (1, 2)
RUNS = 200
QUICK_RUNS = 4
ITERATIONS = 5
LATENCY = 0.5
QUICK_LATENCY = 0.05
TARGET_RATIO = 0.9


def scripted_model(latency: float) -> OpenAIServer:
    """Requests 1-4 of a run call ``check``; request 5 answers. Every answer takes ``latency``."""

    def answer(body: dict[str, Any]) -> Reply:
        turns = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        if turns < ITERATIONS - 1:
            return Reply(tool_calls=[ScriptedToolCall("check", {"step": turns})], delay=latency)
        return Reply(text="web-03 is fine now.", delay=latency)

    return OpenAIServer(fallback=answer)


def measure(bench: BenchRedis, server: OpenAIServer, workers: int, runs: int, logs: Path) -> float:
    """Seconds from the first submit until ``runs`` runs finished, with ``workers`` worker processes."""
    queue = queue_name(NAME)
    keys = Keys(bench.prefix)
    env = worker_env(
        bench,
        queue,
        "bench.runtimes:http_runtime",
        LLM_BASE_URL=server.url,
        LLM_API_KEY="bench",
        LLM_MODEL="gpt-bench",
        CHATOPS_MAX_ITERATIONS=str(ITERATIONS + 5),
    )
    service = RunService(bench.client, keys, RunOptions(queue_name=queue, retention_seconds=3600))
    started: list[Process] = []
    try:
        with processes(started):
            for n in range(workers):
                started.append(
                    start_process(f"worker-{workers}-{n}", [*chatops_command(), "worker"], env, logs)
                )
            wait_until(
                lambda: len(Worker.all(connection=bench.client, queue=service.queue)) >= workers,
                60,
                f"{workers} workers to start",
                interval=0.2,
                watch=started,
            )
            time.sleep(0.5)
            begin = time.perf_counter()
            tag = uuid.uuid4().hex[:6]
            run_ids = [
                service.submit("C_BENCH", f"{tag}.{n}", requester="U_ALICE", text="check web-03").run_id
                for n in range(runs)
            ]

            def all_done() -> bool:
                pipe = bench.client.pipeline(transaction=False)
                for run_id in run_ids:
                    pipe.hget(keys.run(run_id), "status")
                statuses = [as_text(s) for s in pipe.execute()]
                failed = [
                    s for s in statuses if s and s not in ("queued", "running", RunStatus.COMPLETED.value)
                ]
                if failed:
                    raise RuntimeError(f"runs ended {set(failed)}; see {logs}")
                return all(s == RunStatus.COMPLETED.value for s in statuses)

            wait_until(all_done, 1800, f"{runs} runs", interval=0.05)
            return time.perf_counter() - begin
    finally:
        bench.cleanup(*rq_patterns(queue))


def main(argv: Sequence[str] | None = None) -> int:
    options, _ = parse_options(__doc__ or NAME, argv)
    counts = QUICK_WORKERS if options.quick else WORKERS
    runs = QUICK_RUNS if options.quick else RUNS
    latency = QUICK_LATENCY if options.quick else LATENCY
    logs = Path(f"/tmp/chatops-bench-{NAME}-{uuid.uuid4().hex[:6]}")
    elapsed: dict[int, float] = {}
    with bench_redis(NAME) as bench, scripted_model(latency) as server:
        load = settle(options.settle)
        result = Result(NAME, "Scale-out", options.quick, load)
        for workers in counts:
            elapsed[workers] = measure(bench, server, workers, runs, logs)
            print(
                f"{workers} worker(s): {runs} runs in {elapsed[workers]:.1f} s = "
                f"{runs / elapsed[workers]:.2f} runs/s"
            )
    _report(result, elapsed, runs, latency)
    _plot(options, result, elapsed, runs)
    result.save(options)
    return 0


def _report(result: Result, elapsed: dict[int, float], runs: int, latency: float) -> None:
    base = runs / elapsed[min(elapsed)]
    ideal_run = ITERATIONS * latency
    rows = []
    for workers, seconds in elapsed.items():
        throughput = runs / seconds
        rows.append(
            [
                workers,
                runs,
                seconds,
                f"{throughput:.2f}",
                f"{base * workers:.2f}",
                f"{throughput / (base * workers):.2f}x",
                f"{workers / ideal_run:.2f}",
            ]
        )
    result.add_table(
        f"Runs of {ITERATIONS} iterations, model latency {latency * 1000:.0f} ms per request, all submitted at once",
        ["workers", "runs", "seconds", "runs/s", "linear runs/s", "ratio to linear", "model-bound runs/s"],
        rows,
    )
    result.data = {"elapsed": {str(k): v for k, v in elapsed.items()}, "runs": runs}
    worst = min((runs / s) / (base * w) for w, s in elapsed.items())
    result.target(
        f"at least {TARGET_RATIO}x linear up to {max(elapsed)} workers",
        f"worst {worst:.2f}x",
        worst >= TARGET_RATIO,
    )


def _plot(options: Options, result: Result, elapsed: dict[int, float], runs: int) -> None:
    def draw(axes: Any) -> None:
        workers = list(elapsed)
        base = runs / elapsed[min(elapsed)]
        axes.plot(workers, [runs / elapsed[w] for w in workers], "-o", label="measured")
        axes.plot(workers, [base * w for w in workers], "--", color="gray", label="linear")
        axes.plot(
            workers,
            [TARGET_RATIO * base * w for w in workers],
            ":",
            color="red",
            label=f"{TARGET_RATIO}x linear",
        )
        axes.set_xticks(workers)
        axes.set_xlabel("worker processes")
        axes.set_ylabel("runs finished per second")
        axes.set_title("Scale-out (500 ms model latency, 5 iterations per run)")
        axes.legend(fontsize=8)
        axes.grid(True, alpha=0.3)

    save_plot(options, NAME, draw, result)


if __name__ == "__main__":
    raise SystemExit(main())
