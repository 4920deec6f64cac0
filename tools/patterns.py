"""Regular expressions written by people or models run on RE2, never on Python's ``re``.

A backtracking engine can spend minutes on one short line for a pattern such as ``(.+)+Q`` (the
work horse pins a CPU and holds the GIL, so not even the loop's timeout gets it back). RE2
(``google-re2``) matches in time linear in the text whatever the pattern, so a model-supplied
filter is bounded by the size of what it scans. RE2 has no backreferences and no lookaround; a
pattern that needs them is refused with an error saying so, never run on another engine.
"""

from __future__ import annotations

from typing import Any

import re2

# RE2's default; a pattern whose program would need more memory is refused at compile time.
_MAX_PROGRAM_BYTES = 8 << 20


class SafePattern:
    """A compiled RE2 pattern with the few operations the tools need."""

    def __init__(self, source: str, compiled: Any) -> None:
        self.source = source
        self._compiled = compiled

    def search(self, text: str) -> bool:
        """Whether the pattern matches anywhere in ``text``."""
        return self._compiled.search(text) is not None

    def sub(self, replacement: str, text: str) -> str:
        """``text`` with every match replaced by ``replacement`` (taken literally)."""
        result: str = self._compiled.sub(lambda _match: replacement, text)
        return result


def compile_safe(source: str, *, ignore_case: bool = False) -> SafePattern:
    """Compile ``source`` with RE2; raises ``ValueError`` saying what RE2 refused and why."""
    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern on stderr
    options.max_mem = _MAX_PROGRAM_BYTES
    options.case_sensitive = not ignore_case
    try:
        compiled = re2.compile(source, options)
    except re2.error as exc:
        raise ValueError(
            f"{_reason(exc)} (patterns are RE2 syntax: no backreferences or lookaround, "
            "\\z for the end of the text)"
        ) from None
    return SafePattern(source, compiled)


def _reason(exc: Exception) -> str:
    detail = exc.args[0] if exc.args else ""
    return detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
