"""Where a benchmark writes: the committed results and plots by default, everything beside the
JSON with ``--out`` (a run kept elsewhere must not replace a committed plot), nothing with
``--no-plots``."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.charts import save_chart
from bench.common import PLOTS_DIR, RESULTS_DIR, Result, parse_options, plot_reference


@pytest.fixture(autouse=True)
def _sigterm_kept() -> Iterator[None]:
    """``parse_options`` makes SIGTERM unwind the benchmark; the test process keeps its own."""
    handler = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, handler)


def test_by_default_results_and_plots_go_where_the_report_reads_them() -> None:
    options, _ = parse_options("test", ["--settle", "0"])
    assert (options.out, options.plots) == (RESULTS_DIR, PLOTS_DIR)
    assert plot_reference(PLOTS_DIR / "burst.png") == "bench/burst.png"


def test_a_run_with_out_keeps_its_plot_beside_its_json(tmp_path: Path) -> None:
    committed = (PLOTS_DIR / "charts.png").read_bytes()
    options, _ = parse_options("test", ["--out", str(tmp_path), "--settle", "0"])
    assert (options.out, options.plots) == (tmp_path, tmp_path)
    result = Result("charts", "the chart", False, (0.0, 0.0, 0.0))
    save_chart(options, result)  # chatops's own renderer: no matplotlib needed
    assert (tmp_path / "charts.png").read_bytes().startswith(b"\x89PNG")
    assert result.plots == [str(tmp_path / "charts.png")]
    assert (PLOTS_DIR / "charts.png").read_bytes() == committed


def test_no_plots_writes_none(tmp_path: Path) -> None:
    options, _ = parse_options("test", ["--out", str(tmp_path), "--no-plots", "--settle", "0"])
    assert options.plots is None
