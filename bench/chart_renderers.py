"""One chart renderer measured in a process of its own (``bench.charts`` starts it): the import, the
first chart, then ``renders`` more, each of the same series.

Run as a script (``python bench/chart_renderers.py``) with a JSON request on stdin,
``{"renderer": "chatops" | "matplotlib" | "pure", "renders": N, "series": [[name, [[t, v], ...]], ...]}``;
it prints one JSON line: ``import_ms`` (the library's modules, in this fresh process),
``first_ms`` (the first chart, fonts and caches included; the project's own modules are loaded
before the clock starts, as in a worker, so ``import_ms`` is the library's alone), ``renders_ms`` (each later one) and
``bytes`` (the PNG's size), or ``missing`` when the library is not installed in this interpreter.
It imports nothing of the project's but the renderer measured, so another interpreter (the one
with matplotlib, ``--matplotlib-python``) can run it.

* ``chatops``: ``bot.slack.rendering.chart.render_png``, what the bot uploads (Pillow ``ImageDraw``);
* ``matplotlib``: an ``Agg`` figure of the same size with the same parts (title, grid, the lines,
  a legend), saved as PNG with matplotlib's defaults;
* ``pure``: a PNG writer in pure Python (``zlib`` and ``struct``): the lines only, 1 px, no text
  and no axes. A lower bound for writing our own: text would need a font of our own too.
"""

from __future__ import annotations

import importlib
import io
import itertools
import json
import struct
import sys
import time
import zlib
from collections.abc import Callable
from typing import Any

Series = list[tuple[str, list[tuple[float, float]]]]
WIDTH, HEIGHT = 800, 408  # the size of chatops's chart of 4 series


def main() -> None:
    request = json.load(sys.stdin)
    series: Series = [(name, [(t, v) for t, v in points]) for name, points in request["series"]]
    for module in PRELOADED.get(request["renderer"], ()):
        importlib.import_module(module)
    started = time.perf_counter()
    try:
        render = RENDERERS[request["renderer"]]()
    except ImportError as error:
        print(json.dumps({"missing": f"not installed ({error.name})"}))
        return
    imported = time.perf_counter()
    first = render(series)
    first_done = time.perf_counter()
    times = []
    for _ in range(int(request["renders"])):
        begin = time.perf_counter()
        render(series)
        times.append((time.perf_counter() - begin) * 1000)
    figures = {
        "import_ms": (imported - started) * 1000,
        "first_ms": (first_done - imported) * 1000,
        "renders_ms": times,
        "bytes": len(first),
    }
    print(json.dumps(figures))


# -- the renderers: each import returns its render function ---------------------------------------


def chatops() -> Callable[[Series], bytes]:
    from PIL import Image, ImageDraw, ImageFont  # noqa: F401  (what render_png imports on its first chart)

    from agent.series import Series as Samples
    from bot.runs.charts import Chart
    from bot.slack.rendering.chart import render_png

    def render(series: Series) -> bytes:
        samples = tuple(Samples(name, tuple(points)) for name, points in series)
        return render_png(Chart("E3", "prometheus_range", QUERY, "last 60 min, step 5s", samples))

    return render


QUERY = 'rate(node_cpu_seconds_total{mode="user"}[5m])'


def matplotlib() -> Callable[[Series], bytes]:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    def render(series: Series) -> bytes:
        figure = Figure(figsize=(WIDTH / 100, HEIGHT / 100), dpi=100)
        axes = figure.add_subplot()
        for name, points in series:
            axes.plot([t for t, _ in points], [v for _, v in points], linewidth=1.5, label=name)
        axes.set_title(f"E3 · prometheus_range · {QUERY}", fontsize=9)
        axes.grid(True, color="#e8e8e8")
        axes.legend(fontsize=7, loc="upper left")
        out = io.BytesIO()
        figure.savefig(out, format="png")
        return out.getvalue()

    return render


def pure() -> Callable[[Series], bytes]:
    def render(series: Series) -> bytes:
        pixels = bytearray(WIDTH * HEIGHT)  # palette index 0: white
        times = [t for _, points in series for t, _ in points]
        values = [v for _, points in series for _, v in points]
        t0, t1, v0, v1 = min(times), max(times), min(values), max(values)
        for colour, (_, points) in enumerate(series, start=1):
            xy = [
                (int((t - t0) / (t1 - t0) * (WIDTH - 1)), int((1 - (v - v0) / (v1 - v0)) * (HEIGHT - 1)))
                for t, v in points
            ]
            for (xa, ya), (xb, yb) in itertools.pairwise(xy):
                _line(pixels, xa, ya, xb, yb, colour)
        return _png(pixels, [(255, 255, 255), (31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40)])

    return render


def _line(pixels: bytearray, xa: int, ya: int, xb: int, yb: int, colour: int) -> None:
    """Bresenham's line."""
    dx, dy = abs(xb - xa), -abs(yb - ya)
    sx, sy = (1 if xa < xb else -1), (1 if ya < yb else -1)
    error = dx + dy
    while True:
        pixels[ya * WIDTH + xa] = colour
        if xa == xb and ya == yb:
            return
        doubled = 2 * error
        if doubled >= dy:
            error += dy
            xa += sx
        if doubled <= dx:
            error += dx
            ya += sy


def _png(pixels: bytearray, palette: list[tuple[int, int, int]]) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes(pixels[y * WIDTH : (y + 1) * WIDTH]) for y in range(HEIGHT))
    header = struct.pack(">IIBBBBB", WIDTH, HEIGHT, 8, 3, 0, 0, 0)  # 8-bit palette
    colours = bytes(level for colour in palette for level in colour)
    return b"".join(
        [
            b"\x89PNG\r\n\x1a\n",
            chunk(b"IHDR", header),
            chunk(b"PLTE", colours),
            chunk(b"IDAT", zlib.compress(rows, 6)),
            chunk(b"IEND", b""),
        ]
    )


# What a worker has loaded before its first chart: not the renderer's cost.
PRELOADED = {"chatops": ("agent.series", "bot.runs.charts", "bot.slack.rendering.chart_axes")}
RENDERERS: dict[str, Callable[[], Callable[[Series], bytes]]] = {
    "chatops": chatops,
    "matplotlib": matplotlib,
    "pure": pure,
}


def figures_of(output: str) -> dict[str, Any]:
    """The JSON line a run printed (its last line: a library may print warnings before)."""
    figures: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return figures


if __name__ == "__main__":
    main()
