"""The fault injector: a scenario's fleet written onto fresh simulated hosts, before the run.

``inject(scenario, directory, now)`` makes, per target of the scenario, a host the demo's own
machinery serves (``emulator.demo``), in ``directory/hosts/NAME`` with its commands in
``directory/bin/NAME``:

* ``etc/hostname`` and ``etc/machine.json`` (``emulator.demo.system.MACHINE_FILE``): the target's
  ``machine`` (cores, memory, disks, load with no noise, its processes), so ``df``, ``uptime``,
  ``free`` and ``ps`` print the scenario's numbers; a disk's used space is its ``used`` plus the
  bytes of the host's files on it (so a clean-up frees what it deleted);
* ``run/systemd/units.json``: the ``services`` for the stand-in ``systemctl``;
* ``run/boot_time``: ``booted`` before ``now``;
* every file, with its size (padded by the demo's line generators), its last lines (their
  ``{time:AGE}`` rendered against ``now``) and its age (mtime);
* ``etc/chatops-eval/commands/NAME.json`` and ``bin/NAME/scenario-command``: each ``commands``
  entry's fixed output, which the eval's catalog (``eval_catalog``) runs for the tool of that name;
* ``etc/chatops-eval/frozen/TOOL.json`` and ``bin/NAME/scenario-frozen``: each ``frozen`` tool's
  outputs by arguments (a captured run's, ``emulator.eval.capture``), which the eval's catalog runs
  instead of that tool.

``prometheus_series`` gives the scenario's Prometheus series for the demo's Prometheus API. Nothing
here reads this machine; every path written stays under ``directory``.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import stat
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from emulator.demo.catalog import TOOLS as DEMO_TOOLS
from emulator.demo.commands import write_commands
from emulator.demo.host import DemoHost
from emulator.demo.logs import write_filled
from emulator.demo.prometheus import Series, sampled_series
from emulator.demo.system import Disk, Machine, Process, write_boot_time, write_clock, write_machine
from emulator.demo.systemctl import START_FAILS, write_systemctl
from emulator.eval.fixed_output import COMMANDS_DIR, FROZEN_DIR
from emulator.eval.fleet import BUILTIN_TOOLS, Fleet, TargetState
from emulator.eval.log_lines import render_line
from emulator.eval.spec import EvalScenario
from tools.catalog.params import value_text

LOG_PREFIX = "/var/log/"


def inject(scenario: EvalScenario, directory: Path, now: float) -> dict[str, DemoHost]:
    """Every target of ``scenario`` as a fresh simulated host under ``directory``, by name."""
    unsafe = sorted({os.pathsep, ","} & set(str(directory)))
    if unsafe:  # a runner's PATH or CHATOPS_LOG_DIRS would split there
        raise ValueError(f"the folder {str(directory)!r} holds {' and '.join(map(repr, unsafe))}")
    return {
        name: inject_target(name, state, directory / "hosts" / name, directory / "bin" / name, now)
        for name, state in scenario.fleet.targets.items()
    }


def inject_target(name: str, state: TargetState, root: Path, bin_dir: Path, now: float) -> DemoHost:
    if root.exists():
        shutil.rmtree(root)
    if bin_dir.exists():
        shutil.rmtree(bin_dir)
    host = DemoHost(root=root, log_dir=root / "var" / "log", bin_dir=bin_dir, name=name)
    host.log_dir.mkdir(parents=True)
    (root / "etc").mkdir(parents=True, exist_ok=True)
    (root / "etc" / "hostname").write_text(f"{name}\n")
    write_machine(root, machine_of(state))
    write_units(host.state_dir, state, now)
    write_boot_time(root, now - state.machine.booted)
    write_clock(root, now)  # the host's clock stands at the scenario's moment: every run reads the same
    for file in state.files:
        write_file(root, name, file.path, file.size, file.fill, file.lines, now - file.age, now)
    write_command_outputs(root, state, now)
    write_frozen_outputs(root, state)
    write_systemctl(bin_dir, root)
    write_commands(bin_dir, root)
    write_command_runner(bin_dir, root)
    write_command_runner(bin_dir, root, "scenario-frozen", "frozen_main")
    return host


def machine_of(state: TargetState) -> Machine:
    """The demo's machine for ``state``: exact load, processes by PID, files counted on every disk."""
    machine = state.machine
    processes = [
        Process(
            user=p.user,
            cpu=p.cpu,
            mem=p.mem,
            rss=int(p.rss),
            command=p.command,
            unit=f"{p.service}.service" if p.service else "",
            pid=p.pid,
            state=p.state,
        )
        for p in state.processes
    ]
    return Machine(
        cores=machine.cores,
        memory=int(machine.memory),
        disks=[Disk(d.device, d.mount, int(d.size), int(d.used), d.type) for d in machine.disks],
        processes=processes,
        busy_unit=f"{machine.busy.service}.service" if machine.busy else "",
        busy_load=machine.busy.load if machine.busy else machine.load,
        idle_load=machine.load,
        memory_used=machine.memory_used,
        noise=False,
        files_on_every_disk=True,
    )


def _systemd_time(at: float) -> str:
    return time.strftime("%a %Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


def write_units(state_dir: Path, state: TargetState, now: float) -> None:
    """``units.json`` as the stand-in ``systemctl`` reads it (``emulator.demo.systemctl``)."""
    units = {
        f"{name}.service": {
            "Id": f"{name}.service",
            "Description": service.description or f"{name}.service",
            "LoadState": "loaded",
            "ActiveState": service.state.value,
            "SubState": service.sub_state,
            "MainPID": service.pid,
            "ActiveEnterTimestamp": _systemd_time(now - service.since),
            "NRestarts": service.restarts,
            "Result": service.result,
            # the unit's own log, under var/log as the stand-in writes it (another place: none)
            "log": service.log.removeprefix(LOG_PREFIX)
            if service.log and service.log.startswith(LOG_PREFIX)
            else "",
            **({START_FAILS: service.start_fails.model_dump(mode="json")} if service.start_fails else {}),
        }
        for name, service in state.services.items()
    }
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / "units.json").write_text(json.dumps(units, indent=2))


def write_file(
    root: Path,
    hostname: str,
    path: str,
    size: int | None,
    fill: str | None,
    lines: Sequence[str],
    modified: float,
    now: float,
) -> Path:
    """One file of the host: ``fill`` padding to about ``size``, then ``lines``; mtime ``modified``."""
    real = root / path.lstrip("/")
    real.parent.mkdir(parents=True, exist_ok=True)
    tail = [render_line(line, now) for line in lines]
    if size is not None and fill is not None:
        write_filled(real, fill, hostname, modified, int(size), tail)
    else:
        data = ("\n".join(tail) + "\n").encode()
        if real.suffix == ".gz":
            data = gzip.compress(data, mtime=0)
        real.write_bytes(data)
        os.utime(real, (modified, modified))
    return real


def write_command_outputs(root: Path, state: TargetState, now: float) -> None:
    folder = root / COMMANDS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for name, command in state.commands.items():
        output = "\n".join(render_line(line, now) for line in command.output.splitlines())
        (folder / f"{name}.json").write_text(
            json.dumps({"output": output, "exit_status": command.exit_status})
        )


def write_frozen_outputs(root: Path, state: TargetState) -> None:
    folder = root / FROZEN_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for tool, calls in state.frozen.items():
        entries = [
            {"arguments": {k: value_text(v) for k, v in call.arguments.items()}, "output": call.output}
            for call in calls
        ]
        (folder / f"{tool}.json").write_text(json.dumps({"calls": entries, "served": []}))


def write_command_runner(
    bin_dir: Path, root: Path, name: str = "scenario-command", entry: str = "command_main"
) -> Path:
    script = bin_dir / name
    package_root = Path(__file__).resolve().parent.parent.parent
    script.write_text(
        f"#!{sys.executable}\n"
        f"# An eval scenario's fixed command outputs for the simulated host in {root}.\n"
        "import sys\n"
        f"sys.path.insert(0, {str(package_root)!r})\n"
        f"from emulator.eval.fixed_output import {entry}\n"
        f"sys.exit({entry}(sys.argv[1:], {str(root)!r}))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script


def catalog_tools(fleet: Fleet) -> list[dict[str, Any]]:
    """The demo's host-health tools, plus one read-only tool per command the scenario declares
    (the description of its first target that has it)."""
    tools = [{**tool, "override": True} for tool in DEMO_TOOLS]
    seen: dict[str, str] = {}
    for state in fleet.targets.values():
        for name, command in state.commands.items():
            seen.setdefault(name, command.description)
    tools += [
        {"name": name, "description": text, "run": ["scenario-command", name]} for name, text in seen.items()
    ]
    frozen = frozen_tools(fleet)
    tools = [tool for tool in tools if tool["name"] not in frozen] + list(frozen.values())
    return [{**tool, "category": "read_only", "parallel": True, "timeout": 15} for tool in tools]


_PARAM_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}


def frozen_tools(fleet: Fleet) -> dict[str, dict[str, Any]]:
    """A catalog tool per ``frozen`` tool, overriding the tool of that name: its parameters the
    arguments its frozen calls were given (each optional, typed by its first value), its command
    ``scenario-frozen TOOL NAME=VALUE...`` on the call's target."""
    params: dict[str, dict[str, dict[str, Any]]] = {}
    for state in fleet.targets.values():
        for tool, calls in state.frozen.items():
            found = params.setdefault(tool, {})
            for call in calls:
                for name, value in call.arguments.items():
                    found.setdefault(
                        name, {"type": _PARAM_TYPES[type(value)], "required": False, "allow_flags": True}
                    )
    return {
        tool: {
            "name": tool,
            "description": f"{tool}, as a captured run saw it: the output it printed for these arguments.",
            "params": found,
            "run": ["scenario-frozen", tool, *(f"{name}={{{name}}}" for name in found)],
            "override": tool in BUILTIN_TOOLS,  # a scenario's own command is replaced, not overridden
        }
        for tool, found in params.items()
    }


def write_eval_catalog(path: Path, fleet: Fleet) -> Path:
    """``CHATOPS_TOOLS_FILE`` for a scenario's run."""
    path.write_text(
        "# An eval scenario's tools (emulator.eval.injector): the demo's host-health tools and the\n"
        "# scenario's own commands, each printing what the scenario declares on its target.\n"
        + yaml.safe_dump({"tools": catalog_tools(fleet)}, sort_keys=False)
    )
    return path


def prometheus_series(fleet: Fleet, now: float) -> list[Series]:
    """The scenario's series, the last value of each at ``now``."""
    return [
        sampled_series({"__name__": s.metric, **s.labels}, list(s.values), s.step, now)
        for s in fleet.prometheus
    ]


def host_roots(hosts: Mapping[str, DemoHost]) -> dict[str, str]:
    return {name: str(host.root) for name, host in hosts.items()}
