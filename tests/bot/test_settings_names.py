"""Which names are settings (``bot.settings_names``): a Deployment starts as shipped, whatever the
kubelet adds to its environment, while a name a person wrote that looks like one is still reported.

The Kubernetes test renders every overlay (``tests/deploy/kustomize.py``), builds each container's
environment as the kubelet would (the ConfigMap, the Secret's settings, the ``env`` entries, and the
service links of every Service in the namespace plus a ``redis`` one, which ``REDIS_URL``'s host names
in docs/DEPLOY.md), and starts the real CLI with it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent import defaults as agent_defaults
from bot.ops.compose import recovery_interval
from bot.runs import durability, replication
from bot.runs import service as run_service
from bot.settings import RENAMED, RETIRED, Settings
from bot.settings_names import (
    ELSEWHERE,
    ENVIRONMENT,
    closest,
    is_service_link,
    is_typo,
    owned_prefixes,
    review_names,
    setting_names,
)
from bot.slack import policy_identity
from bot.slack.handlers import runtime
from bot.web import http_server
from tests.deploy.kustomize import Object, pod_spec, render

ROOT = Path(__file__).resolve().parents[2]
OVERLAYS = sorted(
    p for p in (ROOT / "deploy/kubernetes/overlays").iterdir() if (p / "kustomization.yaml").is_file()
)
# What an operator's Secret chatops-secrets holds (docs/DEPLOY.md): settings, values made up.
SECRET = {
    "SLACK_BOT_TOKEN": "xoxb-1",
    "SLACK_SIGNING_SECRET": "s",
    "LLM_API_KEY": "sk-1",
    "CHATOPS_RUNNER_SECRET": "r",
}
REDIS_SERVICE: Object = {
    "kind": "Service",
    "metadata": {"name": "redis"},
    "spec": {"ports": [{"port": 6379}]},
}


def service_links(service: Object, address: str) -> dict[str, str]:
    """The variables the kubelet adds for ``service`` (enableServiceLinks, on by default)."""
    name = service["metadata"]["name"].upper().replace("-", "_")
    ports: list[dict[str, Any]] = service["spec"]["ports"]
    env = {f"{name}_SERVICE_HOST": address, f"{name}_SERVICE_PORT": str(ports[0]["port"])}
    for port in ports:
        number, protocol = port["port"], str(port.get("protocol", "TCP"))
        if "name" in port:
            env[f"{name}_SERVICE_PORT_{port['name'].upper().replace('-', '_')}"] = str(number)
        base = f"{name}_PORT_{number}_{protocol}"
        url = f"{protocol.lower()}://{address}:{number}"
        env |= {
            base: url,
            f"{base}_PROTO": protocol.lower(),
            f"{base}_PORT": str(number),
            f"{base}_ADDR": address,
        }
    env[f"{name}_PORT"] = f"{str(ports[0].get('protocol', 'TCP')).lower()}://{address}:{ports[0]['port']}"
    return env


def container_environments(objects: list[Object]) -> list[tuple[str, dict[str, str]]]:
    services = [obj for obj in objects if obj["kind"] == "Service"] + [REDIS_SERVICE]
    links: dict[str, str] = {}
    for number, service in enumerate(services, 1):
        links |= service_links(service, f"10.96.0.{number}")
    config = {o["metadata"]["name"]: o.get("data", {}) for o in objects if o["kind"] == "ConfigMap"}
    found = []
    for obj in objects:
        spec = pod_spec(obj)
        for container in spec.get("containers", []) if spec else []:
            env = dict(links)
            for source in container.get("envFrom", []):
                env |= config[source["configMapRef"]["name"]] if "configMapRef" in source else SECRET
            for entry in container.get("env", []):
                env[entry["name"]] = str(entry.get("value", "x"))
            found.append((f"{obj['metadata']['name']}/{container['name']}", env))
    return found


@pytest.mark.slow  # starts each shipped container's commands as processes
@pytest.mark.parametrize("overlay", OVERLAYS, ids=lambda path: path.name)
def test_every_shipped_container_starts_with_the_kubelets_service_links_without_a_word(
    overlay: Path, redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    environments = container_environments(render(overlay))
    assert {name for name, _ in environments} >= {"chatops-web/web", "chatops-worker/worker"}
    empty = tmp_path / "empty.env"
    empty.write_text("")
    for name, env in environments:
        assert review_names({}, ".env", env, also_known=Settings().chatops_redact_env) == [], name
        process_env = {
            **env,
            "PATH": os.environ["PATH"],
            "REDIS_URL": redis_url,
            "CHATOPS_REDIS_PREFIX": key_prefix,
        }
        process_env.pop("CHATOPS_INVENTORY_FILE", None)  # mounted from a ConfigMap in the cluster
        done = subprocess.run(
            [sys.executable, "-m", "bot.ops.cli", "--env-file", str(empty), "runs", "list"],
            cwd=ROOT,
            env=process_env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0 and "settings:" not in done.stderr, (name, done.stderr)


def test_a_name_that_only_looks_like_a_service_link_is_reported() -> None:
    """A person's ``REDIS_PORT=6379`` (Redis's port, they think) is no kubelet variable: its value is a
    port, not ``tcp://address:port``. It is a warning in the environment and an error in the file."""
    assert is_service_link("REDIS_PORT", "tcp://10.96.0.3:6379")
    assert is_service_link("CHATOPS_WEB_PORT_80_TCP_ADDR", "10.96.0.1")
    assert not is_service_link("REDIS_PORT", "6379")
    assert not is_service_link("REDIS_SERVICE_HOST", "redis.example.com; rm -rf /")
    [in_env] = review_names({}, ".env", {"REDIS_PORT": "6379"})
    assert (in_env.source, in_env.fatal) == (ENVIRONMENT, False)
    [in_file] = review_names({"REDIS_PORT": "tcp://10.96.0.3:6379"}, ".env", {})
    assert in_file.fatal, "service links live in the environment, never in the settings file"


def test_typos_are_errors_and_other_names_of_ours_are_not() -> None:
    settings = [name.upper() for name in Settings.model_fields]
    for typo, meant in [
        ("CHATOPS_APROVERS", "CHATOPS_APPROVERS"),
        ("LLM_MODLE", "LLM_MODEL"),
        ("REDIS_URI", "REDIS_URL"),
        ("SLACK_SIGNING_SECRETS", "SLACK_SIGNING_SECRET"),
        ("CHATOPS_EGRESS_ALOW", "CHATOPS_EGRESS_ALLOW"),
    ]:
        nearest, edits = closest(typo, settings)
        assert nearest == meant and is_typo(typo, edits), typo
        [problem] = review_names({}, ".env", {typo: "x"})
        assert problem.fatal and problem.message == f"unknown setting; did you mean {meant}?"
    # Names the project's own tooling sets beside chatops (the tests' harness, docker compose, Heroku).
    harmless = [
        "CHATOPS_TEST_DIR",
        "CHATOPS_TEST_CRASH",
        "CHATOPS_FOO_BAR_BAZ",
        "SLACK_EVENTS_URL",
        *ELSEWHERE,
    ]
    for name in harmless:
        assert not any(problem.fatal for problem in review_names({}, ".env", {name: "1"})), name
    assert set(owned_prefixes()) == {"SLACK_", "CHATOPS_", "REDIS_", "LLM_", "WEB_"}


def test_the_old_and_the_new_name_of_a_renamed_setting_both_set_is_an_error() -> None:
    (old, (new, _)), *_ = RENAMED.items()
    problems = review_names({old: "gpt-4o"}, "app.env", {new: "gpt-4o-mini"})
    assert [(p.name, p.source, p.fatal) for p in problems if p.fatal] == [(old, "app.env", True)]
    assert new in problems[0].message


# The settings that became constants in 0.2.0, each with the constant the code uses and its unit.
CONSTANTS: dict[str, tuple[float, str]] = {
    "CHATOPS_QUEUED_NOTE_SECONDS": (runtime.QUEUED_NOTE_SECONDS, " s"),
    "REDIS_REPLICA_WAIT_MS": (replication.REPLICA_WAIT_MS, " ms"),
    "CHATOPS_DURABILITY_TIMEOUT_MS": (durability.TIMEOUT_MS, " ms"),
    "CHATOPS_JOB_RETRIES": (run_service.JOB_RETRIES, ""),
    "CHATOPS_MAX_RUN_ATTEMPTS": (run_service.MAX_RUN_ATTEMPTS, ""),
    "LLM_CONNECT_TIMEOUT": (agent_defaults.CONNECT_TIMEOUT_SECONDS, " s"),
    "LLM_MAX_ATTEMPTS": (agent_defaults.MAX_ATTEMPTS, ""),
    "LLM_RETRY_MAX_WAIT_SECONDS": (agent_defaults.RETRY_MAX_WAIT_SECONDS, " s"),
    "CHATOPS_APPROVER_CACHE_SECONDS": (policy_identity.CACHE_SECONDS, " s"),
    "CHATOPS_MAX_PARALLEL_TOOLS": (run_service.MAX_PARALLEL_TOOLS, ""),
    "CHATOPS_MAX_CALLS_PER_TURN": (agent_defaults.MAX_CALLS_PER_TURN, ""),
    "WEB_MAX_HEADER_BYTES": (http_server.MAX_HEADER_BYTES, ""),
    "WEB_GRACEFUL_TIMEOUT_SECONDS": (http_server.GRACEFUL_TIMEOUT_SECONDS, " s"),
}


def test_every_setting_turned_constant_is_retired_naming_the_value_the_code_uses() -> None:
    for name, (value, unit) in CONSTANTS.items():
        assert name not in setting_names()
        assert RETIRED[name] == f"retired in 0.2.0, now a constant ({value:g}{unit})", name
    assert recovery_interval(Settings(_env_file=None, chatops_lease_ttl_seconds=0.5)) == 1  # type: ignore[call-arg]
    assert recovery_interval(Settings(_env_file=None)) == 30  # type: ignore[call-arg]


def test_a_retired_name_is_a_warning_anywhere_and_a_near_miss_of_one_is_not_taken_for_it() -> None:
    problems = review_names({"CHATOPS_JOB_RETRIES": "7"}, ".env", {"CHATOPS_RECOVERY_INTERVAL_SECONDS": "1"})
    assert [(p.name, p.source, p.fatal) for p in problems] == [
        ("CHATOPS_JOB_RETRIES", ".env", False),
        ("CHATOPS_RECOVERY_INTERVAL_SECONDS", ENVIRONMENT, False),
    ]
    assert problems[0].message == "retired in 0.2.0, now a constant (3); remove it"
    assert "CHATOPS_LEASE_TTL_SECONDS" in problems[1].message
    # A mistyped retired name in the settings file is no retired name: an unknown one, and an error.
    [typo] = review_names({"CHATOPS_JOB_RETRIESS": "7"}, ".env", {})
    assert typo.fatal and typo.message.startswith("unknown setting")
