"""The chart benchmark's renderers (``bench/chart_renderers.py``), each in a process of its own as the
benchmark runs them: what they print, that what they draw is a PNG, and a library that is missing."""

from __future__ import annotations

import io
import json
import subprocess
import sys

from PIL import Image

from bench.chart_renderers import RENDERERS, figures_of
from bench.charts import SCRIPT, run_renderer, series


def test_each_installed_renderer_reports_its_figures() -> None:
    for renderer in RENDERERS:
        figures = run_renderer(sys.executable, renderer, 2)
        if renderer == "matplotlib" and "missing" in figures:
            continue  # make bench installs it (bench/.venv); the row then says "not installed"
        assert figures["import_ms"] >= 0 and figures["first_ms"] > 0, figures
        assert len(figures["renders_ms"]) == 2 and figures["bytes"] > 1000


def test_the_pure_writer_and_chatops_draw_real_pngs() -> None:
    samples = series()
    for make in (RENDERERS["pure"], RENDERERS["chatops"]):
        image = Image.open(io.BytesIO(make()(samples)))
        image.verify()
        assert image.format == "PNG" and image.size[0] == 800


def test_a_missing_library_is_reported_not_raised() -> None:
    request = json.dumps({"renderer": "matplotlib", "renders": 1, "series": []})
    # An interpreter without matplotlib: its import fails as a missing module's does.
    code = f"import runpy, sys; sys.modules['matplotlib'] = None; runpy.run_path({str(SCRIPT)!r}, run_name='__main__')"
    done = subprocess.run(
        [sys.executable, "-c", code], input=request, capture_output=True, text=True, timeout=60
    )
    assert figures_of(done.stdout) == {"missing": "not installed (matplotlib)"}
