"""``chatops doctor`` against a healthy local set-up (Slack emulator, scripted OpenAI server, Redis, a
worker) and against each broken piece, checking the lines a person reads and the exit status."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from rq import Queue, Worker

from bot.ops.cli import build_parser
from bot.ops.doctor import run_cli
from bot.runs.durability import read_persistence
from bot.settings import Settings
from emulator.models.openai_server import OpenAIServer, Reply
from emulator.slack import SlackEmulator, UserSpec, WorkspaceConfig
from tests.reliability.redis_proc import DURABLE, RDB_DEFAULT, RedisProcess
from tests.support.waiting import wait_until
from tests.support.worker_process import WorkerProcess

ROOT = Path(__file__).resolve().parents[3]
MANIFEST = ROOT / "manifest.json"
CHATOPS = str(Path(sys.executable).with_name("chatops"))
TOKEN = "xoxb-doctor-token"
API_KEY = "sk-doctor-key"
SCOPES = tuple(json.loads(MANIFEST.read_text())["oauth_config"]["scopes"]["bot"])
CATALOG = """\
tools:
  - name: restart_api
    description: Restart the API.
    category: mutating
    run: ["echo", "restarted"]
"""


@pytest.fixture(scope="module")
def durable_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    """A Redis configured as docs/OPERATIONS.md requires, so a healthy set-up passes ``persist`` too."""
    server = RedisProcess(tmp_path_factory.mktemp("durable-redis"), config=DURABLE).start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(durable_server: RedisProcess) -> str:
    """This module's Redis (the shared one's persistence is whatever the machine has)."""
    return durable_server.url


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[Callable[..., RedisProcess]]:
    """``own_redis(config)``: a ``redis-server`` with those settings, for one persistence check."""
    started: list[RedisProcess] = []

    def start(config: dict[str, str]) -> RedisProcess:
        started.append(RedisProcess(tmp_path / f"redis-{len(started)}", config=config).start())
        return started[-1]

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def llm() -> Iterator[OpenAIServer]:
    with OpenAIServer(model="gpt-doctor", api_key=API_KEY, fallback=lambda body: Reply(text="OK")) as server:
        yield server


@pytest.fixture
def slack() -> Iterator[Callable[..., SlackEmulator]]:
    started: list[SlackEmulator] = []

    def start(scopes: tuple[str, ...] = SCOPES) -> SlackEmulator:
        emulator = SlackEmulator(WorkspaceConfig(bot_token=TOKEN, scopes=scopes))
        emulator.__enter__()
        started.append(emulator)
        return emulator

    yield start
    for emulator in started:
        emulator.__exit__(None, None, None)


@pytest.fixture
def healthy(
    slack: Callable[..., SlackEmulator],
    llm: OpenAIServer,
    redis_url: str,
    key_prefix: str,
    queue_name: str,
    tmp_path: Path,
) -> dict[str, object]:
    catalog = tmp_path / "tools.yaml"
    catalog.write_text(CATALOG)
    return {
        "slack_bot_token": TOKEN,
        "slack_signing_secret": "doctor-secret",
        "slack_api_url": slack().api_url,
        "redis_url": redis_url,
        "chatops_redis_prefix": key_prefix,
        "chatops_queue": queue_name,
        "llm_base_url": llm.url,
        "llm_api_key": API_KEY,
        "llm_model": "gpt-doctor",
        "chatops_tools_file": str(catalog),
    }


def doctor(values: dict[str, object], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, str], str]:
    """Exit status, the first line of each check by name, and the whole output."""
    settings = Settings(_env_file=None, **values)  # type: ignore[arg-type]
    status = run_cli(build_parser().parse_args(["doctor", "--manifest", str(MANIFEST)]), settings)
    out = capsys.readouterr().out
    first = {line.split()[1]: line for line in out.splitlines() if line[:4] in ("PASS", "WARN", "FAIL")}
    return status, first, out


@pytest.mark.slow
def test_a_healthy_setup_passes_every_check(
    healthy: dict[str, object], worker_processes: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    worker_processes()
    client = redis.Redis.from_url(str(healthy["redis_url"]))
    queue = Queue(str(healthy["chatops_queue"]), connection=client)
    wait_until(lambda: Worker.count(connection=client, queue=queue) == 1, what="the worker to register")
    env_file = tmp_path / "doctor.env"
    env_file.write_text("".join(f"{name.upper()}={value}\n" for name, value in healthy.items()))
    done = subprocess.run(
        [CHATOPS, "--env-file", str(env_file), "doctor", "--manifest", str(MANIFEST)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[:2] for line in lines[:6]] == [
        ["PASS", "settings"],
        ["PASS", "redis"],
        ["PASS", "persist"],
        ["PASS", "slack"],
        ["PASS", "llm"],
        ["PASS", "tools"],
    ]
    assert f"1 worker(s) on queue {healthy['chatops_queue']!r}" in lines[1]
    assert lines[2].endswith(
        "AOF with appendfsync always; maxmemory-policy noeviction; 0 replica(s): a crash keeps every executing mark"
    )
    assert (
        f"token works for @ops in Emulated Workspace (T_EMULATOR); it has all {len(SCOPES)} scopes"
        in lines[3]
    )
    assert f"model gpt-doctor answered at {healthy['llm_base_url']}" in lines[4]
    assert f"14 tools (13 built-in, 1 from {healthy['chatops_tools_file']})" in lines[5]
    assert lines[-1] == "All checks passed."


def test_a_bad_slack_token_fails_the_slack_check(
    healthy: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    status, first, out = doctor({**healthy, "slack_bot_token": "xoxb-revoked"}, capsys)
    assert status == 1
    assert (
        first["slack"] == "FAIL  slack     Slack rejected SLACK_BOT_TOKEN (auth.test answered invalid_auth)"
    )
    assert "fix: copy the Bot User OAuth Token (xoxb-...) from the app's OAuth & Permissions page" in out
    assert first["llm"].startswith("PASS") and first["tools"].startswith("PASS")
    assert out.splitlines()[-1] == "1 check(s) failed: slack."


def test_a_missing_scope_is_named(
    healthy: dict[str, object], slack: Callable[..., SlackEmulator], capsys: pytest.CaptureFixture[str]
) -> None:
    narrow = slack(scopes=tuple(s for s in SCOPES if s != "groups:history"))
    status, first, out = doctor({**healthy, "slack_api_url": narrow.api_url}, capsys)
    assert status == 1
    assert first["slack"] == (
        "FAIL  slack     token works for @ops in Emulated Workspace (T_EMULATOR) "
        "but lacks scopes from manifest.json: groups:history"
    )
    assert "then reinstall the app" in out


def test_an_llm_that_is_down_is_unreachable(
    healthy: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    status, first, _ = doctor({**healthy, "llm_base_url": "http://127.0.0.1:1/v1"}, capsys)
    assert status == 1
    assert first["llm"].startswith(
        "FAIL  llm       model gpt-doctor at http://127.0.0.1:1/v1: cannot reach the endpoint: ConnectError"
    )


def test_a_wrong_llm_key_is_a_401(healthy: dict[str, object], capsys: pytest.CaptureFixture[str]) -> None:
    status, first, out = doctor({**healthy, "llm_api_key": "sk-wrong"}, capsys)
    assert status == 1
    assert "the endpoint rejected LLM_API_KEY (401)" in first["llm"]
    assert "sk-wrong" not in out
    assert "fix: check LLM_BASE_URL, LLM_API_KEY and the model names" in out


def test_a_fallback_model_is_checked_too(
    healthy: dict[str, object], llm: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, out = doctor({**healthy, "llm_fallbacks": "gpt-backup"}, capsys)
    assert status == 0
    assert [r.body["model"] for r in llm.requests] == ["gpt-doctor", "gpt-backup"]
    # No max_tokens: o-series and gpt-5 refuse it, and one token makes a reasoning model answer nothing.
    assert ["max_tokens" in r.body for r in llm.requests] == [False, False]
    assert "model gpt-backup answered" in out


def test_redis_down_fails_the_redis_check_only(
    healthy: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    status, first, out = doctor({**healthy, "redis_url": "redis://127.0.0.1:1/0"}, capsys)
    assert status == 1
    assert first["redis"].startswith("FAIL  redis     cannot reach Redis at redis://127.0.0.1:1/0: ")
    assert "fix: start Redis or fix REDIS_URL" in out
    assert first["slack"].startswith("PASS") and first["llm"].startswith("PASS")


def test_no_worker_is_a_warning_not_a_failure(
    healthy: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    status, first, out = doctor(healthy, capsys)
    assert status == 0
    assert first["redis"].startswith("WARN  redis") and "0 worker(s) on queue" in first["redis"]
    assert out.splitlines()[-1] == "All checks passed (1 warning(s))."


def test_a_catalog_with_a_typo_fails_the_tools_check(
    healthy: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = tmp_path / "typo.yaml"
    catalog.write_text(CATALOG.replace("category:", "categroy:"))
    status, first, out = doctor({**healthy, "chatops_tools_file": str(catalog)}, capsys)
    assert status == 1
    assert first["tools"] == f"FAIL  tools     the tools cannot be loaded: tool catalog {catalog} is invalid:"
    assert "tool 'restart_api', field 'categroy': unknown key 'categroy' (did you mean 'category'?)" in out
    assert "fix: fix CHATOPS_TOOLS_FILE (docs/TOOLS.md)" in out


def test_missing_settings_are_listed(healthy: dict[str, object], capsys: pytest.CaptureFixture[str]) -> None:
    status, first, out = doctor(
        {
            **healthy,
            "slack_signing_secret": "",
            "chatops_redact_patterns": ["("],
            "chatops_runtime": "nope:build",
        },
        capsys,
    )
    assert status == 1
    assert first["settings"] == (
        "FAIL  settings  SLACK_SIGNING_SECRET is empty (needed to verify Slack's requests over HTTP)"
    )
    assert "CHATOPS_RUNTIME: cannot load the runtime factory 'nope:build'" in out
    assert "CHATOPS_REDACT_PATTERNS: redaction pattern '(' is not a valid regex" in out


FIX = "fix: set appendonly yes, appendfsync always and maxmemory-policy noeviction (docs/OPERATIONS.md, Redis persistence)"


def test_rdb_only_persistence_is_a_warning_naming_the_window(
    healthy: dict[str, object], own_redis: Callable[..., RedisProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    server = own_redis(dict(RDB_DEFAULT))
    status, first, out = doctor({**healthy, "redis_url": server.url}, capsys)
    assert status == 0
    assert first["persist"] == (
        "WARN  persist   RDB snapshots only (save 3600 1 300 100 60 10000): a crash loses up to 3600 s of writes"
    )
    assert FIX in out


def test_everysec_without_waitaof_is_a_warning_of_one_second(
    healthy: dict[str, object], own_redis: Callable[..., RedisProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    server = own_redis({**DURABLE, "appendfsync": "everysec"})
    if read_persistence(server.client()).has_waitaof:
        pytest.skip("WAITAOF (7.2+) makes everysec durable")
    status, first, _ = doctor({**healthy, "redis_url": server.url}, capsys)
    assert status == 0
    assert first["persist"].startswith("WARN  persist   AOF with appendfsync everysec and Redis 7.")
    assert first["persist"].endswith(
        "has no WAITAOF (7.2+): a crash loses up to 1 s of writes (2 s if fsync stalls)"
    )


def test_an_evicting_redis_is_a_warning(
    healthy: dict[str, object], own_redis: Callable[..., RedisProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    server = own_redis({**DURABLE, "maxmemory-policy": "volatile-lru"})
    status, first, _ = doctor({**healthy, "redis_url": server.url}, capsys)
    assert status == 0
    assert first["persist"] == (
        "WARN  persist   maxmemory-policy is volatile-lru: "
        "under memory pressure Redis may evict an approval or an executing mark"
    )


def test_strict_durability_on_rdb_only_fails_the_check(
    healthy: dict[str, object], own_redis: Callable[..., RedisProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    server = own_redis(dict(RDB_DEFAULT))
    status, first, out = doctor({**healthy, "redis_url": server.url, "chatops_durability": "strict"}, capsys)
    assert status == 1
    assert first["persist"].startswith("FAIL  persist   RDB snapshots only")
    assert "CHATOPS_DURABILITY=strict: every mutating tool is refused until this is fixed" in out
    assert out.splitlines()[-1] == "1 check(s) failed: persist."


def test_an_empty_approver_list_in_a_larger_workspace_is_a_warning_saying_who_may_approve(
    healthy: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    """Seven people, plus a guest, a bot and someone of another workspace, who are never counted."""
    people: dict[str, str | UserSpec] = {f"U_P{n}": f"person{n}" for n in range(7)}
    people |= {
        "U_GUEST": UserSpec("guest", guest="multi_channel"),
        "U_BOT2": UserSpec("otherbot", is_bot=True),
        "U_EXT": UserSpec("external", team_id="T_OTHER"),
    }
    with SlackEmulator(WorkspaceConfig(bot_token=TOKEN, users=people)) as workspace:
        values = {**healthy, "slack_api_url": workspace.api_url}
        status, first, out = doctor(values, capsys)
        assert first["approve"] == (
            "WARN  approve   CHATOPS_APPROVERS is empty: any of the workspace's 7 full members may approve "
            "mutating calls (guests and bots may not)"
        ), out
        assert "fix: set CHATOPS_APPROVERS" in out and status == 0  # a warning, not a failure
        _, listed, _ = doctor({**values, "chatops_approvers": "S_ONCALL"}, capsys)
        assert listed["approve"].startswith("PASS  approve   CHATOPS_APPROVERS lists 1")
    _, small, _ = doctor(healthy, capsys)  # the default workspace: alice and bob
    assert small["approve"].startswith("PASS  approve   CHATOPS_APPROVERS is empty: any of the workspace's 2")
