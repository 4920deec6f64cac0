"""A ``bot.runs.charts.Chart`` as a small PNG, with its title, file name and alt text for Slack.

Drawn with Pillow's ``ImageDraw`` (bench/notes/charts.md says why not matplotlib: a tenth of the
import time, several times faster per chart, a fifth of the bytes): everything at twice the
size, then scaled down (smooth lines and text) and reduced to a 64-colour palette, so a chart of
4 series of 720 points is about 20 KB. Pillow is imported with the first chart, never by a
process that draws none (the web process, the CLI).

Everything written in the image or its alt text comes from the ``Chart`` (already redacted) and
is made inert here: control and format characters (newlines, bidi overrides, zero-width) go,
and each text is shortened to fit. ``chart_texts`` lists every text the image carries, exactly as
``render_png`` draws them (what the tests hold to "no secret in the picture").

Odd data never raises: a series without samples, one sample (a dot), NaN and infinities (gaps,
as the tool's summary skips them), values near the float limits (drawn at +-1e300), times out
of order or outside the calendar. Samples are thinned to each pixel column's first, lowest, highest and last, so a
spike survives and a long series costs its width, not its length.
"""

from __future__ import annotations

import io
import math
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from bot.runs.charts import Chart
from bot.slack.rendering.chart_axes import Axis, number_text, time_axis, value_axis

if TYPE_CHECKING:
    from PIL import ImageFont

WIDTH = 800
PLOT_HEIGHT = 260
SCALE = 2  # drawn at twice the size, then scaled down
PAD_LEFT, PAD_RIGHT, TITLE_HEIGHT, AXIS_HEIGHT, LEGEND_ROW = 64, 16, 48, 24, 17
FONT_SIZE = 12
ALT_TEXT_LIMIT = 1000  # Slack's limit for alt_txt (files.getUploadURLExternal: alt_txt_too_large)
TITLE_LIMIT = 200  # the file's title in Slack
PALETTE_COLOURS = 64
LIMIT = 1e300  # values and times beyond are drawn at it: every span stays a finite float

Pixel = tuple[float, float]
_BACKGROUND, _TEXT, _GRID, _AXIS, _MUTED = range(5)
_BASE = [(255, 255, 255), (29, 28, 29), (232, 232, 232), (150, 150, 150), (97, 96, 97)]
# Twenty colours told apart (Tableau's 10, then darker and lighter kin): one per series.
_SERIES = [
    (31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
    (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207),
    (17, 70, 120), (190, 90, 0), (20, 100, 20), (150, 20, 20), (95, 60, 140),
    (174, 199, 232), (255, 187, 120), (152, 223, 138), (255, 152, 150), (158, 218, 229),
]  # fmt: skip


# -- what Slack shows beside the image ----------------------------------------------------------------


def chart_title(chart: Chart) -> str:
    """The file's title: ``E3 · prometheus_range: <query>``, naming the evidence id and the query."""
    return shorten(f"{chart.label}: {inert(chart.query)}", TITLE_LIMIT)


def chart_file_name(chart: Chart) -> str:
    return f"chart-{chart.evidence or 'series'}.png"  # the id is E<digits> (``chart_for``)


def chart_alt_text(chart: Chart) -> str:
    """What a screen reader says: what the chart is of, then each series' range and last value."""
    head = f"Line chart of {chart.label} ({inert(chart.window)}), query {inert(chart.query)}: "
    parts = [f"{drawn.name}: {_summary(drawn.values)}" for drawn in _Drawn.of(chart)]
    if chart.more:
        parts.append(f"{chart.more} more series not drawn")
    return shorten(head + "; ".join(parts) + ".", ALT_TEXT_LIMIT)


def _summary(values: Sequence[float]) -> str:
    if not values:
        return "no numeric samples"
    low, high, last = (number_text(v) for v in (min(values), max(values), values[-1]))
    return f"{len(values)} points from {low} to {high}, last {last}"


# -- the image ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Text:
    """One text drawn in the image, at ``(x, y)`` in final pixels."""

    x: float
    y: float
    text: str
    colour: int = _TEXT


def chart_texts(chart: Chart) -> list[str]:
    """Every text ``render_png`` draws for ``chart``."""
    return [item.text for item in _Layout(chart).texts()]


def render_png(chart: Chart) -> bytes:
    """The chart as PNG bytes."""
    from PIL import Image, ImageDraw

    layout = _Layout(chart)
    canvas = Image.new("P", (WIDTH * SCALE, layout.height * SCALE), _BACKGROUND)
    canvas.putpalette([level for colour in (*_BASE, *_SERIES) for level in colour])
    draw = ImageDraw.Draw(canvas)
    left, top, right, bottom = (edge * SCALE for edge in layout.plot_box)
    for y in layout.y_ticks():
        draw.line([(left, y * SCALE), (right, y * SCALE)], fill=_GRID, width=SCALE)
    draw.rectangle([left, top, right, bottom], outline=_AXIS, width=SCALE)
    for index, drawn in enumerate(layout.drawn):
        colour = len(_BASE) + index % len(_SERIES)
        for run in layout.runs(drawn):
            scaled = [(x * SCALE, y * SCALE) for x, y in run]
            if len(scaled) == 1:  # a lone sample: a dot
                (x, y), r = scaled[0], 2 * SCALE
                draw.ellipse([x - r, y - r, x + r, y + r], fill=colour)
            else:
                draw.line(scaled, fill=colour, width=3, joint="curve")
        x, y = layout.swatch(index)
        draw.rectangle([x * SCALE, y * SCALE, (x + 10) * SCALE, (y + 10) * SCALE], fill=colour)
    font = _font(FONT_SIZE * SCALE)
    for item in layout.texts():
        draw.text((item.x * SCALE, item.y * SCALE), item.text, fill=item.colour, font=font)
    small = canvas.convert("RGB").resize((WIDTH, layout.height), Image.Resampling.BOX)
    image = small.quantize(PALETTE_COLOURS, Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=6)  # optimize=True: 10x the time for 5% fewer bytes
    return out.getvalue()


@lru_cache(maxsize=4)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    from PIL import ImageFont

    return ImageFont.load_default(size=size)  # Pillow's own font: no font file needed on the host


def text_width(text: str) -> float:
    """``text``'s width in final pixels, in the chart's font."""
    return float(_font(FONT_SIZE * SCALE).getlength(text)) / SCALE


# -- layout -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Drawn:
    """One series as drawn: its name (inert) and its samples with finite times, in time order."""

    name: str
    points: tuple[tuple[float, float], ...]  # times and values clamped to +-LIMIT; NaN: a gap

    @property
    def values(self) -> list[float]:
        return [v for _, v in self.points if not math.isnan(v)]

    @staticmethod
    def drawable(t: float, v: float) -> tuple[float, float]:
        """A sample as drawn: an infinite value is a gap like NaN (as in the tool's summary), a
        finite one beyond +-LIMIT is drawn at it."""
        return (_clamped(t), _clamped(v) if math.isfinite(v) else math.nan)

    @classmethod
    def of(cls, chart: Chart) -> list[_Drawn]:
        return [
            cls(
                inert(s.name),
                tuple(sorted((cls.drawable(t, v) for t, v in s.points if math.isfinite(t)), key=_time)),
            )
            for s in chart.series
        ]


class _Layout:
    """Where everything goes, in final pixels: the title, the plot box and its axes, the legend."""

    def __init__(self, chart: Chart) -> None:
        self.chart = chart
        self.drawn = _Drawn.of(chart)
        legend_rows = len(self.drawn) + (1 if chart.more else 0)
        self.plot_box = (PAD_LEFT, TITLE_HEIGHT, WIDTH - PAD_RIGHT, TITLE_HEIGHT + PLOT_HEIGHT)
        self.legend_top = TITLE_HEIGHT + PLOT_HEIGHT + AXIS_HEIGHT
        self.height = self.legend_top + legend_rows * LEGEND_ROW + 8
        times = [t for drawn in self.drawn for t, _ in drawn.points]
        self.x: Axis = time_axis(times, WIDTH - PAD_LEFT - PAD_RIGHT)
        self.y: Axis = value_axis([v for drawn in self.drawn for v in drawn.values])

    def pixel(self, t: float, v: float) -> Pixel:
        left, top, right, bottom = self.plot_box
        return (left + self.x.fraction(t) * (right - left), bottom - self.y.fraction(v) * (bottom - top))

    def x_ticks(self) -> list[float]:
        return [self.pixel(t, self.y.low)[0] for t in self.x.ticks]

    def y_ticks(self) -> list[float]:
        return [self.pixel(self.x.low, v)[1] for v in self.y.ticks]

    def runs(self, drawn: _Drawn) -> Iterator[list[Pixel]]:
        """The series as runs of pixels (a NaN ends a run), each pixel column's samples thinned."""
        run: list[Pixel] = []
        column: list[Pixel] = []
        for t, v in drawn.points:
            if math.isnan(v):
                if run or column:
                    yield [*run, *_thinned(column)]
                run, column = [], []
                continue
            point = self.pixel(t, v)
            if column and int(point[0]) != int(column[0][0]):
                run.extend(_thinned(column))
                column = []
            column.append(point)
        if run or column:
            yield [*run, *_thinned(column)]

    def swatch(self, index: int) -> Pixel:
        return (PAD_LEFT, self.legend_top + index * LEGEND_ROW + 3)

    def texts(self) -> list[Text]:
        chart, (left, top, right, bottom) = self.chart, self.plot_box
        room = WIDTH - 16
        texts = [
            Text(8, 6, fit(f"{chart.label} · {inert(chart.window)} · times in UTC", room)),
            Text(8, 24, fit(inert(chart.query), room), _MUTED),
        ]
        for y, label in zip(self.y_ticks(), self.y.labels, strict=True):
            texts.append(Text(max(2.0, left - 6 - text_width(label)), y - 7, label, _MUTED))
        for x, label in zip(self.x_ticks(), self.x.labels, strict=True):
            width = text_width(label)
            texts.append(Text(min(right - width, max(left, x - width / 2)), bottom + 5, label, _MUTED))
        if not self.y.labels:
            texts.append(Text(left + 12, top + 12, "no numeric samples", _MUTED))
        for index, drawn in enumerate(self.drawn):
            values = drawn.values
            last = f"  last {number_text(values[-1])}" if values else "  no numeric samples"
            name = fit(drawn.name, right - left - 16 - text_width(last))
            texts.append(Text(left + 16, self.legend_top + index * LEGEND_ROW, name + last))
        if chart.more:
            more = f"… and {chart.more} more series, not drawn"
            texts.append(Text(left + 16, self.legend_top + len(self.drawn) * LEGEND_ROW, more, _MUTED))
        return texts


def _thinned(column: list[Pixel]) -> list[Pixel]:
    """One pixel column's points: at most its first, lowest, highest and last, in order."""
    if len(column) <= 4:
        return column
    low = min(range(len(column)), key=lambda i: column[i][1])
    high = max(range(len(column)), key=lambda i: column[i][1])
    return [column[i] for i in sorted({0, low, high, len(column) - 1})]


def _time(point: tuple[float, float]) -> float:
    return point[0]


def _clamped(value: float) -> float:
    return max(-LIMIT, min(LIMIT, value))


# -- text ---------------------------------------------------------------------------------------------


def inert(text: str) -> str:
    """``text`` on one line: control characters become spaces; format, surrogate, private and
    unassigned characters (bidi overrides, zero-width) go; whitespace runs become one space."""
    kept = (
        " " if category == "Cc" else char
        for char in text
        if (category := unicodedata.category(char)) == "Cc" or not category.startswith("C")
    )
    return " ".join("".join(kept).split())


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def fit(text: str, width: float) -> str:
    """``text`` cut, with an ellipsis, to at most ``width`` pixels in the chart's font."""
    if text_width(text) <= width:
        return text
    low, high = 0, len(text)
    while low < high:  # the longest prefix that fits with its ellipsis
        middle = (low + high + 1) // 2
        if text_width(text[:middle] + "…") <= width:
            low = middle
        else:
            high = middle - 1
    return text[:low].rstrip() + "…"
