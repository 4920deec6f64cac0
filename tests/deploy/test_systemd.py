"""deploy/systemd: units that systemd itself accepts (`systemd-analyze verify`, where installed), each
hardened and run as the dedicated user; a sudoers example that `visudo -c` accepts and that allows
exactly `systemctl restart` of the listed units, consistent with the runner's catalog."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from bot.ops.cli import build_parser
from bot.settings import WORKER_NICE
from bot.web.http_server import GRACEFUL_TIMEOUT_SECONDS
from tools.catalog import load_catalog

SYSTEMD = Path(__file__).resolve().parents[2] / "deploy" / "systemd"
UNITS = {
    "chatops-web.service": "chatops-web.service",
    "chatops-worker@.service": "chatops-worker@1.service",
    "chatops-runner@.service": "chatops-runner@web-03.service",
}
SUDOERS = SYSTEMD / "sudoers.chatops"
DROP_IN = SYSTEMD / "chatops-runner@.service.d" / "sudo-restart.conf"
HARDENING = {
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectControlGroups": "yes",
    "RestrictSUIDSGID": "yes",
    "CapabilityBoundingSet": "",
    "User": "chatops",
    "Group": "chatops",
}


def service_section(path: Path) -> dict[str, list[str]]:
    """``[Service]`` as name -> every value given (systemd keys may repeat)."""
    values: dict[str, list[str]] = {}
    section = ""
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Service]" and "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values.setdefault(key, []).append(value)
    return values


def verify_root(tmp_path: Path) -> Path:
    """A root for ``systemd-analyze verify --root``: our units, the host's own units (targets they
    name), and an executable at the path ExecStart names (the real one is installed by the admin)."""
    root = tmp_path / "root"
    (root / "etc/systemd/system").mkdir(parents=True)
    shutil.copytree("/usr/lib/systemd/system", root / "usr/lib/systemd/system", symlinks=True)
    (root / "lib").symlink_to("usr/lib")
    for unit in UNITS:
        shutil.copy(SYSTEMD / unit, root / "etc/systemd/system" / unit)
    shutil.copytree(DROP_IN.parent, root / "etc/systemd/system" / DROP_IN.parent.name)
    chatops = root / "opt/chatops/bin/chatops"
    chatops.parent.mkdir(parents=True)
    chatops.write_text("#!/bin/sh\n")
    chatops.chmod(0o755)
    return root


def verify(root: Path, *units: str) -> str:
    done = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", f"--root={root}", *units],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return (done.stdout + done.stderr).strip() + ("" if done.returncode == 0 else f"\nexit {done.returncode}")


needs_systemd = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None or not Path("/usr/lib/systemd/system").is_dir(),
    reason="systemd-analyze is not installed",
)


@needs_systemd
def test_systemd_accepts_every_unit(tmp_path: Path) -> None:
    assert verify(verify_root(tmp_path), *UNITS.values()) == ""


@needs_systemd
def test_the_verification_catches_a_mistake(tmp_path: Path) -> None:
    root = verify_root(tmp_path)
    unit = root / "etc/systemd/system/chatops-web.service"
    unit.write_text(unit.read_text().replace("ProtectSystem=strict", "ProtectSystem=strcit"))
    assert "ProtectSystem" in verify(root, "chatops-web.service") or "strcit" in verify(
        root, "chatops-web.service"
    )


@pytest.mark.parametrize("unit", UNITS)
def test_every_unit_is_hardened(unit: str) -> None:
    service = service_section(SYSTEMD / unit)
    for key, value in HARDENING.items():
        assert service.get(key) == [value], f"{unit}: {key}={service.get(key)}"
    assert service["Restart"] == ["always"]
    assert "AF_PACKET" not in service["RestrictAddressFamilies"][0]
    assert int(service["TimeoutStopSec"][0]) > GRACEFUL_TIMEOUT_SECONDS  # the web's drain / a worker's step


@pytest.mark.parametrize("unit", UNITS)
def test_every_unit_runs_a_real_command(unit: str) -> None:
    (exec_start,) = service_section(SYSTEMD / unit)["ExecStart"]
    program, *args = exec_start.replace("%i", "web-03").replace("%H", "host").split()
    assert program == "/opt/chatops/bin/chatops"
    build_parser().parse_args(args)


def test_the_runner_reads_only_its_own_settings() -> None:
    runner = service_section(SYSTEMD / "chatops-runner@.service")
    assert runner["EnvironmentFile"] == ["/etc/chatops/runner.env"]  # no Slack token, no LLM key
    for unit in ("chatops-web.service", "chatops-worker@.service"):
        assert service_section(SYSTEMD / unit)["EnvironmentFile"] == ["/etc/chatops/chatops.env"]


def test_the_runner_may_write_its_state_directory_and_nothing_else() -> None:
    from bot.settings import Settings

    runner = service_section(SYSTEMD / "chatops-runner@.service")
    assert runner["ProtectSystem"] == ["strict"] and runner["StateDirectory"] == ["chatops-runner"]
    default = Settings(_env_file=None).chatops_runner_state_dir  # type: ignore[call-arg]
    assert str(default) == "/var/lib/" + runner["StateDirectory"][0]  # where systemd makes it writable


def test_the_sudo_drop_in_gives_up_only_what_sudo_needs() -> None:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(DROP_IN)
    service = dict(parser["Service"])
    assert service["NoNewPrivileges"] == "no"
    assert set(service["CapabilityBoundingSet"].split()) == {"CAP_SETUID", "CAP_SETGID", "CAP_AUDIT_WRITE"}
    assert "ProtectSystem" not in service and "User" not in service  # the rest of the lock-down stays


def sudoers_commands() -> list[str]:
    text = re.sub(r"\\\n\s*", " ", SUDOERS.read_text())
    (alias,) = re.findall(r"^Cmnd_Alias CHATOPS_RESTARTS = (.+)$", text, flags=re.M)
    return [command.strip() for command in alias.split(",")]


def test_sudoers_allows_exactly_systemctl_restart_of_listed_units() -> None:
    text = SUDOERS.read_text()
    rules = [line for line in text.splitlines() if line.startswith("chatops ")]
    assert rules == ["chatops ALL=(root) NOPASSWD: CHATOPS_RESTARTS"]
    commands = sudoers_commands()
    assert commands
    for command in commands:
        assert re.fullmatch(
            r"/usr/bin/systemctl restart --no-ask-password [a-z0-9@._-]+\.service", command
        ), command
    assert "ALL" not in " ".join(commands) and "*" not in text.replace("# ", "")
    assert "!setenv" in text and "env_reset" in text


def test_the_runner_catalog_restarts_only_what_sudo_allows() -> None:
    path = SYSTEMD / "runner-tools.yaml"
    # A valid catalog (the runner starts with it) that replaces the built-in service_restart.
    catalog = load_catalog(path, env={}, builtin_names={"service_restart"})
    assert [tool.name for tool in catalog.tools] == ["service_restart"] and catalog.overrides == {
        "service_restart"
    }
    (spec,) = yaml.safe_load(path.read_text())["tools"]
    allowed = {command.split()[-1] for command in sudoers_commands()}
    assert set(spec["params"]["service"]["enum"]) == allowed
    # The command it runs is the one sudo allows, for each unit.
    for unit in allowed:
        argv = [part.replace("{service}", unit) for part in spec["run"]]
        assert argv[:2] == ["sudo", "-n"] and " ".join(argv[2:]) in sudoers_commands()


@pytest.mark.skipif(shutil.which("visudo") is None, reason="visudo is not installed (make deploy-tools)")
def test_visudo_accepts_the_sudoers_example(tmp_path: Path) -> None:
    done = subprocess.run(["visudo", "-c", "-f", str(SUDOERS)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr
    broken = tmp_path / "sudoers"
    broken.write_text(SUDOERS.read_text().replace("NOPASSWD:", "NOPASSWD"))
    assert (
        subprocess.run(["visudo", "-c", "-f", str(broken)], capture_output=True, timeout=30).returncode != 0
    )


def test_the_web_unit_outweighs_the_workers_for_cpu() -> None:
    web = service_section(SYSTEMD / "chatops-web.service")
    worker = service_section(SYSTEMD / "chatops-worker@.service")
    assert int(web["CPUWeight"][0]) >= 8 * int(worker["CPUWeight"][0])
    # The nice value the worker would set itself, set before the syscall filter applies...
    assert worker["Nice"] == [str(WORKER_NICE)] and "Nice" not in web
    # ...and setpriority allowed again after the filter's deny list (later entries add to an allow
    # list), so a CHATOPS_WORKER_NICE above it is not a SIGSYS: only the worker may lower itself.
    filters = worker["SystemCallFilter"]
    assert filters[0] == "@system-service" and "@resources" in filters[1]
    assert filters[2:] == ["setpriority"] and web["SystemCallFilter"][2:] == []
