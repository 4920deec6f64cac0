"""Model endpoints: which provider, URL, key and headers each model of a run's chain talks to.

The primary model and every fallback is a ``ModelEndpoint`` of its own, so "OpenAI, then
Anthropic" is one setting. Fallbacks are written (``LLM_FALLBACKS``) either as JSON::

    [{"provider": "anthropic", "model": "claude-sonnet-4-5", "api_key_env": "ANTHROPIC_API_KEY"}]

or as a comma-separated list of ``[provider:]model[@url]``: ``gpt-4o-mini`` (the primary's
endpoint, key and headers), ``anthropic:claude-sonnet-4-5`` (Anthropic's API, key from
``ANTHROPIC_API_KEY``), ``openai:mistral-large-latest@https://api.mistral.ai/v1``.

Keys are never written in the list: an endpoint names the environment variable holding its key
(``api_key_env``; by default the provider's usual one). Only an endpoint on the primary's very
URL inherits the primary's key, so a key is never sent to a host it was not meant for.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.chat import ChatModel
from agent.defaults import (
    CONNECT_TIMEOUT_SECONDS,
    MAX_ATTEMPTS,
    MAX_TOKENS,
    READ_TIMEOUT_SECONDS,
    RETRY_MAX_WAIT_SECONDS,
)
from agent.errors import ConfigurationError
from agent.models.anthropic_client import DEFAULT_BASE_URL as ANTHROPIC_URL
from agent.models.anthropic_client import AnthropicClient
from agent.models.http_model import RetryNotice
from agent.models.openai_client import LLMClient
from agent.models.openai_dialect import DIALECTS

Provider = Literal["openai", "anthropic", "azure"]
PROVIDERS: tuple[Provider, ...] = ("openai", "anthropic", "azure")
OPENAI_URL = "https://api.openai.com/v1"
PRIMARY_KEY_ENV = "LLM_API_KEY"
AZURE_API_VERSION = "2024-10-21"  # the GA version used when an azure endpoint names none
DEFAULT_KEY_ENV: dict[Provider, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "azure": "AZURE_OPENAI_API_KEY",
}


class ModelEndpoint(BaseModel):
    """One model and where it is served. ``base_url`` empty: the provider's own API."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: Provider = "openai"
    model: str = Field(min_length=1)
    base_url: str = ""
    api_key_env: str = ""
    headers: dict[str, str] = Field(default_factory=dict)
    api_version: str = ""  # Azure classic endpoints: the api-version query parameter
    dialect: str = ""  # OpenAI-compatible quirks by name (agent.models.openai_dialect), else detected
    max_tokens: int | None = Field(default=None, ge=1)  # Anthropic: per answer (required by the API)

    def url(self) -> str:
        if self.base_url:
            return self.base_url
        if self.provider == "anthropic":
            return ANTHROPIC_URL
        if self.provider == "azure":
            raise ConfigurationError(f"model {self.model}: an azure endpoint needs its deployment URL")
        return OPENAI_URL

    def label(self) -> str:
        """How people are told which model this is: ``provider:model@url``."""
        return f"{self.provider}:{self.model}@{self.url()}"


def parse_fallbacks(text: str, primary: ModelEndpoint) -> list[ModelEndpoint]:
    """``LLM_FALLBACKS``: JSON (a list of objects or strings) or ``[provider:]model[@url]`` items."""
    text = text.strip()
    if not text:
        return []
    if text.startswith(("[", "{")):
        try:
            items = json.loads(text)
        except ValueError as error:
            raise ConfigurationError(f"LLM_FALLBACKS is not valid JSON: {error}") from error
        if not isinstance(items, list):
            raise ConfigurationError("LLM_FALLBACKS must be a JSON list")
    else:
        items = [item for item in text.replace(",", " ").split() if item]
    return [_endpoint(item, primary, position) for position, item in enumerate(items, 1)]


def _endpoint(item: Any, primary: ModelEndpoint, position: int) -> ModelEndpoint:
    where = f"LLM_FALLBACKS item {position}"
    if isinstance(item, str):
        item = _compact(item)
    if not isinstance(item, dict):
        raise ConfigurationError(f"{where} must be a string or an object")
    if any(key in item for key in ("api_key", "key")):
        raise ConfigurationError(f"{where}: write the key's environment variable as api_key_env, not the key")
    try:
        endpoint = ModelEndpoint.model_validate({"provider": primary.provider, **item})
    except ValidationError as error:
        raise ConfigurationError(
            f"{where}: {error.errors()[0]['msg']} ({error.errors()[0]['loc']})"
        ) from error
    return _inherit(endpoint, primary)


def _compact(text: str) -> dict[str, Any]:
    """``[provider:]model[@url]``. A model name may hold ``:`` (``llama3:8b``) and ``@``
    (``claude-3@20240229``): only a known provider before the first ``:`` and an ``@`` right
    before ``http(s)://`` are taken apart."""
    item: dict[str, Any] = {}
    head, colon, rest = text.partition(":")
    if colon and head in PROVIDERS:
        item["provider"], text = head, rest
    for marker in ("@https://", "@http://"):
        if marker in text:
            text, _, url = text.partition(marker)
            item["base_url"] = marker[1:] + url
            break
    item["model"] = text
    return item


def _inherit(endpoint: ModelEndpoint, primary: ModelEndpoint) -> ModelEndpoint:
    """An endpoint on the primary's URL (or with no URL, of the primary's provider) shares its
    key, headers and api-version; any other gets its provider's defaults."""
    same_place = endpoint.provider == primary.provider and endpoint.base_url in ("", primary.base_url)
    if same_place:
        return endpoint.model_copy(
            update={
                "base_url": primary.base_url,
                "api_key_env": endpoint.api_key_env or primary.api_key_env,
                "headers": {**primary.headers, **endpoint.headers},
                "api_version": endpoint.api_version or primary.api_version,
                "dialect": endpoint.dialect or (primary.dialect if endpoint.model == primary.model else ""),
            }
        )
    return endpoint.model_copy(
        update={"api_key_env": endpoint.api_key_env or DEFAULT_KEY_ENV[endpoint.provider]}
    )


@dataclass(frozen=True)
class ClientOptions:
    """What every client of the chain shares: timeouts, retries, metrics hook, common headers."""

    connect_timeout: float = CONNECT_TIMEOUT_SECONDS
    read_timeout: float = READ_TIMEOUT_SECONDS
    max_attempts: int = MAX_ATTEMPTS
    max_retry_wait: float = RETRY_MAX_WAIT_SECONDS
    max_tokens: int = MAX_TOKENS
    extra_headers: Mapping[str, str] = field(default_factory=dict)
    on_retry: Callable[[RetryNotice], None] | None = None


def build_model(endpoint: ModelEndpoint, keys: Mapping[str, str], options: ClientOptions) -> ChatModel:
    """The client for ``endpoint``; its key is ``keys[endpoint.api_key_env]`` (none if unset)."""
    if endpoint.dialect and endpoint.dialect not in DIALECTS:
        raise ConfigurationError(f"model {endpoint.model}: unknown dialect {endpoint.dialect!r}")
    key = (keys.get(endpoint.api_key_env) or None) if endpoint.api_key_env else None
    headers = {**options.extra_headers, **endpoint.headers}
    common: dict[str, Any] = {
        "connect_timeout": options.connect_timeout,
        "read_timeout": options.read_timeout,
        "max_attempts": options.max_attempts,
        "max_retry_wait": options.max_retry_wait,
        "extra_headers": headers,
        "on_retry": options.on_retry,
    }
    if endpoint.provider == "anthropic":
        return AnthropicClient(
            endpoint.url(),
            key,
            endpoint.model,
            max_tokens=endpoint.max_tokens or options.max_tokens,
            **common,
        )
    return LLMClient(
        endpoint.url(),
        key,
        endpoint.model,
        azure_api_version=(endpoint.api_version or AZURE_API_VERSION)
        if endpoint.provider == "azure"
        else None,
        dialect=DIALECTS[endpoint.dialect] if endpoint.dialect else None,
        max_output_tokens=endpoint.max_tokens
        or options.max_tokens,  # an answer cut thinking: asked once more
        **common,
    )


def secret_values(endpoints: list[ModelEndpoint], keys: Mapping[str, str]) -> list[str]:
    """Every key and header value of the chain, to redact wherever text leaves the process."""
    values = [keys.get(endpoint.api_key_env, "") for endpoint in endpoints if endpoint.api_key_env]
    values += [value for endpoint in endpoints for value in endpoint.headers.values()]
    return [value for value in values if value]
