"""The benchmarks still run: each script in its quick mode (minimal sizes; its figures mean nothing).

No timing is asserted here: benchmarks are not tests. ``make bench`` runs them at full size.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import redis

from bench.common import RUN_ID_ENV
from bench.report import ORDER
from tests.support.redis_cleanup import ISSUED, leftovers_of

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # each benchmark starts its web, workers and emulator: tens of seconds
@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", ORDER)
def test_benchmark_runs_in_quick_mode(name: str, tmp_path: Path, redis_url: str) -> None:
    mark = uuid.uuid4().hex  # in the environment of every process the benchmark starts
    run = mark[:8]  # in its key prefix and queue names: what it left can be found
    prefix, queues = f"bench:{name}:{run}:", f"bench-{name}-{run}"
    ISSUED.add(prefix=prefix, queue=queues, owner=f"bench.{name}")
    env = {**os.environ, "REDIS_URL": redis_url, "PYTHONPATH": str(ROOT), "BENCH_NO_NICE": "1"}
    env["BENCH_SMOKE_MARK"] = mark
    env[RUN_ID_ENV] = run
    command = [sys.executable, "-m", f"bench.{name}", "--quick", "--out", str(tmp_path)]
    bench = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # A bound for a hang only (the run's own checks decide): the benchmark is told to stop
        # first (SIGTERM: its ``finally`` stops what it started and deletes its keys).
        out, err = bench.communicate(timeout=480)
    except subprocess.TimeoutExpired:
        bench.terminate()
        out, err = bench.communicate(timeout=60)
        raise AssertionError(f"bench.{name} --quick did not finish: {out.decode()[-3000:]}") from None
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
        kill_marked(mark)  # whatever it left, even when it failed or was killed
        left = delete_leftovers(redis_url, prefix, queues)
    stdout, stderr = out.decode(), err.decode()
    assert bench.returncode == 0, stdout[-3000:] + stderr[-3000:]
    assert not left, f"bench.{name} left {len(left)} Redis keys (now deleted): {left[:20]}"
    result = json.loads((tmp_path / f"{name}.json").read_text())
    assert result["quick"] and result["tables"] and result["targets"]
    assert "load average" in stdout


def delete_leftovers(redis_url: str, prefix: str, queues: str) -> list[str]:
    """What the benchmark left in Redis under its prefix and of its queues, named, then deleted."""
    client = redis.Redis.from_url(redis_url)
    try:
        left = leftovers_of(client, prefix=prefix, queue=queues, thorough=True)
        left.remove(client)
        return left.names()
    finally:
        client.close()


def kill_marked(mark: str) -> list[str]:
    """Kill every process whose environment carries ``mark`` (whatever session it started in);
    return what each was running."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if f"BENCH_SMOKE_MARK={mark}".encode() not in (entry / "environ").read_bytes():
                continue
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            continue
        found.append(command.strip()[:200])
    return found


def test_report_is_written_from_results(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "approvals.json").write_text(
        json.dumps(
            {
                "name": "approvals",
                "title": "Approval waits",
                "quick": True,
                "finished_at": "now",
                "machine": {"cpus": 2, "python": "3.11", "commit": "abc"},
                "load_before": [0.1, 0.2, 0.3],
                "load_after": [0.1, 0.2, 0.3],
                "tables": ["| a |\n|---|\n| 1 |"],
                "targets": [{"target": "t", "figure": "f", "met": True}],
                "notes": [],
                "plots": [],
                "data": {},
            }
        )
    )
    output = tmp_path / "BENCHMARKS.md"
    done = subprocess.run(
        [sys.executable, "-m", "bench.report", "--results", str(results), "--output", str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    text = output.read_text()
    assert "| Approval waits | t | f | yes | 0.10 / 0.10 |" in text and "## ingress\n\nNot run yet." in text
