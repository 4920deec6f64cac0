"""docker-compose.yml: valid against the official Compose Specification schema (vendored, offline),
after interpolation as `docker compose config` does it, and reviewed like a security reviewer would."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from bot.ops.cli import build_parser
from bot.settings import Settings
from tests.deploy.test_kubernetes import SECRET_SETTINGS
from tools.inventory import load_inventory

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
SCHEMA = json.loads((Path(__file__).parent / "schemas" / "compose-spec.json").read_text())
SETTINGS = {name.upper() for name in Settings.model_fields}
# Variables the compose file reads that are not chatops settings: which images to run, the host port.
COMPOSE_VARIABLES = {"CHATOPS_IMAGE", "REDIS_IMAGE", "CHATOPS_WEB_PORT"}
CHATOPS_SERVICES = ("web", "worker", "runner")
_VARIABLE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's ``${NAME}``, ``${NAME:-default}``, ``${NAME-default}``, ``${NAME:?error}``."""
    if isinstance(value, dict):
        return {key: interpolate(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, env) for item in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        name, op, arg = match["name"], match["op"], match["arg"]
        present = env.get(name)
        if op in (":?", "?") and not present:
            raise ValueError(f"{name}: {arg}")
        if op in (":-",) and not present:
            return arg or ""
        if op == "-" and present is None:
            return arg or ""
        return present or ""

    return _VARIABLE.sub(substitute, value)


def variables(value: Any) -> set[str]:
    if isinstance(value, dict):
        return {name for item in value.values() for name in variables(item)}
    if isinstance(value, list):
        return {name for item in value for name in variables(item)}
    return {m["name"] for m in _VARIABLE.finditer(value)} if isinstance(value, str) else set()


def raw() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return data


def config(env: dict[str, str] | None = None) -> dict[str, Any]:
    resolved: dict[str, Any] = interpolate(raw(), {"CHATOPS_RUNNER_SECRET": "s3cret", **(env or {})})
    return resolved


def validate(document: dict[str, Any]) -> None:
    jsonschema.Draft7Validator(SCHEMA).validate(document)


def test_the_file_is_valid_compose() -> None:
    validate(config())


@pytest.mark.parametrize(
    ("path", "key", "value"),
    [
        (("services", "web"), "restart_policy", "always"),  # not a service key
        (("services", "worker"), "networks", "backend"),  # a list or a mapping
        ((), "volume", {}),  # not a top-level key
    ],
)
def test_the_schema_check_catches_mistakes(path: tuple[str, ...], key: str, value: Any) -> None:
    broken = copy.deepcopy(config())
    where = broken
    for part in path:
        where = where[part]
    where[key] = value
    with pytest.raises(jsonschema.ValidationError):
        validate(broken)


def test_the_runner_needs_its_secret() -> None:
    with pytest.raises(ValueError, match="CHATOPS_RUNNER_SECRET"):
        interpolate(raw(), {})


def test_every_variable_is_a_real_setting() -> None:
    document = raw()
    assert variables(document) <= SETTINGS | COMPOSE_VARIABLES, (
        variables(document) - SETTINGS - COMPOSE_VARIABLES
    )
    for name in CHATOPS_SERVICES:
        environment = document["services"][name].get("environment", {})
        assert isinstance(environment, dict)
        assert set(environment) <= SETTINGS, set(environment) - SETTINGS
        for setting in set(environment) & SECRET_SETTINGS - {"REDIS_URL"}:
            assert re.fullmatch(r"\$\{[A-Z_]+(:\?[^}]*)?\}", environment[setting]), (
                f"{name}: {setting} is written out"
            )
        # The values are valid settings too.
        Settings.model_validate(
            {k.lower(): v for k, v in config()["services"][name].get("environment", {}).items()}
        )


def test_services_run_the_image_and_real_commands() -> None:
    document = config()
    assert (ROOT / document["x-chatops"]["build"]["dockerfile"]).is_file()
    assert (ROOT / ".env.example").is_file()
    for name in CHATOPS_SERVICES:
        service = document["services"][name]
        assert service["image"] == "chatops:latest"
        assert service["command"][0] == name
        build_parser().parse_args(service["command"])  # a real subcommand with real options


def test_chatops_containers_are_locked_down() -> None:
    document = config()
    for name in CHATOPS_SERVICES:
        service = document["services"][name]
        assert service["read_only"] is True and service["cap_drop"] == ["ALL"]
        assert "no-new-privileges:true" in service["security_opt"]
        assert not service.get("privileged") and not service.get("cap_add")
        assert not service["user"].startswith("0") and service["user"].split(":")[0] != "root"
        assert any(t.startswith("/tmp") for t in service["tmpfs"])
        for volume in service.get("volumes", []):
            source, target, *mode = volume.split(":")
            assert "docker.sock" not in source
            if (name, source, target) == ("runner", "runner-state", "/var/lib/chatops-runner"):
                continue  # its one writable place: a named volume for the grants it spent
            assert mode == ["ro"], f"{name}: {volume} must be read-only"


def test_redis_keeps_every_write_and_is_not_published() -> None:
    redis = config()["services"]["redis"]
    command = redis["command"]
    options = dict(zip(command[1::2], command[2::2], strict=True))
    assert options["--appendonly"] == "yes"
    assert options["--maxmemory-policy"] == "noeviction"
    assert options["--appendfsync"] in ("everysec", "always")
    assert "ports" not in redis
    assert any(v.endswith(":/data") for v in redis["volumes"])
    assert config()["networks"]["backend"]["internal"] is True


def test_web_listens_on_loopback_only_and_workers_scale() -> None:
    document = config()
    assert all(port.startswith("127.0.0.1:") for port in document["services"]["web"]["ports"])
    worker = document["services"]["worker"]
    assert "ports" not in worker and "container_name" not in worker
    assert worker["deploy"]["replicas"] >= 2


def test_the_web_process_outweighs_a_worker_for_cpu() -> None:
    # Each container is a cgroup of its own: its CPU share, not a nice value, decides who runs first.
    services = config()["services"]
    assert int(services["web"]["cpu_shares"]) >= 8 * int(services["worker"]["cpu_shares"])


def test_the_runner_gets_no_slack_or_llm_credentials() -> None:
    runner = config()["services"]["runner"]
    assert "env_file" not in runner
    assert not [name for name in runner["environment"] if name.startswith(("SLACK_", "LLM_"))]
    assert runner["networks"] == ["backend"]  # Redis only
    assert runner["profiles"] == ["runner"]


def test_the_mounted_inventory_loads_and_names_the_runner() -> None:
    inventory = load_inventory(ROOT / "deploy/docker/config/inventory.yaml")
    runner = config()["services"]["runner"]
    assert runner["command"][2] in {t.name for t in inventory.targets if t.via == "runner"}
