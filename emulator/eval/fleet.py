"""A scenario's fleet: the inventory's targets and, per target, the simulated state the fault
injector writes before the run.

Everything here is something the demo's simulated hosts already represent (``emulator.demo``), so
the injector writes it with the same pieces:

* ``files``: files under the host's root, logs included (``/var/log/...``), each with its age (its
  mtime), its size (padded with realistic lines of a ``fill`` kind: the demo's log generators) and
  its last ``lines`` (``emulator.eval.log_lines``: literal text and ``{time:AGE}``). A path ending
  in ``.gz`` is written compressed, as the demo writes rotated logs.
* ``services``: the units the stand-in ``systemctl`` answers for (``emulator.demo.systemctl``):
  state, main PID, restarts, result, since when, the unit's own log.
* ``machine``: what ``df``, ``uptime``, ``free`` and ``ps`` print (``emulator.demo.system``): cores,
  memory, load (and a ``busy`` load while one service is active, as the demo's hosts have), disks
  (the used space of a disk counts the scenario's files on it besides its ``used``), processes (a
  process of a service is listed only while that service is active).
* ``commands``: read-only catalog tools of the scenario's own that print a fixed output on this
  target (a deploy history, a config diff): what a host command would say. Its lines may hold
  ``{time:AGE}`` like a file's.
* ``frozen``: outputs frozen from a real run (``chatops eval capture``, ``emulator.eval.capture``):
  per read-only tool, the output each call printed, keyed by its arguments. The eval's catalog
  overrides the tool on the whole fleet (``emulator.eval.injector``) with a command that prints, on
  this target, the output frozen for the call's arguments (the n-th call with the same arguments
  gets the n-th output, the last one after that), verbatim: no ``{time:AGE}`` here.
* ``runner``: ``down`` starts no runner for the target (the runner-down family).
* ``prometheus`` (fleet-wide): series the query tools read, the last value at the run's start.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Literal, get_args

from pydantic import AfterValidator, Field, field_validator, model_validator

from emulator.demo.catalog import TOOLS as DEMO_CATALOG
from emulator.eval.log_lines import check_line
from emulator.eval.quantities import Age, Size
from emulator.eval.strict import Strict
from tools.inventory_types import NAME_PATTERN

FillKind = Literal["nginx-access", "nginx-error", "api", "postgres", "postgres-busy", "syslog"]
"""Line generators a file may be padded with: the demo's own (``emulator.demo.logs``)."""
FILL_KINDS: tuple[str, ...] = get_args(FillKind)

BUILTIN_TOOLS = frozenset(
    {
        *(tool["name"] for tool in DEMO_CATALOG),
        "tail_log",
        "list_logs",
        "clean_old_logs",
        "service_status",
        "service_restart",
        "http_check",
        "tcp_check",
        "dns_lookup",
        "prometheus_query",
        "prometheus_range",
        "alertmanager_alerts",
        "alertmanager_silence",
        "kube_pods",
        "kube_events",
        "kube_logs",
        "kube_rollout_status",
        "kube_scale",
        "update_findings",
    }
)
"""Tools the bot or the demo already has: a scenario's command may not take their names (state
what they read through ``machine``, ``services`` and ``files`` instead)."""

_TOOL_NAME = r"^[a-z][a-z0-9_]{0,63}$"
_UNIT = r"^[A-Za-z0-9][A-Za-z0-9@:._-]{0,99}$"
_METRIC = r"^[a-zA-Z_:][a-zA-Z0-9_:]*$"
_LABEL = r"^[a-zA-Z_][a-zA-Z0-9_]*$"
_PARAM = r"^[a-z_][a-z0-9_]{0,63}$"


def _host_path(path: str) -> str:
    if not path.startswith("/") or "\x00" in path or "\n" in path:
        raise ValueError(
            f"{path!r} is not an absolute path on the host; fix: write it from / (/var/log/api.log)"
        )
    if posixpath.normpath(path) != path or path.startswith("//"):
        raise ValueError(
            f"{path!r} is not written plainly; fix: write {posixpath.normpath(path)!r} (no '..', '.', '//' or trailing '/')"
        )
    return path


HostPath = Annotated[str, AfterValidator(_host_path)]
"""An absolute path inside the simulated host (``/var/log/api/api.log``), written plainly."""


class ServiceState(StrEnum):
    ACTIVE = "active"
    INACTIVE = "inactive"
    FAILED = "failed"
    ACTIVATING = "activating"
    DEACTIVATING = "deactivating"
    RELOADING = "reloading"


SUB_STATES: Mapping[ServiceState, str] = {
    ServiceState.ACTIVE: "running",
    ServiceState.INACTIVE: "dead",
    ServiceState.FAILED: "failed",
    ServiceState.ACTIVATING: "auto-restart",
    ServiceState.DEACTIVATING: "stop-sigterm",
    ServiceState.RELOADING: "reload",
}
"""systemd's usual sub-state for each state (``sub`` overrides it)."""

_RUNNING = (ServiceState.ACTIVE, ServiceState.RELOADING, ServiceState.DEACTIVATING)


class StartFailure(Strict):
    """How every start of a unit fails: its configuration is broken (``emulator.demo.systemctl``).

    The restart itself succeeds and its own status still shows the unit running, as a
    ``Type=simple`` unit's does; the process exits at once, so every later read shows it failed
    with ``result``, and ``lines`` (the program's own error, without a time: the stand-in writes
    the host's) are in the unit's log. Only the restart's check, or a look after it, tells."""

    result: Literal["exit-code", "signal", "core-dump", "timeout", "start-limit-hit"] = "exit-code"
    lines: tuple[str, ...] = Field(min_length=1, max_length=20)

    @field_validator("lines")
    @classmethod
    def _one_line_each(cls, lines: tuple[str, ...]) -> tuple[str, ...]:
        for line in lines:
            if not line or len(line) > 500 or any(c in line for c in "\n\r\x00"):
                raise ValueError(
                    f"{line[:60]!r} is not one line of a log; fix: 1 to 500 characters, no newline"
                )
        return lines


class Service(Strict):
    """A systemd unit of the host, as its ``systemctl show`` answers."""

    state: ServiceState = ServiceState.ACTIVE
    sub: str | None = Field(default=None, pattern=r"^[a-z-]{1,30}$")
    description: str = Field(default="", max_length=200)
    pid: int = Field(default=0, ge=0, description="its main PID while it runs; 0 when it does not")
    since: Age = Field(default=3 * 86400.0, description="how long it has been in this state")
    restarts: int = Field(default=0, ge=0)
    result: Literal[
        "success", "exit-code", "signal", "core-dump", "oom-kill", "timeout", "watchdog", "start-limit-hit"
    ] = "success"
    log: HostPath | None = None
    start_fails: StartFailure | None = None

    @model_validator(mode="after")
    def _pid_matches_state(self) -> Service:
        if self.start_fails is not None and not (self.log or "").startswith("/var/log/"):
            raise ValueError(
                "a unit whose start fails writes its error to its own log; fix: give log: under /var/log"
            )
        if self.state in _RUNNING and self.pid == 0:
            raise ValueError(
                f"the service is {self.state.value} but has no main PID; fix: add pid: (e.g. pid: 2314)"
            )
        if self.state not in _RUNNING and self.pid != 0:
            raise ValueError(f"the service is {self.state.value} and runs no process; fix: remove pid")
        return self

    @property
    def sub_state(self) -> str:
        return self.sub or SUB_STATES[self.state]


class Process(Strict):
    """A process ``ps`` lists; one of a ``service`` only while that service runs."""

    pid: int = Field(ge=1, le=4194304)
    user: str = Field(pattern=r"^[a-z_][a-z0-9_-]{0,31}$")
    cpu: float = Field(ge=0, le=6400)
    mem: float = Field(default=0.1, ge=0, le=100)
    rss: Size = 16 * 1024 * 1024
    command: str = Field(min_length=1, max_length=300)
    state: Literal["R", "S", "D", "Z", "T", "I"] = "S"
    service: str | None = None


class Disk(Strict):
    """A filesystem: its ``used`` bytes are besides the scenario's files on it."""

    device: str = Field(pattern=r"^/dev/[A-Za-z0-9/_-]{1,60}$")
    mount: HostPath
    size: Size = Field(gt=0)
    used: Size = 0
    type: str = Field(default="ext4", pattern=r"^[a-z0-9]{1,12}$")

    @model_validator(mode="after")
    def _fits(self) -> Disk:
        if self.used > self.size:
            raise ValueError(f"used {self.used} is more than the disk's size {self.size}; fix: lower used")
        return self


class Busy(Strict):
    """The host's load while ``service`` is active (a restart or a stop lowers it to ``load``)."""

    service: str
    load: tuple[float, float, float]


class Machine(Strict):
    cores: int = Field(default=4, ge=1, le=512)
    memory: Size = 8 * 1024**3
    memory_used: float = Field(default=0.6, ge=0, le=1)
    load: tuple[float, float, float] = (0.31, 0.42, 0.38)
    busy: Busy | None = None
    booted: Age = Field(default=3 * 86400.0 + 5 * 3600.0, description="uptime")
    disks: tuple[Disk, ...] = (
        Disk(device="/dev/vda1", mount="/", size=20 * 1024**3, used=int(7.4 * 1024**3)),
    )

    @field_validator("disks")
    @classmethod
    def _one_root_disk(cls, disks: tuple[Disk, ...]) -> tuple[Disk, ...]:
        mounts = [disk.mount for disk in disks]
        repeated = sorted({m for m in mounts if mounts.count(m) > 1})
        if repeated:
            raise ValueError(f"two disks are mounted on {repeated[0]}; fix: one disk per mount point")
        if "/" not in mounts:
            raise ValueError("no disk is mounted on /; fix: add one (every path must be on a disk)")
        return disks


class FileSpec(Strict):
    """A file of the host: ``lines`` last, after about ``size`` bytes of ``fill``, modified ``age`` ago."""

    path: HostPath
    age: Age = 0.0
    size: Size | None = None
    fill: FillKind | None = None
    lines: tuple[str, ...] = ()

    @field_validator("lines")
    @classmethod
    def _lines(cls, lines: tuple[str, ...]) -> tuple[str, ...]:
        for index, line in enumerate(lines):
            if "\n" in line:
                raise ValueError(f"line {index} holds a line break; fix: one list item per line")
            try:
                check_line(line)
            except ValueError as error:
                raise ValueError(f"line {index}: {error}") from None
        return lines

    @model_validator(mode="after")
    def _content(self) -> FileSpec:
        if (self.size is None) != (self.fill is None):
            raise ValueError(
                f"size and fill go together; fix: give both (size: 5M, fill: one of {', '.join(FILL_KINDS)}) or neither"
            )
        if self.size is None and not self.lines:
            raise ValueError("the file has no content; fix: give lines:, or size: with fill:")
        return self


class Command(Strict):
    """A read-only catalog tool of this scenario that prints ``output`` on this target."""

    description: str = Field(min_length=1, max_length=300)
    output: str = Field(max_length=16000)
    exit_status: int = Field(default=0, ge=0, le=255)

    @field_validator("output")
    @classmethod
    def _output_lines(cls, output: str) -> str:
        for index, line in enumerate(output.splitlines()):
            try:
                check_line(line)
            except ValueError as error:
                raise ValueError(f"output line {index}: {error}") from None
        return output


class FrozenCall(Strict):
    """One call's output, frozen: what the tool printed for these arguments (literal text)."""

    arguments: dict[str, str | int | float | bool] = Field(default_factory=dict)
    output: str = Field(max_length=64000)

    @field_validator("arguments")
    @classmethod
    def _no_target(
        cls, arguments: dict[str, str | int | float | bool]
    ) -> dict[str, str | int | float | bool]:
        for name in arguments:
            if name == "target" or not re.fullmatch(_PARAM, name):
                raise ValueError(
                    f"argument {name!r}; fix: the tool's own arguments only, named like a parameter (path, lines)"
                )
        return arguments


class Series(Strict):
    """A Prometheus series: ``values`` ``step`` apart, the last one at the run's start."""

    metric: str = Field(pattern=_METRIC)
    labels: dict[str, str] = Field(default_factory=dict)
    step: Age = 60.0
    values: tuple[float, ...] = Field(min_length=1, max_length=10080)

    @field_validator("labels")
    @classmethod
    def _label_names(cls, labels: dict[str, str]) -> dict[str, str]:
        for name in labels:
            if not re.fullmatch(_LABEL, name) or name == "__name__":
                raise ValueError(f"label {name!r} is not a Prometheus label name; fix: letters, digits, _")
        return labels

    @field_validator("step")
    @classmethod
    def _positive(cls, step: float) -> float:
        if step <= 0:
            raise ValueError("step must be more than 0; fix: step: 1m")
        return step


class TargetState(Strict):
    """One inventory target, a simulated host, and what is true on it when the run starts."""

    labels: dict[str, str] = Field(default_factory=dict)
    runner: Literal["up", "down"] = "up"
    machine: Machine = Machine()
    services: dict[str, Service] = Field(default_factory=dict)
    processes: tuple[Process, ...] = ()
    files: tuple[FileSpec, ...] = ()
    commands: dict[str, Command] = Field(default_factory=dict)
    frozen: dict[str, tuple[FrozenCall, ...]] = Field(default_factory=dict)

    @field_validator("frozen")
    @classmethod
    def _frozen_tools(cls, frozen: dict[str, tuple[FrozenCall, ...]]) -> dict[str, tuple[FrozenCall, ...]]:
        for name in frozen:
            if not re.fullmatch(_TOOL_NAME, name) or name == "update_findings":
                raise ValueError(
                    f"frozen tool {name!r}; fix: a read-only tool's name (tail_log), not update_findings"
                )
        return frozen

    @field_validator("services")
    @classmethod
    def _unit_names(cls, services: dict[str, Service]) -> dict[str, Service]:
        for name in services:
            if name.endswith(".service"):
                raise ValueError(
                    f"service {name!r}; fix: write {name.removesuffix('.service')!r} (no .service)"
                )
            if not re.fullmatch(_UNIT, name):
                raise ValueError(f"service {name!r} is not a unit name; fix: letters, digits, @ : . _ -")
        return services

    @field_validator("commands")
    @classmethod
    def _command_names(cls, commands: dict[str, Command]) -> dict[str, Command]:
        for name in commands:
            if not re.fullmatch(_TOOL_NAME, name):
                raise ValueError(
                    f"command {name!r} is not a tool name; fix: lower case, digits, _ (deploy_history)"
                )
            if name in BUILTIN_TOOLS:
                raise ValueError(
                    f"command {name!r} is a tool the bot or the demo already has; fix: state what it reads "
                    "through machine, services and files, or choose another name"
                )
        return commands

    @model_validator(mode="after")
    def _consistent(self) -> TargetState:
        for process in self.processes:
            if process.service is not None and process.service not in self.services:
                raise ValueError(
                    f"process {process.pid} belongs to service {process.service!r}, which this target does not have; "
                    f"fix: add it under services, or use one of: {', '.join(self.services) or '(none)'}"
                )
        pids = [process.pid for process in self.processes]
        repeated = sorted({pid for pid in pids if pids.count(pid) > 1})
        if repeated:
            raise ValueError(f"two processes have PID {repeated[0]}; fix: one PID per process")
        paths = [file.path for file in self.files]
        repeated_paths = sorted({p for p in paths if paths.count(p) > 1})
        if repeated_paths:
            raise ValueError(f"file {repeated_paths[0]} is given twice; fix: one entry per file")
        busy = self.machine.busy
        if busy is not None and busy.service not in self.services:
            raise ValueError(
                f"machine.busy.service {busy.service!r} is not a service of this target; fix: add it"
            )
        return self


class Fleet(Strict):
    targets: dict[str, TargetState] = Field(min_length=1)
    prometheus: tuple[Series, ...] = ()

    @field_validator("targets")
    @classmethod
    def _target_names(cls, targets: dict[str, TargetState]) -> dict[str, TargetState]:
        for name in targets:
            if not NAME_PATTERN.fullmatch(name):
                raise ValueError(
                    f"target {name!r} is not an inventory name; fix: lower case letters, digits, . _ - (web-03)"
                )
        return targets

    @field_validator("prometheus")
    @classmethod
    def _distinct_series(cls, series: tuple[Series, ...]) -> tuple[Series, ...]:
        seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
        for one in series:
            key = (one.metric, tuple(sorted(one.labels.items())))
            if key in seen:
                raise ValueError(
                    f"series {one.metric}{dict(one.labels)} is given twice; fix: one entry per series"
                )
            seen.add(key)
        return series
