"""The lines a scenario writes into a simulated host's files and commands, and the times in them.

A line is literal text, except ``{time:AGE}`` or ``{time:AGE:FORMAT}``: the moment ``AGE`` before
the run starts (``3d``, ``40s``; ``emulator.eval.quantities``), printed the way a log of that kind
prints it, so a scenario's logs are as fresh as the run that reads them. ``FORMAT`` is one of
``TIME_FORMATS`` (``iso`` when omitted). Every other brace is literal (configs and JSON logs are
full of them), and ``{{time:`` is a literal ``{time:`` (a captured log line may hold one); a
``{time:...}`` that does not read as an age and a format is refused when the file is loaded, so
a typo never reaches a host as text.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping

from emulator.demo.logs import iso_time
from emulator.eval.quantities import parse_age

TIME_FORMATS: Mapping[str, Callable[[float], str]] = {
    "iso": iso_time,  # 2025-05-01T09:14:03.120Z (the api's log)
    "syslog": lambda at: time.strftime("%b %d %H:%M:%S", time.gmtime(at)),
    "postgres": lambda at: time.strftime("%Y-%m-%d %H:%M:%S.000 UTC", time.gmtime(at)),
    "nginx": lambda at: time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(at)),
    "nginx-error": lambda at: time.strftime("%Y/%m/%d %H:%M:%S", time.gmtime(at)),
    "systemd": lambda at: time.strftime("%a %Y-%m-%d %H:%M:%S UTC", time.gmtime(at)),
    # dpkg and apt write the host's local time (the runner reads it back as local time)
    "dpkg": lambda at: time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at)),  # /var/log/dpkg.log
    "apt": lambda at: time.strftime("%Y-%m-%d  %H:%M:%S", time.localtime(at)),  # apt's Start-Date:
}
"""How each kind of log prints a moment (the demo hosts' logs print them the same way): UTC, but
``dpkg`` and ``apt`` in local time as those logs write it."""

_PLACEHOLDER = re.compile(r"\{\{time:|\{time:([^{}]*)\}")
_LITERAL = "{time:"
MASK = "\x00"
"""What a time becomes in ``masked``: no quote of real text contains it."""


def _parts(inner: str) -> tuple[float, str]:
    age, _, fmt = inner.partition(":")
    fmt = fmt or "iso"
    if fmt not in TIME_FORMATS:
        raise ValueError(
            f"{{time:{inner}}}: unknown format {fmt!r}; fix: use one of {', '.join(TIME_FORMATS)}"
        )
    try:
        return parse_age(age), fmt
    except ValueError as error:
        raise ValueError(f"{{time:{inner}}}: {error}") from None


def check_line(line: str) -> None:
    """``ValueError`` naming the fix when a ``{time:...}`` of ``line`` cannot be written."""
    for match in _PLACEHOLDER.finditer(line):
        if match.group(0) != "{" + _LITERAL:
            _parts(match.group(1))


def render_line(line: str, now: float) -> str:
    """``line`` as the fault injector writes it, for a run starting at ``now`` (epoch seconds)."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "{" + _LITERAL:
            return _LITERAL
        age, fmt = _parts(match.group(1))
        return TIME_FORMATS[fmt](now - age)

    return _PLACEHOLDER.sub(one, line)


def masked(line: str) -> str:
    """``line`` with every time replaced by ``MASK``: the text that is the same in every run."""
    return _PLACEHOLDER.sub(lambda match: _LITERAL if match.group(0) == "{" + _LITERAL else MASK, line)
