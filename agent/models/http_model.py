"""What every HTTP model client shares: the connection pool, retries, streaming, transport errors.

A subclass says how to put a ``Request`` on the wire (``encode``), how to read an answer
(``parse``, ``new_assembler`` for a stream) and how to read an error answer (``status_error``);
this class sends it, retries transient failures (``agent.models.retry``) and hands out ``TextPart``s and
one ``DonePart``. A stream that fails after text was handed out is not retried (the caller has
shown that text): it raises ``StreamInterruptedError``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, Self, TypedDict

import httpx

from agent.chat import DonePart, StreamPart, TextPart
from agent.defaults import (
    BACKOFF_BASE_SECONDS,
    BACKOFF_MAX_SECONDS,
    CONNECT_TIMEOUT_SECONDS,
    MAX_ATTEMPTS,
    READ_TIMEOUT_SECONDS,
    RETRY_BUDGET_SECONDS,
    RETRY_MAX_WAIT_SECONDS,
)
from agent.errors import (
    AnswerTooSlowError,
    ConfigurationError,
    EmptyResponseError,
    LLMError,
    LLMTimeoutError,
    MalformedResponseError,
    OutputSpentThinkingError,
    RetriesExhaustedError,
    StreamInterruptedError,
    TransientLLMError,
)
from agent.models.retry import RetryBudget, RetryPolicy
from agent.models.sse import ServerSentEvent, SSEDecoder
from agent.types import Request, Response

USER_AGENT = "chatops/0.1"
_MIN_ATTEMPT_SECONDS = 1.0  # an attempt's read timeout is cut to the time left, but not below this


@dataclass(frozen=True)
class RetryNotice:
    """Told to ``on_retry`` before each backoff: attempt ``attempt`` failed with ``error``."""

    model: str
    attempt: int
    delay_seconds: float
    error: TransientLLMError


class HTTPOptions(TypedDict, total=False):
    """The options every HTTP model client takes besides its endpoint (``agent.models.openai_client.LLMClient``,
    ``agent.models.anthropic_client.AnthropicClient``); their defaults are ``HTTPChatModel``'s."""

    connect_timeout: float
    read_timeout: float
    transport: httpx.BaseTransport | None
    max_attempts: int
    backoff_base: float
    backoff_max: float
    max_retry_wait: float
    retry_budget: float
    sleep: Callable[[float], None]
    rng: random.Random | None
    monotonic: Callable[[], float]
    on_retry: Callable[[RetryNotice], None] | None
    max_output_tokens: int | None


class StreamAssembly(Protocol):
    """Turns the events of one streamed answer into text deltas and, at the end, a ``Response``."""

    @property
    def done(self) -> bool:
        """True once the stream's own end marker arrived (nothing after it matters)."""
        ...

    def add(self, event: ServerSentEvent) -> str: ...

    def finish(self) -> Response: ...


class _StreamProgress:
    """Whether any text of the current attempt reached the caller (then it cannot be retried)."""

    def __init__(self) -> None:
        self.text_yielded = False


class HTTPChatModel:
    """A ``ChatModel`` over HTTP ``POST url``; subclasses give the wire format.

    ``source`` names the endpoint (provider and URL): assistant messages it produced carry it, so
    their provider-specific fields go back to it and nowhere else. ``max_attempts`` counts every
    attempt, the first included; ``backoff_base`` / ``backoff_max`` shape the jittered waits,
    ``max_retry_wait`` is the longest server hint honoured and ``retry_budget`` the seconds one
    request may take with its retries (``agent.models.retry.RetryPolicy``). ``sleep``, ``rng`` and
    ``monotonic`` are the backoff's clock and dice (inject them in tests); ``transport`` replaces
    httpx's network layer; ``on_retry`` is told about every retry before its wait and must not raise.
    """

    def __init__(
        self,
        url: str | httpx.URL,
        model: str,
        *,
        headers: Mapping[str, str],
        source: str,
        connect_timeout: float = CONNECT_TIMEOUT_SECONDS,
        read_timeout: float = READ_TIMEOUT_SECONDS,
        transport: httpx.BaseTransport | None = None,
        max_attempts: int = MAX_ATTEMPTS,
        backoff_base: float = BACKOFF_BASE_SECONDS,
        backoff_max: float = BACKOFF_MAX_SECONDS,
        max_retry_wait: float = RETRY_MAX_WAIT_SECONDS,
        retry_budget: float = RETRY_BUDGET_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        on_retry: Callable[[RetryNotice], None] | None = None,
        max_output_tokens: int | None = None,
    ) -> None:
        if not model:
            raise ConfigurationError("model must not be empty")
        self._url = httpx.URL(url)
        self._model = model
        self._source = source
        self._headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT, **headers}
        self._retry = RetryPolicy(max_attempts, backoff_base, backoff_max, max_retry_wait, retry_budget)
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._monotonic = monotonic
        self._on_retry = on_retry
        self._max_output_tokens = max_output_tokens
        self._timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
        self._http = httpx.Client(transport=transport, timeout=self._timeout, follow_redirects=False)

    @property
    def model(self) -> str:
        """The model every request of this client names (whatever ``Request.model`` says)."""
        return self._model

    @property
    def source(self) -> str:
        return self._source

    def close(self) -> None:
        """Close the pooled connections."""
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- the wire format (subclasses) ---------------------------------------------------------

    def encode(self, request: Request, *, stream: bool) -> bytes:
        raise NotImplementedError

    def parse(self, body: bytes) -> Response:
        raise NotImplementedError

    def new_assembler(self) -> StreamAssembly:
        raise NotImplementedError

    def status_error(self, answer: httpx.Response) -> LLMError:
        raise NotImplementedError

    # --- complete -------------------------------------------------------------------------

    def complete(self, request: Request) -> Response:
        """One whole answer; transient failures retried, the rest raised as ``LLMError``. An answer
        cut while thinking is asked once more with the configured output limit (``_larger``)."""
        try:
            return self._complete_retrying(request)
        except OutputSpentThinkingError as cut:
            larger = self._larger(request, cut)
            if larger is None:
                raise
            return self._complete_retrying(larger)

    def _complete_retrying(self, request: Request) -> Response:
        body = self.encode(self._for_me(request), stream=False)
        budget = self._budget(request)
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._complete_once(body, budget)
            except TransientLLMError as exc:
                self._wait_or_give_up(attempt, exc, budget)

    def _complete_once(self, body: bytes, budget: RetryBudget) -> Response:
        answer = self._open(body, budget, stream=False)
        try:
            content = b"".join(self._chunks(answer, budget))  # bounded in total, not per read
        finally:
            answer.close()
        return self._require_answer(self.parse(content))

    def _open(self, body: bytes, budget: RetryBudget, *, stream: bool) -> httpx.Response:
        """Send one attempt and return its successful answer, its body not read yet (the caller
        reads it within the budget and closes it); a failed answer is read, closed and raised."""
        outgoing = self._http.build_request(
            "POST",
            self._url,
            content=body,
            headers=self._request_headers(stream=stream),
            timeout=self._cut(budget),
        )
        with self._transport_errors():
            answer = self._http.send(outgoing, stream=True)
        if answer.is_success:
            return answer
        try:
            with self._transport_errors():
                answer.read()
            raise self.status_error(answer)
        finally:
            answer.close()

    def _chunks(self, answer: httpx.Response, budget: RetryBudget) -> Iterator[bytes]:
        """The body's chunks, cut when the request's time runs out however slowly bytes trickle
        in (each read already waits at most that long: ``_cut``)."""
        chunks = answer.iter_bytes()
        while True:
            with self._transport_errors():
                chunk = next(chunks, None)
            if chunk is None:
                return
            if budget.remaining() <= 0:
                raise AnswerTooSlowError(
                    "the model's answer was still arriving when the request's time ran out",
                    model=self._model,
                )
            yield chunk

    # --- stream ---------------------------------------------------------------------------

    def stream(self, request: Request) -> Generator[StreamPart, None, None]:
        """Text parts as they arrive, then one ``DonePart`` with the assembled response.

        Closing the iterator early closes the HTTP response. An answer cut while thinking showed no
        text (its content is empty), so it is asked once more with a larger limit like ``complete``.
        """
        try:
            yield from self._stream_retrying(request)
        except OutputSpentThinkingError as cut:
            larger = self._larger(request, cut)
            if larger is None:
                raise
            yield from self._stream_retrying(larger)

    def _stream_retrying(self, request: Request) -> Generator[StreamPart, None, None]:
        body = self.encode(self._for_me(request), stream=True)
        budget = self._budget(request)
        attempt = 0
        while True:
            attempt += 1
            progress = _StreamProgress()
            try:
                yield from self._stream_once(body, progress, budget)
                return
            except TransientLLMError as exc:
                if progress.text_yielded:
                    raise StreamInterruptedError(
                        f"the stream broke after text was shown: {exc.message}",
                        model=self._model,
                        status_code=exc.status_code,
                    ) from exc
                self._wait_or_give_up(attempt, exc, budget)

    def _stream_once(
        self, body: bytes, progress: _StreamProgress, budget: RetryBudget
    ) -> Iterator[StreamPart]:
        assembler = self.new_assembler()
        answer = self._open(body, budget, stream=True)
        # Closed on every way out, a consumer's early close (GeneratorExit at a yield) included.
        try:
            events = self._events(answer, budget)
            for event in events:
                text = assembler.add(event)
                if text:
                    progress.text_yielded = True
                    yield TextPart(text)
                if assembler.done:
                    self._drain(events)
                    break
        finally:
            answer.close()
        yield DonePart(self._require_answer(assembler.finish()))

    @staticmethod
    def _drain(events: Iterator[ServerSentEvent]) -> None:
        """Read what follows the end marker (normally just the end of the body) so the connection
        goes back to the pool instead of being closed; the answer is whole, so errors here do
        not matter."""
        try:
            for _ in events:
                pass
        except TransientLLMError:
            pass

    def _events(self, answer: httpx.Response, budget: RetryBudget) -> Iterator[ServerSentEvent]:
        decoder = SSEDecoder()
        for chunk in self._chunks(answer, budget):
            yield from decoder.feed(chunk)

    # --- shared ---------------------------------------------------------------------------

    def _for_me(self, request: Request) -> Request:
        return request if request.model == self._model else request.model_copy(update={"model": self._model})

    def _budget(self, request: Request) -> RetryBudget:
        return RetryBudget(self._retry, rng=self._rng, monotonic=self._monotonic, time_left=request.time_left)

    def _cut(self, budget: RetryBudget) -> httpx.Timeout:
        """The attempt's timeouts, the read cut to what the request has left."""
        left = max(_MIN_ATTEMPT_SECONDS, budget.remaining())
        read = left if self._timeout.read is None else min(self._timeout.read, left)
        return httpx.Timeout(read, connect=self._timeout.connect)

    def _request_headers(self, *, stream: bool) -> dict[str, str]:
        return {**self._headers, "Accept": "text/event-stream" if stream else "application/json"}

    def _asked_output_tokens(self, request: Request) -> int | None:
        """The output limit ``request`` is sent with (``None``: the server's default)."""
        return request.max_tokens

    def _larger(self, request: Request, cut: OutputSpentThinkingError) -> Request | None:
        """``request`` with the configured output limit, when that is more than the cut answer
        had (``None`` otherwise: the same limit would be cut the same way)."""
        limit = self._max_output_tokens
        had = max(self._asked_output_tokens(request) or 0, cut.spent)
        if limit is None or limit <= had:
            return None
        return request.model_copy(update={"max_tokens": limit})

    def _require_answer(self, response: Response) -> Response:
        message = response.message
        cut = response.choices[0].finish_reason == "length" if response.choices else False
        if message is not None and not message.content and not message.tool_calls and cut:
            spent = response.usage.completion_tokens
            raise OutputSpentThinkingError(
                "the model used its whole output budget thinking"
                + (f" ({spent} output tokens)" if spent else "")
                + " and wrote neither an answer nor a tool call",
                model=self._model,
                spent=spent,
            )
        if message is None or (not message.content and not message.tool_calls):
            raise EmptyResponseError(
                "the model answered with neither text nor tool calls", model=self._model, status_code=200
            )
        if message.provider_source is None:
            message.provider_source = self._source
        return response

    def _wait_or_give_up(self, attempt: int, failure: TransientLLMError, budget: RetryBudget) -> None:
        delay, reason = budget.next_wait(attempt, failure)
        if delay is None:
            raise RetriesExhaustedError(
                f"{self._model}: {reason}, the last with: {failure.message}"
                if reason.startswith("all")
                else f"{self._model}: {reason} (after {attempt} attempt(s), the last: {failure.message})",
                model=self._model,
                last=failure,
            ) from failure
        if self._on_retry is not None:
            self._on_retry(RetryNotice(self._model, attempt, delay, failure))
        self._sleep(delay)

    @contextmanager
    def _transport_errors(self) -> Iterator[None]:
        """httpx's failures as ``LLMError``s naming the model: network ones are transient."""
        try:
            yield
        except httpx.TimeoutException as exc:
            raise LLMTimeoutError(f"{type(exc).__name__}: {exc}", model=self._model) from exc
        except httpx.TransportError as exc:
            raise TransientLLMError(f"{type(exc).__name__}: {exc}", model=self._model) from exc
        except httpx.DecodingError as exc:  # a body that claims gzip (or another encoding) but is not
            raise MalformedResponseError(f"the answer cannot be decoded: {exc}", model=self._model) from exc
