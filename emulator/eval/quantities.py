"""Sizes and ages as a scenario writes them: ``5M``, ``1.2G``, ``900K`` or bytes; ``3d``, ``2h30m``,
``40s`` or seconds.

Sizes are binary (``1K`` is 1024 bytes), as ``df -h`` and ``ls -lh`` print them, so a size written in
a scenario reads the same in a tool's output. Both parse to plain numbers when the file is loaded:
the fault injector and the scorer never see the text.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator

_SIZE = re.compile(r"(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[KMGT]?)(?:i?B)?", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_AGE_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_AGE = re.compile(r"(?:\d+(?:\.\d+)?[smhd])+")
_SECONDS = re.compile(r"\d+(?:\.\d+)?")
_AGE_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_size(value: Any) -> int:
    """Bytes from ``5M`` / ``1.2G`` / ``900K`` / ``512`` (or an int); ``ValueError`` saying how to write it."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size; fix: write bytes (1048576) or 5M, 1.2G, 900K")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"size {value} is negative; fix: write 0 or more bytes")
        return value
    match = _SIZE.fullmatch(str(value).strip())
    if match is None:
        raise ValueError(
            f"size {value!r}; fix: write bytes (1048576) or a number with K, M, G or T (5M, 1.2G)"
        )
    return int(float(match["number"]) * _SIZE_UNITS[match["unit"].upper()])


def parse_age(value: Any) -> float:
    """Seconds from ``3d`` / ``2h30m`` / ``40s`` / ``90`` (or a number); ``ValueError`` saying how."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not an age; fix: write seconds (90) or 3d, 2h30m, 40s")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(f"age {value} is negative; fix: write 0 (now) or more seconds")
        return float(value)
    text = str(value).strip()
    if _SECONDS.fullmatch(text):
        return float(text)
    if not _AGE.fullmatch(text):
        raise ValueError(
            f"age {value!r}; fix: write seconds (90) or a duration with s, m, h, d (3d, 2h30m, 40s)"
        )
    return sum(float(number) * _AGE_UNITS[unit] for number, unit in _AGE_PART.findall(text))


Size = Annotated[int, BeforeValidator(parse_size)]
"""A size in bytes, written ``5M`` / ``1.2G`` / bytes."""

Age = Annotated[float, BeforeValidator(parse_age)]
"""An age in seconds before the run starts, written ``3d`` / ``2h30m`` / seconds."""
