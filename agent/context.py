"""The state one ``Run`` works on: config, history, resumable state, clock and persistence helpers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from agent.config import RunConfig
from agent.events import Event
from agent.evidence import EvidenceIndex, evidence_ref
from agent.loop_detection import LoopDetector
from agent.tooling import Tool
from agent.types import Message, RunState, RunStatus, ToolDef


@dataclass
class RunContext:
    config: RunConfig
    tools: dict[str, Tool]
    tool_defs: list[ToolDef]
    state: RunState
    messages: list[Message]
    detector: LoopDetector
    segment_started_at: float = 0.0
    _deadline_at: float = field(default=0.0, init=False)
    _held: list[Message] = field(default_factory=list, init=False)
    _evidence: EvidenceIndex = field(default_factory=EvidenceIndex, init=False)
    # Events to emit once what they report is stored (``emit_stored``).
    stored_events: list[Event] = field(default_factory=list, init=False)

    def begin_segment(self) -> None:
        """Start counting working time; a resumed run continues the earlier segments' count."""
        now = self.config.clock()
        if self.state.started_at is None:
            self.state.started_at = now
        self.segment_started_at = now
        self._deadline_at = now + self.config.limits.deadline_seconds - self.state.active_seconds

    def end_segment(self) -> None:
        self.state.active_seconds += max(0.0, self.config.clock() - self.segment_started_at)
        self.segment_started_at = self.config.clock()

    def remaining_seconds(self) -> float:
        return self._deadline_at - self.config.clock()

    def deadline_passed(self) -> bool:
        return self.remaining_seconds() <= 0

    @property
    def listening(self) -> bool:
        """Whether anyone receives events: the loop builds its per-call events only then."""
        return self.config.on_event is not None

    def emit(self, event: Event) -> None:
        if self.config.on_event is not None:
            self.config.on_event(event)

    @property
    def evidence(self) -> EvidenceIndex:
        """The run's tool results by evidence id, up to date with the history."""
        return self._evidence.sync(self.messages)

    def next_evidence_ref(self) -> str:
        """The next tool result's evidence id (counted in the state: stored with the result)."""
        self.state.evidence_seq += 1
        return evidence_ref(self.state.evidence_seq)

    def sync_detector(self) -> None:
        self.state.loop_window = self.detector.window

    def append(self, messages: Sequence[Message], *, wait: bool = True) -> None:
        """Persist ``messages`` (after any held one) with the current state, then make them part of
        the live history. ``wait=False``: see ``Memory.append``."""
        self.sync_detector()
        self.config.memory.append([*self._held, *messages], self.state, wait=wait)
        self._held.clear()
        self.messages.extend(messages)

    def hold(self, message: Message) -> None:
        """Make ``message`` part of the live history now and persist it with the next write.

        Only for an assistant turn whose calls are all read-only: nothing outside the run acts on
        it before it is stored together with its results (one write instead of two per
        iteration), and a crash in between only means the model is asked again.
        """
        self.messages.append(message)
        self._held.append(message)

    def save_state(self) -> None:
        if self._held:
            self.append([])
            return
        self.sync_detector()
        self.config.memory.save_state(self.state)

    def set_status(self, status: RunStatus) -> None:
        self.state.status = status
        self.save_state()
