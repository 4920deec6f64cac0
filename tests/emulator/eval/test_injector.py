"""The fault injector: a scenario's declared state is exactly what the hosts' tools then read.

Each check runs the simulated host's own commands (what the runner's catalog tools execute:
``df``, ``uptime``, ``ps``, ``systemctl``, ``largest-files``, ``scenario-command``) against a
freshly injected host, and compares their output with the scenario file's numbers and lines.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from emulator.demo.commands import human, percent_used
from emulator.demo.host import DemoHost
from emulator.demo.system import HostSystem
from emulator.eval.fleet import ServiceState
from emulator.eval.injector import catalog_tools, inject, prometheus_series
from emulator.eval.loading import find_scenario, parse_eval_scenario
from emulator.eval.log_lines import render_line

NOW = 1_790_000_000.0


def run(host: DemoHost, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(host.bin_dir / argv[0]), *argv[1:]], capture_output=True, text=True, timeout=30
    )


@pytest.fixture(scope="module")
def disk_full(tmp_path_factory: pytest.TempPathFactory) -> dict[str, DemoHost]:
    return inject(find_scenario("disk-full-rotations"), tmp_path_factory.mktemp("disk"), NOW)


def test_files_have_their_declared_last_lines_age_and_about_their_size(
    disk_full: dict[str, DemoHost],
) -> None:
    scenario = find_scenario("disk-full-rotations")
    host = disk_full["web-03"]
    for file in scenario.fleet.targets["web-03"].files:
        real = host.root / file.path.lstrip("/")
        assert real.stat().st_mtime == pytest.approx(NOW - file.age, abs=1)
        opener = gzip.open if real.suffix == ".gz" else open
        with opener(real, "rt") as handle:
            text = handle.read()
        if file.lines:
            expected = [render_line(line, NOW) for line in file.lines]
            assert text.splitlines()[-len(expected) :] == expected
        if file.size is not None:
            assert file.size * 0.5 <= len(text.encode()) <= file.size * 1.5, file.path


def test_df_counts_the_declared_used_space_plus_the_files_on_each_disk(
    disk_full: dict[str, DemoHost],
) -> None:
    scenario = find_scenario("disk-full-rotations")
    host = disk_full["web-03"]
    system = HostSystem(host.root)
    on_logs = sum(p.stat().st_size for p in host.log_dir.rglob("*") if p.is_file())
    for disk in scenario.fleet.targets["web-03"].machine.disks:
        expected = int(disk.used) + (on_logs if disk.mount == "/var/log" else 0)
        [shown] = [d for d in system.machine.disks if d.mount == disk.mount]
        assert system.used(shown) == min(int(disk.size), expected)
        [row] = [r for r in run(host, "df", "-h").stdout.splitlines() if r.endswith(f" {disk.mount}")]
        assert f" {percent_used(system.used(shown), int(disk.size))}% " in row
        assert row.split()[2] == human(int(disk.size))
    # A clean-up frees exactly what it deletes.
    [volume] = [d for d in system.machine.disks if d.mount == "/var/log"]
    before = system.used(volume)
    victim = host.log_dir / "api" / "api.log.9"
    size = victim.stat().st_size
    victim.unlink()
    assert system.used(volume) == before - size


def test_processes_load_and_services_are_the_declared_ones(disk_full: dict[str, DemoHost]) -> None:
    state = find_scenario("disk-full-rotations").fleet.targets["web-03"]
    host = disk_full["web-03"]
    ps = run(host, "ps", "--sort=-pcpu").stdout
    listed = {int(line.split()[0]) for line in ps.splitlines()[1:-1]}
    running = {
        p.pid
        for p in state.processes
        if p.service is None or state.services[p.service].state == ServiceState.ACTIVE
    }
    assert listed == running
    load = ", ".join(f"{value:.2f}" for value in state.machine.load)
    assert f"load average: {load}  ({state.machine.cores} CPUs)" in run(host, "uptime").stdout
    for name, service in state.services.items():
        status = run(host, "systemctl", "show", name, "--property=ActiveState,MainPID,NRestarts,Result")
        assert f"ActiveState={service.state.value}" in status.stdout
        assert f"MainPID={service.pid}" in status.stdout


def test_a_scenario_command_prints_its_output_on_its_target_only(tmp_path: Path) -> None:
    scenario = find_scenario("db-01-quiet")
    [db] = inject(scenario, tmp_path, NOW).values()
    answer = run(db, "scenario-command", "pg_connections")
    assert answer.returncode == 0
    assert answer.stdout.rstrip("\n") == scenario.fleet.targets["db-01"].commands["pg_connections"].output
    for hostile in ("../../etc/hostname", "nope"):
        refused = run(db, "scenario-command", hostile)
        assert refused.returncode == 127 and refused.stdout == ""
    [tool] = [t for t in catalog_tools(scenario.fleet) if t["name"] == "pg_connections"]
    assert tool["run"] == ["scenario-command", "pg_connections"] and tool["category"] == "read_only"


def test_a_scenario_command_imports_only_the_standard_library() -> None:
    """It runs once per catalog call: importing the injector (pydantic, the demo) cost seconds."""
    probe = (
        "import sys\n"
        "import emulator.eval.fixed_output\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'yaml', 'redis', 'agent', 'tools', 'bot'))\n"
        "heavy += sorted(m for m in sys.modules if m.startswith('emulator.') and m not in "
        "('emulator.eval', 'emulator.eval.fixed_output'))\n"
        "print(','.join(heavy))\n"
    )
    root = Path(__file__).parents[3]
    answer = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=root
    )
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.strip() == ""


def test_a_failed_service_has_no_processes_and_says_its_result(tmp_path: Path) -> None:
    scenario = find_scenario("api-oom-alert-restart")
    web = inject(scenario, tmp_path, time.time())["web-03"]
    units = json.loads((web.state_dir / "units.json").read_text())
    assert units["api.service"]["ActiveState"] == "failed" and units["api.service"]["Result"] == "oom-kill"
    assert "gunicorn" not in run(web, "ps").stdout
    assert re.search(r"Active: failed", run(web, "systemctl", "status", "api").stdout)


def test_prometheus_series_end_at_the_run_start_and_hold_after() -> None:
    data = find_scenario("db-01-unreachable").model_dump(mode="json")
    data["fleet"]["prometheus"] = [
        {"metric": "up", "labels": {"instance": "db-01:9100"}, "step": 60, "values": [1, 1, 0]}
    ]
    scenario = parse_eval_scenario(data, "inline")
    [series] = prometheus_series(scenario.fleet, NOW)
    assert series.since == NOW - 120
    assert [
        series.value_at(NOW - 120),
        series.value_at(NOW - 61),
        series.value_at(NOW),
        series.value_at(NOW + 999),
    ] == [1, 1, 0, 0]
