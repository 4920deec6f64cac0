"""Where a run keeps its history and state: the interface, and an in-process implementation.

History is the checkpoint: the loop stores every message before anything outside the run acts
on it (a turn of read-only calls is stored together with its results), so a
run can be resumed from its memory alone. ``RedisMemory`` (``agent.redis_memory``) is the
durable implementation used by workers.

A memory holds the agent's own state and messages only. What an application keeps about a run
(chatops: the run record, its thread and its approvals) is the application's; ``RedisMemory``
lets it join the write that ends the run (``TerminalExtension``) without knowing any of it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel

from agent.findings import Findings
from agent.types import Message, RunState


class Memory(Protocol):
    """A run's history (append-only, except for condensing) and its resumable state."""

    def load_messages(self) -> list[Message]:
        """The whole history, oldest first."""
        ...

    def load_state(self) -> RunState | None:
        """The saved state, or ``None`` for a run that never started."""
        ...

    def append(self, messages: Sequence[Message], state: RunState, *, wait: bool = True) -> None:
        """Append ``messages`` and save ``state`` as one atomic write.

        With ``wait=False`` the write may still be on its way when this returns: it is confirmed
        (or its failure raised) by the next call on this memory, or by ``flush``.
        """
        ...

    def save_state(self, state: RunState) -> None:
        """Save ``state`` alone (for example the mark of a side effect about to run)."""
        ...

    def replace_messages(self, messages: Sequence[Message], state: RunState) -> None:
        """Replace the whole history (condensing only) and save ``state``, atomically."""
        ...

    def flush(self) -> None:
        """Confirm a write made with ``wait=False``, raising its failure; nothing when there is none."""
        ...


class InMemoryMemory:
    """A ``Memory`` held in this process; for tests, demos and one-shot runs.

    Messages and state are kept as their JSON, as ``RedisMemory`` stores them: nothing the caller
    changes later leaks in, what cannot be stored fails here too, and serialising is much cheaper
    than a deep copy. The JSON is kept as the serializer's bytes (``model_dump_json`` without its
    keyword handling and decoding: a third of its cost for a message).
    """

    def __init__(self, messages: Sequence[Message] = (), state: RunState | None = None) -> None:
        self._messages = [_json(m) for m in messages]
        self._state: bytes | None = None
        self._findings: Findings | None = None
        if state:
            self._store_state(state)
        self._lock = threading.Lock()

    def load_messages(self) -> list[Message]:
        with self._lock:
            return [Message.model_validate_json(m) for m in self._messages]

    def load_state(self) -> RunState | None:
        with self._lock:
            if not self._state:
                return None
            state = RunState.model_validate_json(self._state)
            state.findings = self._findings
            return state

    def append(self, messages: Sequence[Message], state: RunState, *, wait: bool = True) -> None:
        with self._lock:
            self._messages += [_json(m) for m in messages]
            self._store_state(state)

    def save_state(self, state: RunState) -> None:
        with self._lock:
            self._store_state(state)

    def replace_messages(self, messages: Sequence[Message], state: RunState) -> None:
        with self._lock:
            self._messages = [_json(m) for m in messages]
            self._store_state(state)

    def flush(self) -> None:
        """Nothing to confirm: every write here is done when it returns."""

    def _store_state(self, state: RunState) -> None:
        """The state's JSON but for its findings, kept as the object: frozen all the way down
        (tuples of frozen models), replaced whole by each update, and serialised once each here
        (what cannot be stored still fails here), not at every write (as ``RedisMemory``)."""
        findings = state.findings
        if findings is not None and findings is not self._findings:
            _json(findings)
        self._findings = findings
        self._state = state.__pydantic_serializer__.to_json(state, exclude=_BY_IDENTITY)


_BY_IDENTITY = {"findings"}


def _json(model: BaseModel) -> bytes:
    """``model.model_dump_json()`` as bytes, with its defaults."""
    return model.__pydantic_serializer__.to_json(model)
