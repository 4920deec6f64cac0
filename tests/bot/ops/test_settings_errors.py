"""Settings that cannot be mistyped silently, and configuration errors said in one line: through the
real ``chatops`` console script (``python -m bot.ops.cli``) as a subprocess, in a clean environment.

A typo'd name stops ``web``, ``worker`` and every command with the closest setting named (``doctor``
reports it as a failed check and goes on); in the process environment only a likely typo is an error
and any other name with our prefixes a warning; a renamed setting's old name works with a warning; a
malformed ``REDIS_URL`` does not stop ``doctor`` from reporting every check; a missing ``--env-file``,
``chatops web`` without a signing secret and ``chatops targets`` without the runner secret are one line
each (``chatops: configuration error: ...``), exit status 2, no traceback.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# Every test starts chatops commands as processes (each imports the whole bot): tens of seconds.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
PREFIX = "chatops: configuration error: "
CHECKS = ("settings", "redis", "persist", "slack", "llm", "tools", "targets", "mcp")


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port bound here and never listened on: the model's connection is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def clean_env(**values: str) -> dict[str, str]:
    """The process environment without any variable of ours (the developer's shell may have some)."""
    keep = {name: value for name, value in os.environ.items() if name in ("PATH", "HOME", "LANG", "TMPDIR")}
    return {**keep, **values}


def chatops(
    env_file: Path | str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.ops.cli", "--env-file", str(env_file), *args],
        cwd=ROOT,
        env=env if env is not None else clean_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )


def config_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith(PREFIX)]


def assert_one_line_error(done: subprocess.CompletedProcess[str], *expected: str) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    lines = config_lines(done)
    assert len(lines) == 1, done.stderr
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("command", [["web", "--port", "0"], ["worker", "--burst"], ["runs", "list"]])
def test_a_mistyped_setting_in_the_env_file_stops_start_up_naming_the_setting(
    command: list[str], tmp_path: Path, redis_url: str
) -> None:
    env_file = tmp_path / "typo.env"
    env_file.write_text(f"REDIS_URL={redis_url}\nCHATOPS_APROVERS=U123\n")
    done = chatops(env_file, *command)
    line = assert_one_line_error(done, "CHATOPS_APROVERS", "did you mean CHATOPS_APPROVERS?", str(env_file))
    assert "listening" not in done.stderr
    assert (
        line == f"{PREFIX}CHATOPS_APROVERS (in {env_file}): unknown setting; did you mean CHATOPS_APPROVERS?"
    )


def test_doctor_reports_a_mistyped_setting_as_a_failed_check_and_runs_the_others(
    tmp_path: Path, redis_url: str, closed_port: int
) -> None:
    env_file = tmp_path / "typo.env"
    env_file.write_text(
        f"REDIS_URL={redis_url}\nLLM_BASE_URL=http://127.0.0.1:{closed_port}/v1\nchatops_aprovers=U123\n"
    )
    done = chatops(env_file, "doctor")
    assert done.returncode == 1, done.stdout + done.stderr
    first = done.stdout.splitlines()[0]
    assert (
        first.startswith("FAIL  settings") and "CHATOPS_APROVERS" in first and "CHATOPS_APPROVERS?" in first
    )
    assert all(f"  {name:<8}" in done.stdout for name in CHECKS), done.stdout


def test_a_likely_typo_in_the_process_environment_is_an_error(tmp_path: Path, redis_url: str) -> None:
    env_file = tmp_path / "empty.env"
    env_file.write_text("")
    done = chatops(env_file, "runs", "list", env=clean_env(REDIS_URL=redis_url, CHATOPS_APROVERS="U123"))
    assert_one_line_error(done, "CHATOPS_APROVERS (in the environment)", "did you mean CHATOPS_APPROVERS?")


def test_another_name_with_our_prefix_in_the_environment_is_a_warning_in_the_log_and_in_doctor(
    tmp_path: Path, redis_url: str, key_prefix: str, closed_port: int
) -> None:
    env_file = tmp_path / "empty.env"
    env_file.write_text("")
    env = clean_env(
        REDIS_URL=redis_url,
        CHATOPS_REDIS_PREFIX=key_prefix,
        CHATOPS_FOO_BAR_BAZ="1",
        LLM_BASE_URL=f"http://127.0.0.1:{closed_port}/v1",
    )
    listed = chatops(env_file, "runs", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "no runs" in listed.stderr
    warnings = [line for line in listed.stderr.splitlines() if "CHATOPS_FOO_BAR_BAZ" in line]
    assert len(warnings) == 1 and "WARNING" in warnings[0] and "not a chatops setting" in warnings[0]
    doctor = chatops(env_file, "doctor", env=env)
    assert "CHATOPS_FOO_BAR_BAZ (in the environment): not a chatops setting" in doctor.stdout, doctor.stdout


def test_the_old_name_of_a_renamed_setting_works_with_a_warning_naming_the_new_one(
    tmp_path: Path, redis_url: str, closed_port: int
) -> None:
    env_file = tmp_path / "old.env"
    env_file.write_text(
        f"REDIS_URL={redis_url}\nLLM_BASE_URL=http://127.0.0.1:{closed_port}/v1\nLLM_MODEL=gpt-primary\n"
        "LLM_FALLBACK_MODELS=gpt-fallback\n"
    )
    done = chatops(env_file, "doctor")
    llm = done.stdout[done.stdout.index("  llm ") :]
    assert "model gpt-primary" in llm and "model gpt-fallback" in llm, done.stdout  # the chain has it
    assert "LLM_FALLBACK_MODELS (in " in done.stdout and "renamed LLM_FALLBACKS" in done.stdout
    warning = [line for line in done.stderr.splitlines() if "LLM_FALLBACK_MODELS" in line]
    assert warning and "WARNING" in warning[0] and "LLM_FALLBACKS" in warning[0], done.stderr


def test_a_retired_setting_still_set_starts_with_a_warning_naming_its_constant(
    tmp_path: Path, redis_url: str, key_prefix: str
) -> None:
    """An upgrade with an old ``.env`` starts; the log says which values no longer apply, and what
    the constant is (a cache of 0 s someone set is 60 s now: they must hear it)."""
    env_file = tmp_path / "old.env"
    env_file.write_text(f"REDIS_URL={redis_url}\nCHATOPS_APPROVER_CACHE_SECONDS=0\n")
    env = clean_env(CHATOPS_REDIS_PREFIX=key_prefix, LLM_MAX_ATTEMPTS="2")
    done = chatops(env_file, "runs", "list", env=env)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "retired in 0.2.0" in line]
    assert len(warnings) == 2 and all("WARNING" in line for line in warnings), done.stderr
    assert (
        f"CHATOPS_APPROVER_CACHE_SECONDS (in {env_file}): retired in 0.2.0, now a constant (60 s); remove it"
        in warnings[0] + warnings[1]
    )
    assert "LLM_MAX_ATTEMPTS (in the environment): retired in 0.2.0, now a constant (5); remove it" in (
        warnings[0] + warnings[1]
    )


def test_doctor_with_a_malformed_redis_url_reports_every_check(tmp_path: Path, closed_port: int) -> None:
    env_file = tmp_path / "bad.env"
    env_file.write_text(
        "REDIS_URL=redis-password@localhost:6379\n"
        f"LLM_BASE_URL=http://127.0.0.1:{closed_port}/v1\nSLACK_BOT_TOKEN=xoxb-1\n"
    )
    done = chatops(env_file, "doctor")
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr, done.stderr
    lines = done.stdout.splitlines()
    for name in CHECKS:
        assert any(line[6:].startswith(f"{name:<8}") for line in lines), (name, done.stdout)
    assert "REDIS_URL (in " in lines[0] and "must start with redis://, rediss:// or unix://" in lines[0]
    redis_line = next(line for line in lines if line.startswith("FAIL  redis"))
    assert redis_line.endswith("skipped: REDIS_URL is invalid (see settings)")
    assert "redis-password" not in done.stdout + done.stderr  # the value is never echoed
    assert "PASS  tools" in done.stdout


def test_a_malformed_redis_url_stops_every_other_command_in_one_line(tmp_path: Path) -> None:
    env_file = tmp_path / "bad.env"
    env_file.write_text("REDIS_URL=localhost:6379\n")
    done = chatops(env_file, "runs", "list")
    assert_one_line_error(done, "REDIS_URL (in ", "found no scheme", f"fix: correct it in {env_file}")


def test_a_missing_env_file_is_an_error(tmp_path: Path) -> None:
    done = chatops(tmp_path / "missing.env", "runs", "list")
    assert_one_line_error(done, f"--env-file {tmp_path / 'missing.env'}: no such file")
    assert done.stdout == ""  # not "no runs" from the defaults


def test_chatops_web_without_a_signing_secret_fails_before_binding(tmp_path: Path, redis_url: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env_file = tmp_path / "web.env"
    env_file.write_text(f"REDIS_URL={redis_url}\nSLACK_BOT_TOKEN=xoxb-1\nWEB_HOST=127.0.0.1\nPORT={port}\n")
    done = chatops(env_file, "web")
    assert_one_line_error(done, "SLACK_SIGNING_SECRET is empty", "fix: set it to the app's Signing Secret")
    assert "listening" not in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_chatops_targets_without_the_runner_secret_says_what_to_set(tmp_path: Path, redis_url: str) -> None:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text("targets:\n  - name: web-03\n    via: runner\n")
    env_file = tmp_path / "fleet.env"
    env_file.write_text(f"REDIS_URL={redis_url}\nCHATOPS_INVENTORY_FILE={inventory}\n")
    done = chatops(env_file, "targets")
    assert_one_line_error(done, "set CHATOPS_RUNNER_SECRET")


def test_doctor_leaves_out_every_setting_of_a_refused_combination(tmp_path: Path, closed_port: int) -> None:
    """A client certificate without its key: both are named, and the Redis checks are not run on
    the defaults in their place (they would check a plain 127.0.0.1:6379 and mislead)."""
    env_file = tmp_path / "tls.env"
    env_file.write_text(
        f"REDIS_URL=rediss://127.0.0.1:{closed_port}/0\nREDIS_TLS_CERT_FILE=/etc/chatops/client.crt\n"
        f"LLM_BASE_URL=http://127.0.0.1:{closed_port}/v1\n"
    )
    done = chatops(env_file, "doctor")
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr, done.stderr
    assert done.stdout.startswith("FAIL  settings  REDIS_TLS_CERT_FILE, REDIS_TLS_KEY_FILE (in ")
    skipped = "skipped: REDIS_TLS_CERT_FILE, REDIS_TLS_KEY_FILE are invalid (see settings)"
    for name in ("redis", "persist", "targets"):
        assert f"FAIL  {name:<8}  {skipped}" in done.stdout, done.stdout
