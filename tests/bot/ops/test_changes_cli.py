"""``chatops changes add|list`` through the real ``chatops`` program, on a real Redis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
import yaml

from bot.keys import Keys
from bot.ops.compose_changes import change_journal
from bot.settings import Settings
from tests.bot.changes.marker_fixtures import INVENTORY, RUNNER_SECRET, rfc3339
from tools.changes.record import Change
from tools.inventory import load_inventory

CHATOPS = str(Path(sys.executable).with_name("chatops"))


@pytest.fixture
def env_file(tmp_path: Path, redis_url: str, keys: Keys) -> Path:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump(INVENTORY))
    path = tmp_path / "changes.env"
    path.write_text(
        f"REDIS_URL={redis_url}\nCHATOPS_REDIS_PREFIX={keys.prefix}\n"
        f"CHATOPS_INVENTORY_FILE={inventory}\nCHATOPS_RUNNER_SECRET={RUNNER_SECRET}\n"
    )
    return path


def chatops(env_file: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CHATOPS, "--env-file", str(env_file), "changes", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith(("CHATOPS_", "REDIS_"))},
    )


def journal_keys(redis_client: redis.Redis, keys: Keys) -> list[bytes]:
    return list(redis_client.scan_iter(match=f"{keys.prefix}fleet:changes:*"))


def test_add_then_list_oldest_first_and_as_json(env_file: Path) -> None:
    earlier, later = time.time() - 3000, time.time() - 60
    marker = (
        "add",
        "--target",
        "web-01",
        "--what",
        "deploy api 1.4.2",
        "--who",
        "alice",
        "--url",
        "https://ci/7",
    )
    done = chatops(env_file, *marker, "--at", rfc3339(later))
    assert (done.returncode, done.stdout.strip()) == (0, "recorded on web-01"), done.stderr
    older = chatops(
        env_file, "add", "--target", "web-01", "--what", "deploy api 1.4.1", "--at", rfc3339(earlier)
    )
    assert older.returncode == 0
    again = chatops(env_file, *marker, "--at", rfc3339(later))
    assert again.stdout.strip() == "recorded on web-01 (already there)"  # the journal stores it once
    listed = chatops(env_file, "list", "--target", "web-01", "--since", "2h")
    lines = listed.stdout.splitlines()
    assert listed.returncode == 0 and len(lines) == 2
    assert "deploy api 1.4.1" in lines[0] and lines[1].startswith(rfc3339(later).replace("T", " "))
    assert lines[1].endswith("deploy   deploy api 1.4.2  [by alice, cli]")
    assert len(chatops(env_file, "list", "--target", "web-01", "--since", "30m").stdout.splitlines()) == 1
    rows = json.loads(chatops(env_file, "list", "--target", "web-01", "--json").stdout)
    assert [row["what"] for row in rows] == ["deploy api 1.4.1", "deploy api 1.4.2"]
    assert rows[1]["source"] == "cli" and rows[1]["url"] == "https://ci/7" and len(rows[1]["id"]) == 24


def test_listed_texts_have_their_control_characters_escaped(
    env_file: Path, redis_client: redis.Redis, keys: Keys
) -> None:
    settings = Settings(_env_file=env_file)  # type: ignore[call-arg]
    journal = change_journal(redis_client, settings, load_inventory(settings.chatops_inventory_file))
    journal.append(
        [Change(target="db-01", kind="deploy", at=time.time() - 5, what="x\x1b[2Ky", who="\x07me")]
    )
    listed = chatops(env_file, "list", "--target", "db-01")
    assert listed.returncode == 0 and "\x1b" not in listed.stdout and "\x07" not in listed.stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("add", "--target", "web-99", "--what", "x"), "error: no target 'web-99' in the inventory"),
        (
            ("add", "--target", "web-01", "--what", "x", "--at", "noon"),
            "error: --at: 'noon' is not an RFC 3339",
        ),
        (
            ("add", "--target", "web-01", "--what", "x", "--url", "file:///etc"),
            "error: --url: must be an http(s)",
        ),
        (("add", "--target", "web-01", "--what", "  "), "error: --what is empty"),
        (
            ("list", "--target", "web-01", "--since", "2 hours"),
            "error: --since '2 hours' is neither a duration",
        ),
        (("list", "--target", "ghost"), "error: no target 'ghost'"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_mistakes_are_one_line_and_exit_2(
    env_file: Path, redis_client: redis.Redis, keys: Keys, argv: tuple[str, ...], message: str
) -> None:
    done = chatops(env_file, *argv)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(message) and len(done.stderr.splitlines()) == 1, done.stderr
    assert journal_keys(redis_client, keys) == []


def test_without_the_runner_secret_it_says_so_in_one_line(env_file: Path, tmp_path: Path) -> None:
    text = env_file.read_text().replace(f"CHATOPS_RUNNER_SECRET={RUNNER_SECRET}\n", "")
    inventory = tmp_path / "local.yaml"
    inventory.write_text(yaml.safe_dump({"targets": [{"name": "box", "via": "local"}]}))
    bare = tmp_path / "bare.env"
    bare.write_text(text.replace(str(tmp_path / "inventory.yaml"), str(inventory)))
    done = chatops(bare, "add", "--target", "box", "--what", "x")
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith("chatops: configuration error: CHATOPS_RUNNER_SECRET is empty")
