"""The benchmarks still run: each script in its quick mode (minimal sizes; its figures mean nothing).

No timing is asserted here: benchmarks are not tests. ``make bench`` runs them at full size.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.report import ORDER

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ORDER)
def test_benchmark_runs_in_quick_mode(name: str, tmp_path: Path, redis_url: str) -> None:
    env = {**os.environ, "REDIS_URL": redis_url, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{name}", "--quick", "--out", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads((tmp_path / f"{name}.json").read_text())
    assert result["quick"] and result["tables"] and result["targets"]
    assert "load average" in done.stdout


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
