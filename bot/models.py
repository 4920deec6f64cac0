"""The run's chain of models, from the settings: the primary (``LLM_*``), then ``LLM_FALLBACKS``.

Each model has its own endpoint (``agent.models.endpoints``), in the order
``Settings.model_endpoints`` gives them; keys come from the environment variables the endpoints
name, read from the process environment and the ``.env`` file alike.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from dotenv import dotenv_values

from agent.chat import ChatModel
from agent.models.endpoints import PRIMARY_KEY_ENV, ClientOptions, build_model
from agent.models.http_model import RetryNotice

if TYPE_CHECKING:
    from bot.settings import Settings


def model_keys(settings: Settings) -> dict[str, str]:
    """Environment variable name -> value for the chain's keys (``.env``, then the environment)."""
    from_file = {name: value for name, value in dotenv_values(".env").items() if value is not None}
    keys: dict[str, str] = {**from_file, **os.environ}
    keys[PRIMARY_KEY_ENV] = settings.llm_api_key
    return keys


def client_options(
    settings: Settings, on_retry: Callable[[RetryNotice], None] | None = None
) -> ClientOptions:
    """The connect timeout and the retries are ``agent.defaults``' constants (``ClientOptions``' defaults)."""
    return ClientOptions(
        read_timeout=settings.llm_read_timeout,
        max_tokens=settings.llm_max_tokens,
        extra_headers=settings.llm_extra_headers,
        on_retry=on_retry,
    )


def build_models(
    settings: Settings,
    *,
    on_retry: Callable[[RetryNotice], None] | None = None,
    keys: Mapping[str, str] | None = None,
) -> list[ChatModel]:
    """One client per endpoint of the chain."""
    options = client_options(settings, on_retry)
    keys = model_keys(settings) if keys is None else keys
    return [build_model(endpoint, keys, options) for endpoint in settings.model_endpoints()]
