"""Errors raised by the agent runtime.

Three kinds are kept apart:

* errors shown to the model as a tool result are never raised past the loop
  (an unknown tool, a tool that fails): they become ``Error: ...`` tool messages;
* errors that stop a run become a typed terminal status in ``RunResult``;
* programmer misuse raises ``ConfigurationError`` at once.

Tree::

    AgentError
    ├── ConfigurationError          misuse: a bad RunConfig, a bad Request
    ├── ArgumentsRejected           a tool call's arguments are too big, too deep or unshowable (also a ValueError)
    ├── LLMError                    the model endpoint failed
    │   ├── TransientLLMError       retryable (timeouts, connection errors, transient statuses, empty answer)
    │   │   ├── RateLimitedError        429
    │   │   ├── LLMTimeoutError         connect or read timeout
    │   │   ├── ServerError             408, 409, 425, 500-504, 520-524, 529 (Anthropic: overloaded)
    │   │   ├── EmptyResponseError      no choices, or nothing in the message
    │   │   └── StreamInterruptedError  the stream broke after parts were yielded
    │   ├── RetriesExhaustedError   a model's transient retries are used up
    │   ├── AnswerTooSlowError      the answer was still arriving when the request's time ran out
    │   ├── OutputSpentThinkingError    reasoning used the whole output budget: no text, no call
    │   ├── ProviderError           400/401/403/404 and other non-retryable answers
    │   │   └── ContextOverflowError    the request does not fit the context window
    │   └── MalformedResponseError  the body is not the Chat Completions format
    └── MemoryStoreError            the run's store failed
        └── LeaseLostError          another worker owns the run now (fencing)
"""

from __future__ import annotations


class AgentError(Exception):
    """Root of every error the agent runtime raises."""


class ConfigurationError(AgentError):
    """The caller misused the API (programmer error); never shown to a model."""


class ArgumentsRejected(AgentError, ValueError):
    """A tool call's arguments cannot be accepted (``agent.arguments.parse_arguments``).

    Too large, nested too deeply, not a JSON object, or holding text an approver could not see
    for what it is. The message is written for the model: it names the argument and what to change.
    A ``ValueError`` too, so code that already refuses unparsable JSON refuses these the same way.
    """


class LLMError(AgentError):
    """The model endpoint failed. ``model`` names the model that was asked."""

    def __init__(self, message: str, *, model: str | None = None, status_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.model = model
        self.status_code = status_code


class TransientLLMError(LLMError):
    """A failure that may pass if the same request is sent again. ``retry_after`` is the
    provider's wait hint in seconds (``Retry-After`` and its relatives), when it sent one."""

    def __init__(
        self,
        message: str,
        *,
        model: str | None = None,
        status_code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, model=model, status_code=status_code)
        self.retry_after = retry_after


class RateLimitedError(TransientLLMError):
    """HTTP 429."""

    def __init__(
        self,
        message: str,
        *,
        model: str | None = None,
        status_code: int | None = 429,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, model=model, status_code=status_code, retry_after=retry_after)


class LLMTimeoutError(TransientLLMError):
    """The connection or the read timed out."""


class ServerError(TransientLLMError):
    """A transient HTTP status other than 429 (see ``agent.models.retry.RETRYABLE_STATUSES``), or an
    unclassified error the provider reported after a 200."""


class EmptyResponseError(TransientLLMError):
    """The provider answered 200 with no choice, or a message with neither text nor tool calls,
    or the stream was cancelled as degenerate (see ``agent.repetition``)."""


class StreamInterruptedError(TransientLLMError):
    """The stream broke after text had already been handed to the caller, so the client
    cannot retry it transparently; the loop treats it like an empty response."""


class OutputSpentThinkingError(LLMError):
    """The answer was cut at its output limit (``finish_reason: "length"``) before any text or tool
    call: a reasoning model spent every output token thinking. Asking again the same way gives the
    same cut, so it is not transient: the client asks once more with the model's configured limit
    (when that is larger than what was spent), then reports it. ``spent``: the output tokens the
    provider counted (0 when it did not say)."""

    def __init__(self, message: str, *, model: str | None = None, spent: int = 0) -> None:
        super().__init__(message, model=model, status_code=200)
        self.spent = spent


class RetriesExhaustedError(LLMError):
    """Every attempt of one model failed with a transient error. ``last`` is the last one."""

    def __init__(
        self, message: str, *, model: str | None = None, last: TransientLLMError | None = None
    ) -> None:
        super().__init__(message, model=model, status_code=last.status_code if last else None)
        self.last = last


class AnswerTooSlowError(LLMError):
    """The answer was still arriving (a byte at a time, say) when the request's time ran out: the
    run's deadline (or the retry budget) bounds a request in total, not only between two reads."""


class ProviderError(LLMError):
    """A non-retryable answer (400, 401, 403, 404, ...). ``message`` is the provider's own text."""


class ContextOverflowError(ProviderError):
    """The request is longer than the model's context window."""


class MalformedResponseError(LLMError):
    """The answer is not valid Chat Completions JSON (or SSE)."""


class MemoryStoreError(AgentError):
    """The run's memory could not be read or written."""


class LeaseLostError(MemoryStoreError):
    """This worker's lease on the run expired and another worker took it; it must not write."""
