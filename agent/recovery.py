"""What the loop does when a model request fails: condense, retry, switch model, or stop.

* context overflow -> condense the history, at most ``max_condense`` times per run;
* an empty or degenerate answer -> ask again, at most ``max_empty_retries`` times per request;
* a model whose transient retries are exhausted -> the next model of the chain, once per model;
* anything else -> the run stops as ``failed``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from agent.errors import (
    ContextOverflowError,
    EmptyResponseError,
    LLMError,
    RetriesExhaustedError,
    StreamInterruptedError,
)


class RecoveryAction(StrEnum):
    CONDENSE = "condense"
    RETRY = "retry"
    SWITCH_MODEL = "switch_model"
    FAIL = "fail"


class RecoveryStrategy(Protocol):
    """What ``RunConfig.recovery`` is: the action for a failed model request, given what the run
    already tried (condensings so far in the run, empty answers so far for this request)."""

    def decide(self, error: LLMError, *, condense_count: int, empty_retries: int) -> RecoveryAction: ...


@dataclass(frozen=True)
class RecoveryPolicy:
    max_condense: int = 1
    max_empty_retries: int = 2

    def decide(self, error: LLMError, *, condense_count: int, empty_retries: int) -> RecoveryAction:
        if isinstance(error, ContextOverflowError):
            return RecoveryAction.CONDENSE if condense_count < self.max_condense else RecoveryAction.FAIL
        if isinstance(error, EmptyResponseError | StreamInterruptedError):
            return RecoveryAction.RETRY if empty_retries < self.max_empty_retries else RecoveryAction.FAIL
        if isinstance(error, RetriesExhaustedError):
            return RecoveryAction.SWITCH_MODEL
        return RecoveryAction.FAIL
