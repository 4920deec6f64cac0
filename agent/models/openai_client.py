"""The HTTP client for any OpenAI-compatible Chat Completions endpoint, Azure's classic one included.

``LLMClient`` implements ``agent.chat.ChatModel`` (``agent.models.http_model`` does the HTTP, the
retries and the streaming; ``agent.models.openai_wire`` and ``agent.models.sse`` the format). Transient failures
(connection errors, timeouts, ``agent.models.retry.RETRYABLE_STATUSES``, an empty answer, a cut-off
stream) are retried with the provider's wait hint or exponential backoff with full jitter;
what escapes is an ``LLMError`` naming the model.

Endpoints: ``base_url`` is the API root (``https://api.openai.com/v1``); a query string in it
is kept. Azure's classic endpoints take the deployment URL
(``https://NAME.openai.azure.com/openai/deployments/DEPLOYMENT``) with ``azure_api_version``:
the key then goes in an ``api-key`` header and the version in the ``api-version`` query.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Unpack

import httpx

from agent.errors import ConfigurationError, LLMError
from agent.models import openai_wire as wire
from agent.models.http_model import HTTPChatModel as _HTTPChatModel
from agent.models.http_model import HTTPOptions, RetryNotice, StreamAssembly
from agent.models.openai_dialect import Dialect, dialect_for
from agent.models.retry import retry_after_hint
from agent.models.sse import StreamAssembler
from agent.types import Request, Response

__all__ = ["LLMClient", "RetryNotice", "chat_completions_url", "parse_retry_after"]

parse_retry_after = retry_after_hint
"""The provider's wait hint in seconds, or None (see ``agent.models.retry.retry_after_hint``)."""


def chat_completions_url(base_url: str, azure_api_version: str | None = None) -> httpx.URL:
    """``{base_url}/chat/completions`` with ``base_url``'s query kept (and ``api-version`` set)."""
    if not base_url.startswith(("http://", "https://")):
        raise ConfigurationError(f"base_url must start with http:// or https://, got {base_url!r}")
    url = httpx.URL(base_url)
    path = url.path.rstrip("/")
    if not path.endswith("/chat/completions"):
        path += "/chat/completions"
    url = url.copy_with(path=path)
    if azure_api_version:
        url = url.copy_set_param("api-version", azure_api_version)
    return url


class LLMClient(_HTTPChatModel):
    """A ``ChatModel`` over HTTP: ``POST {base_url}/chat/completions``.

    ``dialect`` overrides the detected one (``agent.models.openai_dialect``); ``extra_headers`` are sent
    with every request; the timeouts, the retry options (``max_attempts`` counts every attempt, the
    first included) and the injected clock are ``agent.models.http_model.HTTPOptions``, documented and
    defaulted by ``HTTPChatModel``.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        *,
        extra_headers: Mapping[str, str] | None = None,
        azure_api_version: str | None = None,
        dialect: Dialect | None = None,
        **options: Unpack[HTTPOptions],
    ) -> None:
        url = chat_completions_url(base_url, azure_api_version)
        headers: dict[str, str] = {}
        if api_key:
            if azure_api_version:
                headers["api-key"] = api_key
            else:
                headers["Authorization"] = f"Bearer {api_key}"
        headers.update(extra_headers or {})
        self._dialect = dialect or dialect_for(base_url, model)
        super().__init__(
            url,
            model,
            headers=headers,
            source=f"{'azure' if azure_api_version else 'openai'}:{url.copy_with(query=None)}",
            **options,
        )

    @property
    def dialect(self) -> Dialect:
        return self._dialect

    def encode(self, request: Request, *, stream: bool) -> bytes:
        return wire.encode_request(request, stream=stream, source=self.source, dialect=self._dialect)

    def parse(self, body: bytes) -> Response:
        return wire.parse_response(body, model=self.model)

    def new_assembler(self) -> StreamAssembly:
        return StreamAssembler(model=self.model)

    def status_error(self, answer: httpx.Response) -> LLMError:
        return wire.error_for_status(
            answer.status_code, answer.content, model=self.model, retry_after=retry_after_hint(answer.headers)
        )
