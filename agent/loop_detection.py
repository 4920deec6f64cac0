"""Loop detection: the same tool, arguments and output again and again means the model is stuck.

Each executed call is hashed (SHA-256 of name, canonical arguments and output) into a sliding
window. At ``warn_at`` identical signatures in the window the result the model sees is replaced
by an error telling it to change approach; at ``stop_at`` the run stops as ``loop_detected``.

What is hashed is what the model asked and what the tool found, never decoration: the caller
passes the tool's ``stable_output`` (its output without elapsed times or the approval note), and
the arguments the runtime writes itself (``confirmed_by``, ``approved_plan``) are left out, so a
second approver or a fresh plan does not make the same call look new.
"""

from __future__ import annotations

import functools
import hashlib
from collections import deque
from collections.abc import Iterable
from enum import StrEnum

from agent.arguments import (
    CONFIRMED_BY,
    MAX_ARGUMENTS_BYTES,
    TRUSTED_ARGUMENTS,
    canonical_arguments,
    checked_arguments,
)
from agent.defaults import LOOP_STOP_AT, LOOP_WARN_AT, LOOP_WINDOW
from agent.errors import ConfigurationError
from agent.tooling import APPROVED_PLAN

# Written into the arguments by the runtime after an approval, never chosen by the model.
_RUNTIME_ARGUMENTS = (CONFIRMED_BY, APPROVED_PLAN)

LOOP_WARNING = (
    "Error: loop detected: this exact call returned this exact result {count} times recently. "
    "Change approach: try different arguments, another tool, or answer with what you know."
)


class LoopVerdict(StrEnum):
    OK = "ok"
    WARN = "warn"
    STOP = "stop"


def call_signature(name: str, arguments: str, output: str) -> str:
    """SHA-256 over the tool name, the canonical arguments (without the runtime's) and the output."""
    try:
        # A dry run's plan can make the text megabytes long: only ordinary calls are kept.
        canonical = (
            _canonical_call(arguments) if len(arguments) <= MAX_ARGUMENTS_BYTES else _canonical(arguments)
        )
    except ValueError:  # refused arguments (too deep, too large...): the text itself is the signature
        canonical = arguments
    # Each part followed by a separator no part can forge by concatenation, hashed in one call.
    return hashlib.sha256(f"{name}\x00{canonical}\x00{output}\x00".encode()).hexdigest()


def _canonical(arguments: str) -> str:
    """The canonical arguments without the runtime's; raises ``ArgumentsRejected`` (a
    ``ValueError``) as the call's own check does."""
    # The call's own check (the gate read it already): the runtime's keys are dropped.
    parsed = checked_arguments(arguments, TRUSTED_ARGUMENTS)  # the caller's own copy: ours to change
    for key in _RUNTIME_ARGUMENTS:
        parsed.pop(key, None)
    return canonical_arguments(parsed)


_canonical_call = functools.lru_cache(maxsize=64)(_canonical)  # a pure function of the text


class LoopDetector:
    """A sliding window of call signatures; ``window`` is persisted so a resumed run keeps it."""

    def __init__(
        self,
        window: int = LOOP_WINDOW,
        warn_at: int = LOOP_WARN_AT,
        stop_at: int = LOOP_STOP_AT,
        history: Iterable[str] = (),
    ) -> None:
        if not 1 < warn_at < stop_at <= window:
            raise ConfigurationError(
                f"loop detection needs 1 < warn_at < stop_at <= window (got {warn_at}, {stop_at}, {window})"
            )
        self._signatures: deque[str] = deque(history, maxlen=window)
        self._warn_at = warn_at
        self._stop_at = stop_at

    @property
    def window(self) -> list[str]:
        return list(self._signatures)

    def record(self, name: str, arguments: str, output: str) -> tuple[LoopVerdict, int]:
        """Add one call; return the verdict and how many times its signature is in the window."""
        signature = call_signature(name, arguments, output)
        self._signatures.append(signature)
        count = self._signatures.count(signature)
        if count >= self._stop_at:
            return LoopVerdict.STOP, count
        if count >= self._warn_at:
            return LoopVerdict.WARN, count
        return LoopVerdict.OK, count
