"""What every benchmark shares: options, the machine's load, statistics, tables, results, Redis.

Each benchmark is a module with ``main(argv) -> int``; ``python -m bench.<name> [--quick] [--out DIR]``
prints its figures (with the load average next to them) and writes ``<out>/<name>.json``, which
``bench.report`` turns into ``docs/BENCHMARKS.md``. ``--quick`` is the smoke-test size: it checks
the script still works, its figures mean nothing. The processes a benchmark starts:
``bench.processes``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from emulator.redis_leftovers import leftovers_of

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "bench" / "results"
PLOTS_DIR = ROOT / "docs" / "bench"
QUIET_LOAD = 0.5  # a 1-minute load average below this counts as a quiet machine


# -- options -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    quick: bool
    out: Path
    plots: Path | None  # where PNGs go (None: no plots)
    settle: float  # seconds to wait, at most, for a quiet machine before measuring


def parse_options(
    description: str,
    argv: Sequence[str] | None = None,
    extra: Callable[[argparse.ArgumentParser], None] | None = None,
) -> tuple[Options, argparse.Namespace]:
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    if extra is not None:
        extra(parser)
    parser.add_argument(
        "--quick", action="store_true", help="minimal sizes (smoke test; figures mean nothing)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        help=f"where the JSON result and the plots go (default {RESULTS_DIR} and {PLOTS_DIR})",
    )
    parser.add_argument("--no-plots", action="store_true", help="do not write PNG plots")
    parser.add_argument(
        "--settle",
        type=float,
        default=float(os.environ.get("BENCH_SETTLE", "20")),
        help="wait up to this many seconds for the 1-minute load average to drop below 0.5 (BENCH_SETTLE)",
    )
    args = parser.parse_args(argv)
    # A SIGTERM (the smoke test giving up, Ctrl-C's cousin) unwinds like an exception, so every
    # ``finally`` stops the processes this benchmark started and deletes its Redis keys.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    out = args.out or RESULTS_DIR
    # A run kept elsewhere (``--out``) keeps its plots beside its JSON: the committed plots in
    # docs/bench belong to the committed results in bench/results.
    plots = None if args.no_plots or args.quick else (args.out or PLOTS_DIR)
    options = Options(args.quick, out, plots, 0.0 if args.quick else args.settle)
    return options, args


# -- the machine -------------------------------------------------------------------------------------


def load_average() -> tuple[float, float, float]:
    return os.getloadavg()


def load_text(load: Sequence[float] | None = None) -> str:
    one, five, fifteen = load or load_average()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min)"


def settle(seconds: float) -> tuple[float, float, float]:
    """Wait (up to ``seconds``) for a quiet machine; return the load average measuring starts at."""
    deadline = time.monotonic() + seconds
    while load_average()[0] >= QUIET_LOAD and time.monotonic() < deadline:
        time.sleep(2)
    load = load_average()
    print(f"# {load_text(load)}{'' if load[0] < QUIET_LOAD else '  (busy machine: figures are pessimistic)'}")
    return load


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": _git_commit(),
    }


def _git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# -- statistics and tables -----------------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0-100) by linear interpolation; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table (also readable as plain text)."""
    cells = [[str(h) for h in headers], *[[_cell(v) for v in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |" for row in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def _cell(value: object) -> str:
    if isinstance(value, float):
        if value != value:  # NaN
            return "-"
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


# -- results -------------------------------------------------------------------------------------------


@dataclass
class Result:
    """One benchmark's figures: tables (Markdown), target verdicts, notes, raw data for plots."""

    name: str
    title: str
    quick: bool
    load_before: Sequence[float]
    tables: list[str] = field(default_factory=list)
    targets: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    plots: list[str] = field(default_factory=list)

    def add_table(self, caption: str, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        text = f"{caption}\n\n{table(headers, rows)}" if caption else table(headers, rows)
        self.tables.append(text)
        print(f"\n{text}\n")

    def target(self, what: str, figure: str, met: bool) -> None:
        self.targets.append({"target": what, "figure": figure, "met": met})
        print(f"target {'MET ' if met else 'MISSED'}: {what}: {figure}")

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"note: {text}")

    def save(self, options: Options) -> Path:
        load_after = load_average()
        print(f"# after: {load_text(load_after)}")
        options.out.mkdir(parents=True, exist_ok=True)
        path = options.out / f"{self.name}.json"
        payload = {
            "name": self.name,
            "title": self.title,
            "quick": self.quick,
            "finished_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "machine": machine(),
            "load_before": list(self.load_before),
            "load_after": list(load_after),
            "tables": self.tables,
            "targets": self.targets,
            "notes": self.notes,
            "plots": self.plots,
            "data": self.data,
        }
        path.write_text(json.dumps(payload, indent=1, default=str) + "\n")
        print(f"# wrote {path}")
        return path


def save_plot(options: Options, name: str, draw: Callable[[Any], None], result: Result) -> None:
    """Draw with matplotlib (when installed and plots are wanted) into ``docs/bench/<name>.png``."""
    if options.plots is None:
        return
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("# matplotlib is not installed: no plot")
        return
    figure, axes = plt.subplots(figsize=(7.5, 4.2), dpi=110)
    draw(axes)
    figure.tight_layout()
    options.plots.mkdir(parents=True, exist_ok=True)
    path = options.plots / f"{name}.png"
    figure.savefig(path)
    plt.close(figure)
    result.plots.append(plot_reference(path))
    print(f"# wrote {path}")


def plot_reference(path: Path) -> str:
    """How a result names its plot: relative to docs/ (as docs/BENCHMARKS.md links it) when it is
    one of the committed plots, else where it was written."""
    return str(path.relative_to(PLOTS_DIR.parent)) if path.is_relative_to(PLOTS_DIR) else str(path)


# -- Redis ---------------------------------------------------------------------------------------------


# The id in a run's key prefix (``bench:<name>:<id>:``) and queue names (``bench-<name>-<id>...``):
# ``BENCH_RUN_ID`` when set (the smoke test's, which then finds whatever a run left), else random.
RUN_ID_ENV = "BENCH_RUN_ID"
_RANDOM_RUN_ID = uuid.uuid4().hex[:8]


def run_id() -> str:
    return os.environ.get(RUN_ID_ENV) or _RANDOM_RUN_ID


def queue_name(name: str) -> str:
    """A new RQ queue of this run: ``bench-<name>-<run id>-<random>``."""
    return f"bench-{name}-{run_id()}-{uuid.uuid4().hex[:6]}"


@dataclass
class BenchRedis:
    url: str
    prefix: str
    client: redis.Redis

    def cleanup(self, *patterns: str) -> None:
        """Delete every key under our prefix (and any extra ``patterns``, e.g. RQ's queue keys)."""
        for pattern in (f"{self.prefix}*", *patterns):
            batch: list[bytes] = []
            for key in self.client.scan_iter(match=pattern, count=2000):
                batch.append(key)
                if len(batch) >= 1000:
                    self.client.delete(*batch)
                    batch = []
            if batch:
                self.client.delete(*batch)


def run_records(bench: BenchRedis) -> list[bytes]:
    """The run records under our prefix (not their ``:messages``, ``:lease``, ... keys)."""
    skip = len(bench.prefix)
    return [
        key
        for key in bench.client.scan_iter(match=f"{bench.prefix}run:*", count=5000)
        if key[skip:].count(b":") == 1
    ]


def delete_run_jobs(bench: BenchRedis, queue: str) -> None:
    """RQ's keys of ``queue``, which are not under our prefix: every job whose record names the queue
    with its results stream and executions (named by the job's id alone, so no pattern finds them:
    ``emulator.redis_leftovers``' thorough look), then the queue, its registries and its workers."""
    leftovers_of(bench.client, queue=queue, thorough=True).remove(bench.client)
    bench.cleanup(*rq_patterns(queue))


def rq_patterns(queue: str) -> tuple[str, ...]:
    """RQ's keys of ``queue`` (its job hashes expire by themselves)."""
    return (f"rq:queue:{queue}*", f"rq:wip:{queue}*", f"rq:finished:{queue}*", f"rq:failed:{queue}*",
            f"rq:scheduled:{queue}*", f"rq:deferred:{queue}*", f"rq:canceled:{queue}*",
            f"rq:executions:{queue}*")  # fmt: skip


@contextlib.contextmanager
def bench_redis(name: str) -> Iterator[BenchRedis]:
    """The Redis at ``REDIS_URL`` (or 127.0.0.1:6379), else an embedded one; keys under a unique prefix."""
    from emulator.embedded_redis import ensure_redis
    from emulator.redis_leftovers import leftovers_of

    server = ensure_redis()
    client = redis.Redis.from_url(server.url)
    bench = BenchRedis(server.url, f"bench:{name}:{run_id()}:", client)
    try:
        yield bench
    finally:
        with contextlib.suppress(redis.RedisError):
            bench.cleanup()
            # RQ's keys of every queue of this run (``queue_name``), its runners' included; the
            # thorough look, for jobs that no list or registry holds any more (a job whose
            # result expired from the finished registry keeps its hash a while).
            queue = f"bench-{name}-{run_id()}"
            leftovers_of(client, prefix=bench.prefix, queue=queue, thorough=True).remove(client)
        client.close()
        server.stop()


# Words of an ops text, for the benchmarks that generate one (runbooks, incidents): one vocabulary.
OPS_WORDS = [
    "disk",
    "cpu",
    "memory",
    "latency",
    "queue",
    "backlog",
    "replication",
    "lag",
    "certificate",
    "nginx",
    "postgres",
    "redis",
    "kafka",
    "restart",
    "rotate",
    "logs",
    "volume",
    "inode",
    "swap",
    "oom",
    "kernel",
    "dns",
    "timeout",
    "upstream",
    "pool",
    "connection",
    "error",
    "deploy",
    "rollback",
    "canary",
    "traffic",
    "shard",
    "index",
    "vacuum",
    "checkpoint",
    "wal",
    "snapshot",
    "backup",
    "restore",
]
