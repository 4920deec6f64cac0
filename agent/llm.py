"""The HTTP client for any OpenAI-compatible Chat Completions endpoint.

``LLMClient`` implements ``agent.chat.ChatModel``. Transient failures (timeouts, 429,
500/502/503/504, an empty answer, a cut-off stream) are retried here, with exponential
backoff and full jitter, honouring ``Retry-After``; what escapes is an ``LLMError`` naming
the model. A stream that fails after text was handed out is not retried (the caller has
shown that text): it raises ``StreamInterruptedError``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from types import TracebackType

import httpx

from agent import wire
from agent.chat import DonePart, StreamPart, TextPart
from agent.errors import (
    ConfigurationError,
    EmptyResponseError,
    LLMError,
    LLMTimeoutError,
    MalformedResponseError,
    RateLimitedError,
    RetriesExhaustedError,
    StreamInterruptedError,
    TransientLLMError,
)
from agent.sse import ServerSentEvent, SSEDecoder, StreamAssembler
from agent.types import Request, Response

USER_AGENT = "chatops/0.1"


@dataclass(frozen=True)
class RetryNotice:
    """Told to ``LLMClient(on_retry=...)`` before each backoff: attempt ``attempt`` failed with ``error``."""

    model: str
    attempt: int
    delay_seconds: float
    error: TransientLLMError


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """The provider's wait hint in seconds, or None.

    Reads ``retry-after-ms`` (Azure OpenAI) first, then ``Retry-After`` as seconds or as an
    HTTP-date (relative to ``now``, default the wall clock). Never negative.
    """
    lowered = {name.lower(): value for name, value in headers.items()}
    if (millis := _as_float(lowered.get("retry-after-ms"))) is not None:
        return max(0.0, millis / 1000)
    value = lowered.get("retry-after")
    if value is None:
        return None
    if (seconds := _as_float(value)) is not None:
        return max(0.0, seconds)
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - (time.time() if now is None else now))


def _as_float(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class _StreamProgress:
    """Whether any text of the current attempt reached the caller (then it cannot be retried)."""

    def __init__(self) -> None:
        self.text_yielded = False


class LLMClient:
    """A ``ChatModel`` over HTTP: ``POST {base_url}/chat/completions``.

    ``base_url`` is the API root, e.g. ``http://localhost:8000/v1`` (a trailing slash is fine).
    ``max_attempts`` counts every attempt, the first included. ``sleep`` and ``rng`` are the
    backoff's clock and dice (inject them in tests). ``transport`` replaces httpx's network
    layer. The client's ``model`` is what is sent, whatever ``Request.model`` says.
    ``on_retry`` is told about every retry before its backoff (metrics); it must not raise.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        *,
        connect_timeout: float = 5.0,
        read_timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
        max_attempts: int = 3,
        backoff_base: float = 0.5,
        backoff_max: float = 20.0,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        extra_headers: Mapping[str, str] | None = None,
        on_retry: Callable[[RetryNotice], None] | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ConfigurationError(f"base_url must start with http:// or https://, got {base_url!r}")
        if not model:
            raise ConfigurationError("model must not be empty")
        if max_attempts < 1:
            raise ConfigurationError(f"max_attempts must be at least 1, got {max_attempts}")
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model = model
        self._max_attempts = max_attempts
        self._backoff_base = backoff_base
        self._backoff_max = backoff_max
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._on_retry = on_retry
        self._headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._headers.update(extra_headers or {})
        timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
        self._http = httpx.Client(transport=transport, timeout=timeout, follow_redirects=False)

    @property
    def model(self) -> str:
        """The model every request of this client names."""
        return self._model

    def close(self) -> None:
        """Close the pooled connections."""
        self._http.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- complete -------------------------------------------------------------------------

    def complete(self, request: Request) -> Response:
        """One whole answer; transient failures retried, the rest raised as ``LLMError``."""
        body = self._encode(request, stream=False)
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._complete_once(body)
            except TransientLLMError as exc:
                self._wait_or_give_up(attempt, exc)

    def _complete_once(self, body: bytes) -> Response:
        with self._transport_errors():
            answer = self._http.post(self._url, content=body, headers=self._request_headers(stream=False))
        if not answer.is_success:
            raise self._status_error(answer)
        return self._require_answer(wire.parse_response(answer.content, model=self._model))

    # --- stream ---------------------------------------------------------------------------

    def stream(self, request: Request) -> Generator[StreamPart, None, None]:
        """Text parts as they arrive, then one ``DonePart`` with the assembled response.

        Closing the iterator early closes the HTTP response.
        """
        body = self._encode(request, stream=True)
        attempt = 0
        while True:
            attempt += 1
            progress = _StreamProgress()
            try:
                yield from self._stream_once(body, progress)
                return
            except TransientLLMError as exc:
                if progress.text_yielded:
                    raise StreamInterruptedError(
                        f"the stream broke after text was shown: {exc.message}",
                        model=self._model,
                        status_code=exc.status_code,
                    ) from exc
                self._wait_or_give_up(attempt, exc)

    def _stream_once(self, body: bytes, progress: _StreamProgress) -> Iterator[StreamPart]:
        assembler = StreamAssembler(model=self._model)
        outgoing = self._http.build_request(
            "POST", self._url, content=body, headers=self._request_headers(stream=True)
        )
        with self._transport_errors():
            answer = self._http.send(outgoing, stream=True)
        # Closed on every way out, a consumer's early close (GeneratorExit at a yield) included.
        try:
            if not answer.is_success:
                with self._transport_errors():
                    answer.read()
                raise self._status_error(answer)
            events = self._events(answer)
            for event in events:
                text = assembler.add_event(event.data)
                if text:
                    progress.text_yielded = True
                    yield TextPart(text)
                if assembler.saw_done:
                    self._drain(events)
                    break
        finally:
            answer.close()
        yield DonePart(self._require_answer(assembler.finish()))

    @staticmethod
    def _drain(events: Iterator[ServerSentEvent]) -> None:
        """Read what follows ``[DONE]`` (normally just the end of the body) so the connection
        goes back to the pool instead of being closed; the answer is whole, so errors here do
        not matter."""
        try:
            for _ in events:
                pass
        except TransientLLMError:
            pass

    def _events(self, answer: httpx.Response) -> Iterator[ServerSentEvent]:
        decoder = SSEDecoder()
        chunks = answer.iter_bytes()
        while True:
            with self._transport_errors():
                chunk = next(chunks, None)
            if chunk is None:
                return
            yield from decoder.feed(chunk)

    # --- shared ---------------------------------------------------------------------------

    def _encode(self, request: Request, *, stream: bool) -> bytes:
        if request.model != self._model:
            request = request.model_copy(update={"model": self._model})
        return wire.encode_request(request, stream=stream)

    def _request_headers(self, *, stream: bool) -> dict[str, str]:
        return {**self._headers, "Accept": "text/event-stream" if stream else "application/json"}

    def _status_error(self, answer: httpx.Response) -> LLMError:
        retry_after = parse_retry_after(answer.headers) if answer.status_code == 429 else None
        return wire.error_for_status(
            answer.status_code, answer.content, model=self._model, retry_after=retry_after
        )

    def _require_answer(self, response: Response) -> Response:
        message = response.message
        if message is None or (not message.content and not message.tool_calls):
            raise EmptyResponseError(
                "the model answered with neither text nor tool calls", model=self._model, status_code=200
            )
        return response

    def _wait_or_give_up(self, attempt: int, failure: TransientLLMError) -> None:
        if attempt >= self._max_attempts:
            raise RetriesExhaustedError(
                f"{self._model}: all {attempt} attempts failed, the last with: {failure.message}",
                model=self._model,
                last=failure,
            ) from failure
        delay = self._backoff_delay(attempt, failure)
        if self._on_retry is not None:
            self._on_retry(RetryNotice(self._model, attempt, delay, failure))
        self._sleep(delay)

    def _backoff_delay(self, attempt: int, failure: TransientLLMError) -> float:
        """The provider's ``Retry-After`` when it sent one, else full jitter; both capped."""
        if isinstance(failure, RateLimitedError) and failure.retry_after is not None:
            return min(failure.retry_after, self._backoff_max)
        ceiling = min(self._backoff_max, self._backoff_base * 2 ** (attempt - 1))
        return self._rng.uniform(0.0, ceiling)

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
