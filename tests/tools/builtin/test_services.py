"""service_status and service_restart through fake systemctl, docker and kubectl on PATH."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.tooling import Tool, ToolCategory
from tests.tools.fakes import FakeCommands
from tools.config import ToolsConfig
from tools.registry import build_registry

SYSTEMD_SHOW = (
    "Id=nginx.service\nDescription=A high performance web server\nLoadState=loaded\nActiveState=active\n"
    "SubState=running\nMainPID=1234\nActiveEnterTimestamp=Mon 2025-01-06 10:00:00 UTC\nNRestarts=0\n"
    "Result=success\n"
)
APPROVED = {"confirmed_by": "U024BE7LH"}


def service_tools(fake: FakeCommands, tmp_path: Path, backend: str, **config: object) -> tuple[Tool, Tool]:
    env = {**fake.env, "SLACK_BOT_TOKEN": "xoxb-must-not-leak"}
    settings = ToolsConfig(
        log_dirs=(tmp_path,),
        service_backend=backend,
        env=env,
        hidden_env=("SLACK_BOT_TOKEN",),
        **config,  # type: ignore[arg-type]
    )
    registry = build_registry(settings)
    return registry["service_status"], registry["service_restart"]


def test_categories(fake_commands: FakeCommands, tmp_path: Path) -> None:
    status, restart = service_tools(fake_commands, tmp_path, "systemd")
    assert status.category is ToolCategory.READ_ONLY and status.parallel
    assert restart.category is ToolCategory.MUTATING and not restart.parallel


def test_systemd_status_reads_systemctl_show(fake_commands: FakeCommands, tmp_path: Path) -> None:
    fake_commands.add("systemctl", stdout=SYSTEMD_SHOW)
    status, _ = service_tools(fake_commands, tmp_path, "systemd")
    result = status.execute('{"service": "nginx"}', timeout=10)
    assert result.output == (
        "nginx.service: active (running), since Mon 2025-01-06 10:00:00 UTC, main PID 1234, "
        "0 automatic restarts - A high performance web server"
    )
    (argv,) = fake_commands.calls("systemctl")
    assert argv[:3] == ["show", "--no-pager", argv[2]] and argv[2].startswith("--property=Id,")
    assert argv[3] == "nginx"


def test_systemd_status_of_an_unknown_unit(fake_commands: FakeCommands, tmp_path: Path) -> None:
    fake_commands.add("systemctl", stdout="Id=nope.service\nLoadState=not-found\nActiveState=inactive\n")
    status, _ = service_tools(fake_commands, tmp_path, "systemd")
    result = status.execute('{"service": "nope"}', timeout=10)
    assert result.is_error and result.output == "Error: nope.service: no such unit"


def test_systemd_restart_runs_systemctl_restart_then_reports_status(
    fake_commands: FakeCommands, tmp_path: Path
) -> None:
    fake_commands.add("systemctl", stdout=SYSTEMD_SHOW, when={"restart": {"stdout": ""}})
    _, restart = service_tools(fake_commands, tmp_path, "systemd")
    result = restart.execute(json.dumps({"service": "nginx@blue.service", **APPROVED}), timeout=30)
    assert not result.is_error
    lines = result.output.splitlines()
    assert lines[0] == "Restarted nginx@blue.service."
    assert lines[1].startswith("Now: nginx.service: active (running)")
    assert lines[-1] == "(approved by U024BE7LH)"
    calls = fake_commands.calls("systemctl")
    assert calls[0] == ["restart", "--no-ask-password", "nginx@blue.service"]
    assert calls[1][0] == "show"
    assert "SLACK_BOT_TOKEN" not in fake_commands.envs("systemctl")[0]


def test_a_failed_restart_reports_exit_status_and_stderr(fake_commands: FakeCommands, tmp_path: Path) -> None:
    stderr = "Job for nginx.service failed because the control process exited with error code.\n"
    fake_commands.add("systemctl", when={"restart": {"stderr": stderr, "exit_code": 1}})
    _, restart = service_tools(fake_commands, tmp_path, "systemd")
    result = restart.execute(json.dumps({"service": "nginx", **APPROVED}), timeout=30)
    assert result.is_error
    assert result.output.startswith(
        "Error: restart of nginx failed: `systemctl restart --no-ask-password nginx` failed with exit status 1"
    )
    assert "Job for nginx.service failed" in result.output


def test_restart_is_refused_without_approval(fake_commands: FakeCommands, tmp_path: Path) -> None:
    fake_commands.add("systemctl")
    _, restart = service_tools(fake_commands, tmp_path, "systemd")
    assert restart.execute('{"service": "nginx"}', timeout=30).is_error
    assert fake_commands.calls("systemctl") == []


@pytest.mark.parametrize(
    "name", ["-H attacker", "--now", "nginx; rm -rf /", "$(reboot)", "a b", "nginx\n", "../x"]
)
def test_hostile_service_names_never_reach_the_command(
    fake_commands: FakeCommands, tmp_path: Path, name: str
) -> None:
    fake_commands.add("systemctl")
    status, restart = service_tools(fake_commands, tmp_path, "systemd")
    assert status.execute(json.dumps({"service": name}), timeout=10).is_error
    assert restart.execute(json.dumps({"service": name, **APPROVED}), timeout=10).is_error
    assert fake_commands.calls("systemctl") == []


def test_systemd_refuses_a_path_like_name(fake_commands: FakeCommands, tmp_path: Path) -> None:
    fake_commands.add("systemctl")
    status, _ = service_tools(fake_commands, tmp_path, "systemd")
    result = status.execute('{"service": "dev/sda"}', timeout=10)
    assert result.output == "Error: 'dev/sda': a service name cannot contain '/'"


DOCKER_INSPECT = {
    "Name": "/web",
    "RestartCount": 2,
    "State": {
        "Status": "running",
        "Running": True,
        "StartedAt": "2025-01-06T10:00:00Z",
        "Health": {"Status": "healthy"},
    },
    "Config": {"Image": "nginx:1.27"},
}


def test_docker_status_and_restart(fake_commands: FakeCommands, tmp_path: Path) -> None:
    fake_commands.add("docker", stdout=json.dumps(DOCKER_INSPECT), when={"restart": {"stdout": "web\n"}})
    status, restart = service_tools(fake_commands, tmp_path, "docker")
    assert status.execute('{"service": "web"}', timeout=10).output == (
        "web: running (healthy), since 2025-01-06T10:00:00Z, image nginx:1.27, 2 restarts"
    )
    result = restart.execute(json.dumps({"service": "web", **APPROVED}), timeout=30)
    assert result.output.splitlines()[0] == "Restarted web (web)."
    calls = fake_commands.calls("docker")
    assert calls[0] == ["inspect", "--type", "container", "--format", "{{json .}}", "web"]
    assert calls[1] == ["restart", "web"]


def test_docker_status_of_a_stopped_container_is_flagged(fake_commands: FakeCommands, tmp_path: Path) -> None:
    stopped = {
        **DOCKER_INSPECT,
        "State": {"Status": "exited", "Running": False, "ExitCode": 137, "FinishedAt": "x"},
    }
    fake_commands.add("docker", stdout=json.dumps(stopped))
    status, _ = service_tools(fake_commands, tmp_path, "docker")
    result = status.execute('{"service": "web"}', timeout=10)
    assert result.is_error and result.output.startswith("web: exited, exit code 137")


def test_docker_reports_a_missing_container(fake_commands: FakeCommands, tmp_path: Path) -> None:
    fake_commands.add("docker", stderr="Error: No such container: ghost\n", exit_code=1)
    status, _ = service_tools(fake_commands, tmp_path, "docker")
    result = status.execute('{"service": "ghost"}', timeout=10)
    assert result.is_error and "No such container: ghost" in result.output


DEPLOYMENT = {
    "metadata": {"generation": 4},
    "spec": {"replicas": 3},
    "status": {"observedGeneration": 4, "readyReplicas": 3, "updatedReplicas": 3, "availableReplicas": 3},
}


def test_kubernetes_restart_uses_rollout_restart_in_the_namespace_and_context(
    fake_commands: FakeCommands, tmp_path: Path
) -> None:
    fake_commands.add(
        "kubectl",
        stdout=json.dumps(DEPLOYMENT),
        when={"rollout": {"stdout": "deployment.apps/web restarted\n"}},
    )
    _, restart = service_tools(
        fake_commands, tmp_path, "kubernetes", kube_namespace="prod", kube_context="eu-1"
    )
    result = restart.execute(json.dumps({"service": "web", **APPROVED}), timeout=30)
    assert result.output.splitlines()[:2] == [
        "Restarted web (deployment.apps/web restarted).",
        "Now: deployment/web in namespace prod: 3/3 ready, 3 updated, 3 available",
    ]
    calls = fake_commands.calls("kubectl")
    assert calls[0] == ["--namespace=prod", "--context=eu-1", "rollout", "restart", "deployment/web"]
    assert calls[1] == ["--namespace=prod", "--context=eu-1", "get", "deployment/web", "--output=json"]


def test_kubernetes_status_of_a_statefulset_mid_rollout(fake_commands: FakeCommands, tmp_path: Path) -> None:
    rolling = {**DEPLOYMENT, "status": {"readyReplicas": 2, "updatedReplicas": 1, "availableReplicas": 2}}
    fake_commands.add("kubectl", stdout=json.dumps(rolling))
    status, _ = service_tools(fake_commands, tmp_path, "kubernetes")
    result = status.execute('{"service": "sts/db"}', timeout=10)
    assert result.output == (
        "statefulset/db in namespace default: 2/3 ready, 1 updated, 2 available (rollout in progress)"
    )
    assert fake_commands.calls("kubectl")[0] == [
        "--namespace=default",
        "get",
        "statefulset/db",
        "--output=json",
    ]


def test_kubernetes_refuses_unknown_kinds(fake_commands: FakeCommands, tmp_path: Path) -> None:
    fake_commands.add("kubectl")
    status, _ = service_tools(fake_commands, tmp_path, "kubernetes")
    result = status.execute('{"service": "secret/db-password"}', timeout=10)
    assert result.is_error and "KIND deployment, statefulset or daemonset" in result.output
    assert fake_commands.calls("kubectl") == []
