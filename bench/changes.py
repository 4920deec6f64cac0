"""Change collection (issue 33): what a runner's scan of its host costs.

A simulated host root with ``FILES`` watched files (about 1 KB of ``key = value`` configuration
each, one secret line in every file, in 100 folders) and a dpkg log of ``DPKG_LINES`` lines. The
first scan is the baseline (every file read, redacted and snapshotted); then ``SCANS`` scans each
follow an edit of ``CHANGED_SHARE`` of the files (one line each: stat, read, redact, diff,
snapshot), and as many scans follow no edit at all (the stat walk alone). Each scan is timed in
wall time and in this process's CPU time (``time.process_time``: the scan is single-threaded),
and the CPU of one scan is put against the runner's interval (``CHATOPS_CHANGES_SCAN_SECONDS``,
default 60 s) as a share of one core.

Target: 10,000 watched files with 1% changed per scan cost under 1% of a core at a 60 s interval
(under 600 ms of CPU per scan).
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.common import OPS_WORDS, Result, median, parse_options, percentile, settle
from tools.changes.host import HostPaths
from tools.changes.scanner import ChangeScanner
from tools.safety import Redactor

NAME = "changes"
FILES, QUICK_FILES = 10_000, 200
SCANS, QUICK_SCANS = 10, 2
CHANGED_SHARE = 0.01
DPKG_LINES = 5_000
INTERVAL_S = 60.0
TARGET_CORE_PERCENT = 1.0


def config_text(number: int, edit: int, rng: random.Random) -> str:
    lines = [f"# service {number} (edit {edit})", f"db_password = secret-{number}-{edit}"]
    lines += [f"{rng.choice(OPS_WORDS)}_{key} = {rng.choice(OPS_WORDS)}" for key in range(40)]
    return "\n".join(lines) + "\n"


def build_host(root: Path, files: int) -> list[Path]:
    rng = random.Random(33)
    paths = []
    for number in range(files):
        folder = root / "etc" / "apps" / f"app{number % 100:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"conf{number:05d}.conf"
        path.write_text(config_text(number, 0, rng))
        paths.append(path)
    log = root / "var" / "log" / "dpkg.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(
        "".join(
            f"2026-11-{1 + line % 28:02d} 10:{line % 60:02d}:00 upgrade pkg{line}:amd64 1.{line} 1.{line + 1}\n"
            for line in range(DPKG_LINES)
        )
    )
    return paths


def timed_scan(scanner: ChangeScanner) -> tuple[float, float, int]:
    """(wall ms, CPU ms, changes) of one scan."""
    wall, cpu = time.perf_counter(), time.process_time()
    report = scanner.scan()
    cpu_ms = (time.process_time() - cpu) * 1000
    wall_ms = (time.perf_counter() - wall) * 1000
    assert not report.problems, report.problems
    return wall_ms, cpu_ms, len(report.changes)


def main(argv: Sequence[str] | None = None) -> int:
    options, _ = parse_options(__doc__ or NAME, argv)
    files = QUICK_FILES if options.quick else FILES
    scans = QUICK_SCANS if options.quick else SCANS
    changed = max(1, int(files * CHANGED_SHARE))
    load = settle(options.settle)
    result = Result(NAME, "Change collection: a runner's scan of its host", options.quick, load)
    base = Path(tempfile.mkdtemp(prefix="bench-changes-"))
    try:
        root = base / "root"
        paths = build_host(root, files)
        clock = [time.time()]
        scanner = ChangeScanner(
            "bench-host",
            state_dir=base / "state",
            redact=Redactor().redact,
            paths=HostPaths.under(root),
            watch=[root / "etc" / "apps"],
            clock=lambda: clock[0],
        )
        baseline = timed_scan(scanner)
        assert baseline[2] == DPKG_LINES, baseline
        rng = random.Random(1)
        changed_scans, idle_scans = [], []
        for turn in range(1, scans + 1):
            for number in rng.sample(range(files), changed):
                paths[number].write_text(config_text(number, turn, rng))
            clock[0] += INTERVAL_S
            changed_scans.append(timed_scan(scanner))
            assert changed_scans[-1][2] == changed, changed_scans[-1]
            clock[0] += INTERVAL_S
            idle_scans.append(timed_scan(scanner))
            assert idle_scans[-1][2] == 0, idle_scans[-1]
        _report(result, files, changed, baseline, changed_scans, idle_scans)
        result.data = {
            "files": files,
            "changed_per_scan": changed,
            "baseline_wall_ms": baseline[0],
            "baseline_cpu_ms": baseline[1],
            "changed_wall_ms": [scan[0] for scan in changed_scans],
            "changed_cpu_ms": [scan[1] for scan in changed_scans],
            "idle_wall_ms": [scan[0] for scan in idle_scans],
            "idle_cpu_ms": [scan[1] for scan in idle_scans],
            "state_bytes": sum(path.stat().st_size for path in (base / "state").rglob("*") if path.is_file()),
        }
    finally:
        shutil.rmtree(base, ignore_errors=True)
    result.save(options)
    return 0


def _report(
    result: Result,
    files: int,
    changed: int,
    baseline: tuple[float, float, int],
    changed_scans: list[tuple[float, float, int]],
    idle_scans: list[tuple[float, float, int]],
) -> None:
    def share(cpu_ms: float) -> float:
        return cpu_ms / 1000 / INTERVAL_S * 100

    changed_cpu = [scan[1] for scan in changed_scans]
    idle_cpu = [scan[1] for scan in idle_scans]
    result.add_table(
        f"{files} watched files (about 1 KB each, a secret line in each), a dpkg log of {DPKG_LINES} lines; "
        f"{len(changed_scans)} scans after {changed} files were edited, as many after no edit",
        ["scan", "wall p50 (ms)", "CPU p50 (ms)", "CPU max (ms)", f"CPU at a {INTERVAL_S:g} s interval"],
        [
            [
                "baseline (first scan: every file read and snapshotted)",
                baseline[0],
                baseline[1],
                baseline[1],
                "-",
            ],
            [
                f"{changed} files changed ({CHANGED_SHARE:.0%})",
                median([scan[0] for scan in changed_scans]),
                median(changed_cpu),
                max(changed_cpu),
                f"{share(median(changed_cpu)):.3f}% of a core",
            ],
            [
                "nothing changed (stat walk)",
                median([scan[0] for scan in idle_scans]),
                median(idle_cpu),
                max(idle_cpu),
                f"{share(median(idle_cpu)):.3f}% of a core",
            ],
        ],
    )
    worst = share(percentile(changed_cpu, 100))
    result.target(
        f"{FILES} files, {CHANGED_SHARE:.0%} changed per scan: CPU < {TARGET_CORE_PERCENT:g}% of a core at {INTERVAL_S:g} s",
        f"{share(median(changed_cpu)):.3f}% (median), {worst:.3f}% (worst scan) for {files} files",
        worst < TARGET_CORE_PERCENT,
    )


if __name__ == "__main__":
    raise SystemExit(main())
