"""The native Anthropic Messages API client (``LLM_PROVIDER=anthropic``), behind ``ChatModel``.

``POST {base_url}/v1/messages`` with ``x-api-key`` and ``anthropic-version``, JSON or SSE, over
``agent.models.http_model`` (so retries, budgets and streaming behave as for every other client): 429
and 529 ("overloaded") are retried with the provider's wait hints, "prompt is too long" is a
context overflow. Prompt caching is on by default (see ``agent.models.anthropic_wire``); the cache
reads and writes the API reports land in ``Usage``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Unpack

import httpx

from agent.errors import ConfigurationError, LLMError
from agent.models.anthropic_stream import AnthropicStreamAssembler
from agent.models.anthropic_wire import DEFAULT_MAX_TOKENS, encode_request, parse_response
from agent.models.http_model import HTTPChatModel, HTTPOptions, StreamAssembly
from agent.models.provider_errors import error_for_status
from agent.models.retry import retry_after_hint
from agent.types import Request, Response

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_BASE_URL = "https://api.anthropic.com"


def messages_url(base_url: str) -> httpx.URL:
    """``{base_url}/v1/messages``; a base URL that already ends in ``/v1`` gets ``/messages``."""
    if not base_url.startswith(("http://", "https://")):
        raise ConfigurationError(f"base_url must start with http:// or https://, got {base_url!r}")
    url = httpx.URL(base_url)
    path = url.path.rstrip("/")
    if not path.endswith("/v1/messages"):
        path += "/messages" if path.endswith("/v1") else "/v1/messages"
    return url.copy_with(path=path)


class AnthropicClient(HTTPChatModel):
    """A ``ChatModel`` for Anthropic's Messages API (and gateways that speak it).

    ``max_tokens`` is sent when the request names none (the API requires it); ``cache=False``
    sends no ``cache_control``. The timeouts and retry options (``agent.models.http_model.HTTPOptions``) are
    those of ``agent.models.openai_client.LLMClient``.
    """

    def __init__(
        self,
        base_url: str | None,
        api_key: str | None,
        model: str,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        cache: bool = True,
        anthropic_version: str = ANTHROPIC_VERSION,
        extra_headers: Mapping[str, str] | None = None,
        **options: Unpack[HTTPOptions],
    ) -> None:
        if max_tokens < 1:
            raise ConfigurationError(f"max_tokens must be at least 1, got {max_tokens}")
        url = messages_url(base_url or DEFAULT_BASE_URL)
        headers = {"anthropic-version": anthropic_version}
        if api_key:
            headers["x-api-key"] = api_key
        headers.update(extra_headers or {})
        self._max_tokens = max_tokens
        self._cache = cache
        options.setdefault("max_output_tokens", max_tokens)
        super().__init__(
            url,
            model,
            headers=headers,
            source=f"anthropic:{url.copy_with(query=None)}",
            **options,
        )

    def _asked_output_tokens(self, request: Request) -> int | None:
        return request.max_tokens or self._max_tokens  # the API requires a limit: this one is sent

    def encode(self, request: Request, *, stream: bool) -> bytes:
        return encode_request(
            request, stream=stream, source=self.source, max_tokens=self._max_tokens, cache=self._cache
        )

    def parse(self, body: bytes) -> Response:
        return parse_response(body, model=self.model)

    def new_assembler(self) -> StreamAssembly:
        return AnthropicStreamAssembler(model=self.model)

    def status_error(self, answer: httpx.Response) -> LLMError:
        return error_for_status(
            answer.status_code, answer.content, model=self.model, retry_after=retry_after_hint(answer.headers)
        )
