"""A chart's two axes: their range, ticks a person reads easily, and the ticks' labels.

Values get 1-2-2.5-5 steps and short labels (``850``, ``1.2k``, ``3.4G``, ``1.5e+18``); times get
steps of seconds to weeks and UTC labels (``14:05``, ``14:05:30``, ``05-03 14:00``). Both take
whatever the data is: no samples, one, all equal, spans near the float limits, times outside the
calendar (labelled as numbers). At most ``MAX_TICKS`` ticks, whatever the floats do.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass

MAX_TICKS = 12
VALUE_TICKS = 5  # about this many value ticks
TICK_SPACING_PX = 110  # at least this many pixels between time ticks
MARGIN = 0.04  # of the value span, above and below the data
_MULTIPLES = (1.0, 2.0, 2.5, 5.0, 10.0)
_TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200,
               86400, 172800, 604800)  # fmt: skip


@dataclass(frozen=True)
class Axis:
    """``low`` to ``high`` (``high > low``), with ticks in that range and their labels."""

    low: float
    high: float
    ticks: tuple[float, ...] = ()
    labels: tuple[str, ...] = ()

    def fraction(self, value: float) -> float:
        """Where ``value`` falls, from 0 (``low``) to 1 (``high``)."""
        span = self.high - self.low
        return min(1.0, max(0.0, (value - self.low) / span)) if span > 0 else 0.5


EMPTY = Axis(0.0, 1.0)


def value_axis(values: Sequence[float]) -> Axis:
    """The value axis of finite ``values`` (each within +-1e300, so every span is a float)."""
    if not values:
        return EMPTY
    low, high = _widened(min(values), max(values))
    ticks = _ticks(low, high, _nice_step((high - low) / VALUE_TICKS))
    span = high - low
    return Axis(low - MARGIN * span, high + MARGIN * span, ticks, tuple(number_text(t) for t in ticks))


def time_axis(times: Sequence[float], width_px: float) -> Axis:
    """The time axis of finite Unix times ``times`` for a plot ``width_px`` wide."""
    if not times:
        return EMPTY
    low, high = min(times), max(times)
    if high - low < 1:  # one moment: a minute around it (wider where floats are coarser than that)
        pad = max(30.0, abs(low) * 1e-12)
        low, high = low - pad, high + pad
    most = max(2, int(width_px // TICK_SPACING_PX))
    step = next((float(s) for s in _TIME_STEPS if (high - low) / s <= most), None)
    if step is None:  # longer than weeks of ticks: plain numbers of days
        step = _nice_step((high - low) / most / 86400) * 86400
    ticks = _ticks(low, high, step)
    return Axis(low, high, ticks, tuple(time_text(t, step, high - low) for t in ticks))


def _widened(low: float, high: float) -> tuple[float, float]:
    """``low < high``: a flat series gets a band around its value."""
    if high > low:
        return low, high
    pad = abs(low) * 0.1 or 1.0
    return low - pad, high + pad


def _nice_step(raw: float) -> float:
    """The smallest 1, 2, 2.5 or 5 times a power of ten at least ``raw`` (0 when there is none)."""
    if not raw > 0 or not math.isfinite(raw):
        return 0.0
    power = 10.0 ** math.floor(math.log10(raw))
    return next((m * power for m in _MULTIPLES if m * power >= raw), 10 * power)


def _ticks(low: float, high: float, step: float) -> tuple[float, ...]:
    """Multiples of ``step`` from ``low`` to ``high``; the two ends when floats cannot step."""
    first = math.ceil(low / step) * step if step > 0 else low
    if step <= 0 or not math.isfinite(first) or first + step == first:
        return (low, high)
    ticks = []
    for k in range(MAX_TICKS):
        tick = first + k * step
        if tick > high + step * 1e-9:
            break
        ticks.append(0.0 if abs(tick) < step * 1e-9 else tick)
    return tuple(ticks) or (low, high)


def number_text(value: float) -> str:
    """``0``, ``850``, ``12.5``, ``1.2k``, ``3.4G``, ``1.5e+18``, ``0.0004``: short, for a chart."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    size = abs(value)
    if size >= 1e15 or size < 1e-4:
        return f"{value:.3g}"
    for divisor, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if size >= divisor:
            return f"{value / divisor:.3g}{suffix}"
    return f"{value:.4g}"


def time_text(when: float, step: float, span: float) -> str:
    """A tick's UTC time, as precise as the step needs; a number when it is no calendar time."""
    try:
        moment = dt.datetime.fromtimestamp(when, dt.UTC)
    except (OverflowError, ValueError, OSError):
        return number_text(when)
    if step >= 86400:
        return moment.strftime("%Y-%m-%d")
    if span > 86400:
        return moment.strftime("%m-%d %H:%M")
    return moment.strftime("%H:%M:%S" if step < 60 else "%H:%M")
