"""``--agent model``: the configured model investigates, instead of a scripted agent.

The settings are chatops' own (``bot.settings.Settings``: the ``LLM_*`` environment, or ``.env``
in the current folder), read once by the harness and handed to the worker as ``LLM_*`` variables
(the demo's children inherit no ``LLM_*`` of the shell). Any provider chatops supports works
(``openai``, ``anthropic``, ``azure``, an OpenAI-compatible ``LLM_BASE_URL``). ``LLM_FALLBACKS``
is not handed over: a run measures one model, and a result that silently came from another
would name the wrong one.

The key goes to the worker only, as in production: the harness prints the provider, the model and
the URL, and a recording stores headers redacted (``emulator.eval.recording``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import ValidationError

from agent.errors import ConfigurationError
from bot.settings import Settings
from emulator.eval.errors import EvalError

MODEL_AGENT = "model"


@dataclass(frozen=True)
class ConfiguredModel:
    provider: str
    model: str
    url: str  # where the provider serves it (its own API when LLM_BASE_URL is empty)
    env: dict[str, str]  # the worker's LLM_* settings but LLM_BASE_URL (the session sets it)
    secrets: tuple[str, ...]  # never to be written: the key and the extra headers' values

    def label(self) -> str:
        return f"{self.provider}:{self.model}@{self.url}"


def configured_model(settings: Settings | None = None) -> ConfiguredModel:
    """The model the settings configure (``Settings()`` when not given)."""
    try:
        settings = settings or Settings()
        endpoint = settings.model_endpoints()[0]
        url = endpoint.url()
    except (ValidationError, ValueError, ConfigurationError) as error:
        raise EvalError(f"--agent model: the model settings cannot be used: {error}") from error
    env = {
        "LLM_PROVIDER": settings.llm_provider,
        "LLM_MODEL": settings.llm_model,
        "LLM_API_KEY": settings.llm_api_key,
        "LLM_MAX_TOKENS": str(settings.llm_max_tokens),
        "LLM_READ_TIMEOUT": str(settings.llm_read_timeout),
    }
    if settings.llm_api_version:
        env["LLM_API_VERSION"] = settings.llm_api_version
    if settings.llm_extra_headers:
        env["LLM_EXTRA_HEADERS"] = json.dumps(settings.llm_extra_headers)
    secrets = (settings.llm_api_key, *settings.llm_extra_headers.values())
    return ConfiguredModel(
        settings.llm_provider, settings.llm_model, url, env, tuple(s for s in secrets if s)
    )
