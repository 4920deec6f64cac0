"""Output safety: every kind of secret is redacted, in output and in error text; long text is cut."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agent.tooling import ToolCategory, ToolResult
from bot.settings import Settings
from tests.tools.fakes import FakeCommands
from tools.base import FunctionTool, ToolContext, error_result
from tools.catalog import load_catalog
from tools.errors import ToolConfigError
from tools.safety import REDACTED, OutputFilter, Redactor, strip_control_chars, truncate

# Built by concatenation so secret scanners do not flag the test file; the shapes are real.
SLACK_BOT = "xoxb-" + "2048693472-5566778899-AbCdEfGhIjKlMnOpQrStUvWx"
SLACK_USER = "xoxp-" + "2048693472-1234567890-9876543210-0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d"
SLACK_APP = "xapp-" + "1-A0123456789-1234567890123-abcdef0123456789abcdef0123456789"
SLACK_LEGACY = "xoxa-" + "2-1234567890-0987654321-abcdefABCDEF"
AWS_ID = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_TEMP_ID = "ASIA" + "Y34FZKBOKMUTVV7A"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
JWT = "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
KEY_BODY = "MIIEpAIBAAKCAQEA7bq" + "8VYtF3mY1cZLqz0Kx5c3v2n1m\nQ2FsbG1lIGFuIGV4YW1wbGUga2V5IGJvZHkgbGluZQ==\n"
PRIVATE_KEY = f"-----BEGIN RSA PRIVATE KEY-----\n{KEY_BODY}-----END RSA PRIVATE KEY-----"


def redact(text: str) -> str:
    return Redactor().redact(text)


@pytest.mark.parametrize("token", [SLACK_BOT, SLACK_USER, SLACK_APP, SLACK_LEGACY])
def test_slack_tokens_are_redacted(token: str) -> None:
    out = redact(f"config loaded: token {token} ok")
    assert token not in out and token[5:15] not in out
    assert out == f"config loaded: token {REDACTED} ok"


def test_aws_access_keys_and_the_secret_next_to_them_are_redacted() -> None:
    csv = f"User name,Access key ID,Secret access key\ndeploy,{AWS_ID},{AWS_SECRET}\n"
    out = redact(csv)
    assert AWS_ID not in out and AWS_SECRET not in out
    assert out.endswith(f"deploy,{REDACTED},{REDACTED}\n")
    assert redact(f"creds {AWS_TEMP_ID} {AWS_SECRET}") == f"creds {REDACTED} {REDACTED}"
    assert redact(f"aws_secret_access_key = {AWS_SECRET}") == f"aws_secret_access_key = {REDACTED}"


def test_bearer_tokens_are_redacted() -> None:
    out = redact(f"> GET /api\n> Authorization: Bearer {JWT}\n")
    assert JWT not in out and "eyJzdWIi" not in out
    assert "Authorization:" in out


def test_private_key_blocks_are_redacted_whole_even_when_cut() -> None:
    out = redact(f"key file:\n{PRIVATE_KEY}\ndone")
    assert out == f"key file:\n{REDACTED} (private key)\ndone"
    unterminated = redact(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{KEY_BODY}")
    assert "MIIEpAIBAAKCAQEA" not in unterminated
    headless = redact(f"...tail of a file\n{KEY_BODY}-----END PRIVATE KEY-----\nnext")
    assert "MIIEpAIBAAKCAQEA" not in headless and "Q2FsbG1l" not in headless
    assert headless.endswith("next")


def test_passwords_in_urls_are_redacted_and_the_rest_kept() -> None:
    out = redact("connecting to postgres://app:s3cr3tP4ss@db.internal:5432/app")
    assert out == f"connecting to postgres://app:{REDACTED}@db.internal:5432/app"
    assert redact("redis://:hunter22@cache:6379/0") == f"redis://:{REDACTED}@cache:6379/0"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("DB_PASSWORD=correct-horse-battery", f"DB_PASSWORD={REDACTED}"),
        ("api_key: abcd1234efgh5678", f"api_key: {REDACTED}"),
        (
            '{"client_secret": "Zx9-long-secret", "user": "bob"}',
            f'{{"client_secret": "{REDACTED}", "user": "bob"}}',
        ),
        ("/usr/bin/app --token=abc123def456 --port 80", f"/usr/bin/app --token={REDACTED} --port 80"),
        ("GITHUB_TOKEN='ghp_abcdefghijklmnop'", f"GITHUB_TOKEN='{REDACTED}'"),
        (
            "https://api.example.com/v1?api_key=k3y123&page=2",
            f"https://api.example.com/v1?api_key={REDACTED}&page=2",
        ),
    ],
)
def test_values_of_secret_looking_keys_are_redacted(line: str, expected: str) -> None:
    assert redact(line) == expected


def test_ordinary_text_is_left_alone() -> None:
    text = "nginx.service: active (running) since Mon; 3 workers, load 0.52\nuser=www-data port=8080"
    assert redact(text) == text


def test_values_of_configured_environment_variables_are_redacted() -> None:
    redactor = Redactor.from_env(["DEPLOY_KEY", "UNSET_VAR"], env={"DEPLOY_KEY": "v3ry-private-value"})
    assert redactor.redact("using v3ry-private-value now") == f"using {REDACTED} now"


def test_extra_patterns_are_redacted_and_a_bad_one_fails_at_start_up() -> None:
    redactor = Redactor(patterns=[r"corp-[0-9a-f]{8}"])
    assert redactor.redact("ticket corp-deadbeef opened") == f"ticket {REDACTED} opened"
    with pytest.raises(ToolConfigError, match="not a valid regex"):
        Redactor(patterns=["(unclosed"])
    with pytest.raises(ToolConfigError, match="matches the empty string"):
        Redactor(patterns=["x*"])


def _settings(**values: Any) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def test_output_filter_from_settings_redacts_env_and_settings_values_and_caps_size() -> None:
    settings = _settings(
        slack_bot_token="bot-token-from-dotenv-1234",
        chatops_redact_env=["SLACK_BOT_TOKEN", "LLM_API_KEY"],
        chatops_redact_patterns=[r"incident-\d{6}"],
        chatops_tool_output_max_chars=300,
    )
    output_filter = OutputFilter.from_settings(settings, env={"LLM_API_KEY": "llm-key-in-environment"})
    text = "a bot-token-from-dotenv-1234 b llm-key-in-environment c incident-123456 d"
    assert output_filter(text) == f"a {REDACTED} b {REDACTED} c {REDACTED} d"
    long = "\n".join(f"line {index}" for index in range(1000))
    assert len(output_filter(long)) <= 300


class _Args(BaseModel):
    pass


def test_secrets_in_tool_output_and_in_error_text_are_redacted_by_the_filter() -> None:
    def leaky(args: _Args, ctx: ToolContext) -> str:
        """Prints a config file with secrets in it."""
        return f"SLACK_BOT_TOKEN={SLACK_BOT}\n{PRIVATE_KEY}\nurl=https://u:pw123456@h/x"

    def failing(args: _Args, ctx: ToolContext) -> ToolResult:
        """Fails with credentials in the message."""
        return error_result(f"login failed for {AWS_ID} with Authorization: Bearer {JWT}")

    output_filter = OutputFilter()
    output = FunctionTool(leaky, _Args, category=ToolCategory.READ_ONLY).execute("{}", timeout=5)
    error = FunctionTool(failing, _Args, category=ToolCategory.READ_ONLY).execute("{}", timeout=5)
    shown_output = output_filter(output.output)
    shown_error = output_filter(error.output)
    for secret in (SLACK_BOT, "MIIEpAIBAAKCAQEA", "pw123456"):
        assert secret not in shown_output
    assert shown_error.startswith("Error: login failed for [REDACTED]")
    assert AWS_ID not in shown_error and JWT not in shown_error


def test_truncate_keeps_head_and_tail_and_says_how_much_was_cut() -> None:
    text = "".join(f"line {index:04d}\n" for index in range(1000))
    cut = truncate(text, 500)
    assert len(cut) <= 500
    assert cut.startswith("line 0000\n") and cut.endswith("line 0999\n")
    removed = int(re.search(r"\[\.\.\. (\d+) characters cut \.\.\.\]", cut).group(1))  # type: ignore[union-attr]
    kept = cut.split("\n[... ")[0] + cut.split("cut ...]\n")[1]
    assert removed == len(text) - len(kept)
    assert truncate("short", 500) == "short"


def test_redaction_happens_before_the_cut_so_no_secret_is_half_shown() -> None:
    text = "x" * 290 + f" {SLACK_BOT} " + "y" * 400
    shown = OutputFilter(max_chars=300)(text)
    assert "xoxb" not in shown and "AbCdEf" not in shown


def test_control_characters_and_terminal_colours_are_removed() -> None:
    assert strip_control_chars("\x1b[31mfailed\x1b[0m\r\nnext\x07 \x00line\tend") == "failed\nnext line\tend"


SECRET_LINES = {
    "slack bot token": (f"SLACK={SLACK_BOT}", SLACK_BOT),
    "slack user token": (f"token {SLACK_USER}", SLACK_USER),
    "slack app token": (f"app {SLACK_APP}", SLACK_APP),
    "slack legacy token": (f"legacy {SLACK_LEGACY}", SLACK_LEGACY),
    "aws key pair": (f"{AWS_ID} {AWS_SECRET}", AWS_SECRET),
    "aws temporary key": (f"session {AWS_TEMP_ID}", AWS_TEMP_ID),
    "bearer token": (f"Authorization: Bearer {JWT}", JWT),
    "private key": (PRIVATE_KEY, "MIIEpAIBAAKCAQEA"),
    "url password": ("amqp://guest:Sup3rS3cret@rabbit:5672/", "Sup3rS3cret"),
    "secret-looking key": ("REDIS_PASSWORD=n0t-for-your-eyes", "n0t-for-your-eyes"),
}


@pytest.mark.parametrize("kind", sorted(SECRET_LINES))
def test_each_kind_of_secret_is_redacted_from_a_command_output_and_its_error_text(
    kind: str, fake_commands: FakeCommands, tmp_path: Path
) -> None:
    line, secret = SECRET_LINES[kind]
    fake_commands.add("leaky", stdout=f"{line}\n")
    fake_commands.add("failing", stderr=f"startup failed\n{line}\n", exit_code=2)
    catalog = tmp_path / "tools.yaml"
    catalog.write_text(
        "tools:\n"
        "  - {name: show_config, description: d, category: read_only, run: [leaky]}\n"
        "  - {name: start_app, description: d, category: read_only, run: [failing]}\n"
    )
    tools = {tool.name: tool for tool in load_catalog(catalog, env=fake_commands.env).tools}
    output_filter = OutputFilter()
    output = tools["show_config"].execute("{}", timeout=10)
    error = tools["start_app"].execute("{}", timeout=10)
    assert secret in output.output and secret in error.output  # the raw results do hold it
    assert error.is_error and "failed with exit status 2" in error.output
    for shown in (output_filter(output.output), output_filter(error.output)):
        assert secret not in shown
        assert REDACTED in shown


@pytest.mark.parametrize(
    "hostile",
    [
        "A" * 200_000,
        "token" * 40_000,
        "a." * 100_000,
        ("QUFB" * 16 + "\n") * 3000 + "-----END PRIVATE KEY-----",
        "password:" * 20_000,
    ],
    ids=["letters", "key-words", "dotted", "base64-lines", "separators"],
)
def test_redaction_stays_fast_on_hostile_input(hostile: str) -> None:
    started = time.monotonic()
    OutputFilter()(hostile)
    assert time.monotonic() - started < 2.0  # a quadratic rule takes minutes here
