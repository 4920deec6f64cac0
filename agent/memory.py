"""Where a run keeps its history and state: the interface, and an in-process implementation.

History is the checkpoint: the loop stores every message before anything outside the run acts
on it (a turn of read-only calls is stored together with its results), so a
run can be resumed from its memory alone. ``RedisMemory`` (``agent.redis_memory``) is the
durable implementation used by workers.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol

from agent.types import Message, RunState


class Memory(Protocol):
    """A run's history (append-only, except for condensing) and its resumable state."""

    def load_messages(self) -> list[Message]:
        """The whole history, oldest first."""
        ...

    def load_state(self) -> RunState | None:
        """The saved state, or ``None`` for a run that never started."""
        ...

    def append(self, messages: Sequence[Message], state: RunState) -> None:
        """Append ``messages`` and save ``state`` as one atomic write."""
        ...

    def save_state(self, state: RunState) -> None:
        """Save ``state`` alone (for example the mark of a side effect about to run)."""
        ...

    def replace_messages(self, messages: Sequence[Message], state: RunState) -> None:
        """Replace the whole history (condensing only) and save ``state``, atomically."""
        ...


class InMemoryMemory:
    """A ``Memory`` held in this process; for tests, demos and one-shot runs."""

    def __init__(self, messages: Sequence[Message] = (), state: RunState | None = None) -> None:
        self._messages = [m.model_copy(deep=True) for m in messages]
        self._state = state.model_copy(deep=True) if state else None
        self._lock = threading.Lock()

    def load_messages(self) -> list[Message]:
        with self._lock:
            return [m.model_copy(deep=True) for m in self._messages]

    def load_state(self) -> RunState | None:
        with self._lock:
            return self._state.model_copy(deep=True) if self._state else None

    def append(self, messages: Sequence[Message], state: RunState) -> None:
        with self._lock:
            self._messages.extend(m.model_copy(deep=True) for m in messages)
            self._state = state.model_copy(deep=True)

    def save_state(self, state: RunState) -> None:
        with self._lock:
            self._state = state.model_copy(deep=True)

    def replace_messages(self, messages: Sequence[Message], state: RunState) -> None:
        with self._lock:
            self._messages = [m.model_copy(deep=True) for m in messages]
            self._state = state.model_copy(deep=True)
