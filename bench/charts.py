"""Charts: what the chart of a ``prometheus_range`` result costs to draw, and its size, against the
alternatives the renderer was chosen from.

The same 4 series of 720 points (an hour at a 5 s step, noisy waves) are drawn by each renderer in
a fresh process of its own (``bench/chart_renderers.py``): the import of its library, the first
chart (fonts and caches), then ``RENDERS`` more. Rows: chatops's renderer
(``bot.slack.rendering.chart``, Pillow ``ImageDraw``: what the bot uploads), matplotlib's Agg
(same size and parts; measured with ``--matplotlib-python``, default this interpreter, which
``make bench`` gives matplotlib), and a PNG writer in pure Python (lines only: the floor of
writing our own). Import times are the median of ``IMPORTS`` fresh processes.

Targets (issue 30): chatops's chart of 4 series x 720 points renders in at most 150 ms (p50) and
is at most 120 KB. With plots on, the chart itself is written to ``docs/bench/charts.png`` (beside the JSON with ``--out``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from bench.chart_renderers import figures_of
from bench.common import ROOT, Options, Result, median, parse_options, percentile, plot_reference, settle

NAME = "charts"
SERIES, POINTS, STEP = 4, 720, 5.0
RENDERS, QUICK_RENDERS = 20, 2
IMPORTS, QUICK_IMPORTS = 5, 1
TARGET_MS = 150.0
TARGET_BYTES = 120 * 1024
START = 1_780_000_000.0
SCRIPT = ROOT / "bench" / "chart_renderers.py"
CHATOPS = "chatops: Pillow ImageDraw (bot.slack.rendering.chart)"
ROWS = (
    (CHATOPS, "chatops"),
    ("matplotlib Agg", "matplotlib"),
    ("pure Python + zlib (lines only: no text, no axes)", "pure"),
)


def series() -> list[tuple[str, list[tuple[float, float]]]]:
    """Four noisy waves, the same every run."""
    rng = random.Random(30)
    return [
        (
            f'node_cpu_seconds{{instance="web-0{s + 1}:9100", mode="user"}}',
            [
                (
                    START + STEP * i,
                    20 + 15 * s + 10 * math.sin(i / 40 + s) + rng.gauss(0, 2) + 5 * s * i / POINTS,
                )
                for i in range(POINTS)
            ],
        )
        for s in range(SERIES)
    ]


def run_renderer(python: str, renderer: str, renders: int) -> dict[str, Any]:
    """One fresh process drawing with ``renderer``: its figures (``bench/chart_renderers.py``)."""
    request = json.dumps({"renderer": renderer, "renders": renders, "series": series()})
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    done = subprocess.run(
        [python, str(SCRIPT)], input=request, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300
    )
    if done.returncode != 0:
        return {"missing": f"failed: {done.stderr.strip().splitlines()[-1:]}"}
    return figures_of(done.stdout)


def measure(python: str, renderer: str, renders: int, imports: int) -> dict[str, Any]:
    """The renders of one process, and the import time's median over ``imports`` processes."""
    figures = run_renderer(python, renderer, renders)
    if "missing" in figures:
        return figures
    import_times = [figures["import_ms"]]
    import_times += [run_renderer(python, renderer, 0)["import_ms"] for _ in range(imports - 1)]
    figures["import_ms"] = median(import_times)
    return figures


def extra_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--matplotlib-python",
        default=sys.executable,
        help="the interpreter that has matplotlib, for its row (default: this one)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    options, args = parse_options(__doc__ or NAME, argv, extra_options)
    renders = QUICK_RENDERS if options.quick else RENDERS
    imports = QUICK_IMPORTS if options.quick else IMPORTS
    load = settle(options.settle)
    result = Result(NAME, "Charts: render time and size", options.quick, load)
    measured: dict[str, dict[str, Any]] = {}
    for label, renderer in ROWS:
        python = args.matplotlib_python if renderer == "matplotlib" else sys.executable
        measured[label] = measure(python, renderer, renders, imports)
        print(f"{label}: {measured[label]}" if "missing" in measured[label] else f"{label}: measured")
    _report(result, measured, renders, imports)
    save_chart(options, result)
    result.data = {"renders": renders, "imports": imports, "figures": measured}
    result.save(options)
    return 0


def _report(result: Result, measured: dict[str, dict[str, Any]], renders: int, imports: int) -> None:
    rows: list[list[object]] = []
    for label, figures in measured.items():
        if "missing" in figures:
            rows.append([label, figures["missing"], "-", "-", "-", "-"])
            continue
        times = figures["renders_ms"]
        rows.append(
            [label, figures["import_ms"], figures["first_ms"], percentile(times, 50), percentile(times, 95),
             figures["bytes"] / 1024]
        )  # fmt: skip
    result.add_table(
        f"{SERIES} series x {POINTS} points, one fresh process per renderer; import: median of {imports} "
        f"processes; render: {renders} charts after the first",
        ["renderer", "import (ms)", "first chart (ms)", "render p50 (ms)", "render p95 (ms)", "PNG (KB)"],
        rows,
    )
    ours = measured[CHATOPS]
    if "missing" in ours:
        result.target(f"chart p50 <= {TARGET_MS:.0f} ms", ours["missing"], False)
        return
    p50 = percentile(ours["renders_ms"], 50)
    result.target(
        f"chart of {SERIES} x {POINTS} points: render p50 <= {TARGET_MS:.0f} ms",
        f"{p50:.1f} ms",
        p50 <= TARGET_MS,
    )
    size = ours["bytes"]
    result.target(
        f"chart of {SERIES} x {POINTS} points: PNG <= 120 KB", f"{size / 1024:.1f} KB", size <= TARGET_BYTES
    )
    other = measured["matplotlib Agg"]
    if "missing" not in other:
        result.note(
            f"matplotlib Agg against chatops's: import {other['import_ms'] / ours['import_ms']:.1f}x, "
            f"render p50 {percentile(other['renders_ms'], 50) / p50:.1f}x, PNG {other['bytes'] / size:.1f}x"
        )


def save_chart(options: Options, result: Result) -> None:
    """The chart itself, as the bot uploads it, beside the benchmarks' plots."""
    if options.plots is None:
        return
    from agent.series import Series
    from bench.chart_renderers import QUERY
    from bot.runs.charts import Chart
    from bot.slack.rendering.chart import render_png

    samples = tuple(Series(name, tuple(points)) for name, points in series())
    options.plots.mkdir(parents=True, exist_ok=True)
    path = options.plots / f"{NAME}.png"
    path.write_bytes(render_png(Chart("E3", "prometheus_range", QUERY, "last 60 min, step 5s", samples)))
    result.plots.append(plot_reference(path))
    print(f"# wrote {path}")


if __name__ == "__main__":
    raise SystemExit(main())
