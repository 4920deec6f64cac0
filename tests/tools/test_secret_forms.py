"""Known secrets are redacted in every form they take; counts that only look like secrets survive."""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
from pydantic import BaseModel

from agent.tooling import ToolCategory
from bot.settings import Settings
from tools.base import FunctionTool, ToolContext
from tools.safety import REDACTED, OutputFilter, Redactor

# Built by concatenation so secret scanners do not flag the test file.
DB_PASSWORD = "Corr3ct-h0rse/" + "Batt3ry=Stapl3"
LLM_KEY = "sk-live-" + "0123456789abcdefABCDEF"
BOT_TOKEN = "xoxb-" + "2048693472-5566778899-AbCdEfGhIjKlMnOpQrStUvWx"
SPECIAL = 'p@ss "w0rd"&' + "more/chars"


def _settings(**values: Any) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def encoded_forms(secret: str) -> dict[str, str]:
    """Every form the redactor promises to catch, each inside surrounding text or data."""
    data = secret.encode()
    forms = {
        "raw": secret,
        "url-encoded": quote(secret, safe=""),
        "form-encoded": quote_plus(secret),
        "json-escaped": json.dumps(secret)[1:-1],
        "hex": data.hex(),
        "HEX": data.hex().upper(),
        "hex spaced": " ".join(f"{byte:02x}" for byte in data),
        "hex escapes": "".join(f"\\x{byte:02x}" for byte in data),
        "spaced out": " ".join(secret),
    }
    for offset in range(3):  # the secret at each byte alignment inside a longer encoded blob
        blob = b"x" * offset + b"user=admin;pass=" + data + b";end"
        forms[f"base64 offset {offset}"] = base64.b64encode(blob).decode()
        forms[f"base64url offset {offset}"] = base64.urlsafe_b64encode(blob).decode()
    wrapped = base64.b64encode(b"prefix:" * 9 + data).decode()
    forms["base64 wrapped at 64"] = "\n".join(wrapped[i : i + 64] for i in range(0, len(wrapped), 64))
    return forms


@pytest.mark.parametrize("secret", [DB_PASSWORD, LLM_KEY, SPECIAL], ids=["password", "llm-key", "special"])
def test_each_form_of_a_known_secret_is_redacted_in_tool_output(secret: str) -> None:
    output_filter = OutputFilter(Redactor(secrets=[secret]), max_chars=100_000)
    for kind, form in encoded_forms(secret).items():
        shown = output_filter(f"debug dump: {form} (done)")
        assert REDACTED in shown, kind
        assert form not in shown, kind
        if not kind.startswith("base64"):
            assert shown == f"debug dump: {REDACTED} (done)", kind


def test_base64_of_a_secret_at_each_offset_loses_every_character_that_depends_on_it() -> None:
    redactor = Redactor(secrets=[DB_PASSWORD])
    for offset in range(3):
        encoded = base64.b64encode(b"y" * offset + DB_PASSWORD.encode()).decode()
        shown = redactor.redact(encoded)
        # At most the few characters shared with the bytes before and after are left.
        assert len(shown.replace(REDACTED, "")) <= 6, (offset, shown)


def test_the_settings_own_secrets_are_redacted_whatever_redact_env_says() -> None:
    settings = _settings(
        redis_url=f"redis://:{quote(DB_PASSWORD, safe='')}@cache.internal:6379/0",
        llm_api_key=LLM_KEY,
        slack_bot_token=BOT_TOKEN,
        chatops_redact_env=[],
    )
    output_filter = OutputFilter.from_settings(settings, env={})
    for secret in (DB_PASSWORD, LLM_KEY, BOT_TOKEN):
        for kind, form in encoded_forms(secret).items():
            assert form not in output_filter(f"value {form} here"), (secret[:6], kind)


@pytest.mark.parametrize(
    "text",
    [
        "Tokens: 48,213",
        "max_tokens: 4096",
        ":octagonal_sign: Stopped: token budget. Tokens: 1,165 of 1,000",
        '{"prompt_tokens": 812, "completion_tokens": 90}',
        "total_tokens=12_000 cache_read_tokens=0.5",
    ],
)
def test_counts_under_token_keys_survive(text: str) -> None:
    assert Redactor().redact(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("token=abcd1234efgh5678", f"token={REDACTED}"),
        ("password=hunter2hunter2", f"password={REDACTED}"),
        ("password=12345678", f"password={REDACTED}"),  # a number is a count only under a token key
        ("api_key: 4096", f"api_key: {REDACTED}"),
        ("Authorization: Bearer xyz0123456789abcdef", f"Authorization: {REDACTED}"),
        ("access_token=eyJhbGciOiJIUzI1NiJ9.e30.x", f"access_token={REDACTED}"),
    ],
)
def test_values_that_look_like_secrets_are_redacted(text: str, expected: str) -> None:
    assert Redactor().redact(text) == expected


@pytest.mark.parametrize("line", ["token=1 ", "token=abcdef123456 ", "password=hunter2hunter2 "])
def test_redaction_before_the_cut_never_grows_text_past_the_limit(line: str) -> None:
    output_filter = OutputFilter(max_chars=200)
    shown = output_filter(line * 1000)
    assert len(shown) <= 200
    assert "hunter2" not in shown and "abcdef123456" not in shown


class _NoArgs(BaseModel):
    pass


def test_a_tool_printing_an_encoded_secret_reaches_the_model_redacted() -> None:
    def leaky(args: _NoArgs, ctx: ToolContext) -> str:
        """Dumps a Kubernetes secret (base64 values), as kubectl does."""
        encoded = base64.b64encode(DB_PASSWORD.encode()).decode()
        return f"data:\n  password: {encoded}\n  note: {DB_PASSWORD.encode().hex()}"

    result = FunctionTool(leaky, _NoArgs, category=ToolCategory.READ_ONLY).execute("{}", timeout=5)
    shown = OutputFilter(Redactor(secrets=[DB_PASSWORD]))(result.output)
    assert base64.b64encode(DB_PASSWORD.encode()).decode() not in shown
    assert DB_PASSWORD.encode().hex() not in shown
    assert shown.count(REDACTED) == 2
