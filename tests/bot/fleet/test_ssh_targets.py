"""An SSH target in the inventory: catalog commands run there over SSH (a real sshd), built-ins do not."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import yaml

from agent.tooling import describe_call
from bot.keys import Keys
from bot.ops.fleet import build_fleet
from bot.settings import Settings
from tests.support.sshd import SshServer, start_sshd
from tools.registry import build_registry_from_settings


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


def test_a_catalog_tool_runs_on_the_ssh_target_and_built_ins_are_not_offered_there(
    sshd: SshServer, tmp_path: Path, redis_client: redis.Redis, keys: Keys
) -> None:
    catalog = {
        "tools": [
            {
                "name": "where",
                "description": "Which SSH session this is.",
                "category": "read_only",
                "targets": ["ssh", "local"],
                "params": {"word": {"type": "string"}},
                "run": ["sh", "-c", 'echo "$SSH_CONNECTION" "$1"', "sh", "{word}"],
            }
        ]
    }
    (tmp_path / "tools.yaml").write_text(yaml.safe_dump(catalog))
    db = {
        "name": "db-01",
        "via": "ssh",
        "labels": {"env": "prod"},
        "ssh": {
            "host": "127.0.0.1",
            "port": sshd.port,
            "user": sshd.user,
            "key_file": str(sshd.key_file),
            "known_hosts": str(sshd.known_hosts),
        },
    }
    (tmp_path / "inventory.yaml").write_text(
        yaml.safe_dump({"targets": [db, {"name": "box", "via": "local"}]})
    )
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        chatops_inventory_file=tmp_path / "inventory.yaml",
        chatops_tools_file=tmp_path / "tools.yaml",
        chatops_runner_secret="s" * 32,  # an SSH target's changing calls need verified grants
    )
    registry = build_registry_from_settings(settings)
    try:
        tools = {
            t.definition.name: t for t in build_fleet(settings, redis_client, keys, registry).tools_for("C1")
        }
        assert tools["where"].definition.parameters["properties"]["target"]["enum"] == ["box", "db-01"]
        assert tools["disk_usage"].definition.parameters["properties"]["target"]["enum"] == ["box"]
        hostile = "$(touch pwned); `id` ; echo x"
        result = tools["where"].execute(json.dumps({"target": "db-01", "word": hostile}), timeout=20)
        assert result.output.startswith("[db-01] "), result.output
        assert f" {sshd.port} " in result.output and hostile in result.output  # sshd's port: it ran over SSH
        assert not (Path.home() / "pwned").exists() and not (tmp_path / "pwned").exists()
        assert result.target == "db-01"
        command = describe_call(tools["where"], json.dumps({"target": "db-01", "word": "x"}))
        assert command is not None and command.startswith("on db-01: sh -c")
    finally:
        registry.close()
