"""What a reference agent's calls will read, where a scenario says it literally.

Until the fault injector writes scenarios onto simulated hosts, a shipped scenario is checked
against its own declarations: a quote its reference cites from a log, a command, the process
list, a service's state or the load must be in the text the scenario declares there (times
masked: no quote may depend on the clock); ``recent_changes``' package changes are read from the
scenario's dpkg and apt logs by the runner's own parser (``tools.changes.packages``). Outputs
computed from sizes (``df``, ``free``, ``largest_files``, ``list_logs``) and Prometheus's answers
are not checked here; the injector's tests will read them for real.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from emulator.eval.fleet import ServiceState, TargetState
from emulator.eval.log_lines import MASK, masked, render_line
from emulator.eval.quantities import parse_age
from emulator.eval.reference_plan import PlannedCall
from emulator.eval.spec import EvalScenario
from tools.changes.packages import package_changes
from tools.patterns import compile_safe

COMPUTED = "(computed from sizes or series: not checked before the injector exists)"
RUNNER_DOWN = "(the target's runner is down: the call has no output to quote)"
_RUNNING = (ServiceState.ACTIVE, ServiceState.RELOADING, ServiceState.DEACTIVATING)
_AT = 1_800_000_000.0  # when a package log's times are written to be read back (any moment does)
_NOT_CHECKED = {"disk_usage", "memory", "largest_files", "list_logs", "prometheus_query", "prometheus_range"}


def _tail(state: TargetState, arguments: Mapping[str, Any], restarted: Collection[str] = ()) -> str:
    path = str(arguments["path"])
    file = next(f for f in state.files if f.path == path)
    lines = [masked(line) for line in file.lines]
    for name in restarted:  # a start that fails writes its error to the unit's log
        service = state.services[name]
        if service.start_fails is not None and service.log == path:
            lines += [f"{MASK} {line}" for line in service.start_fails.lines]
    wanted = arguments.get("filter")
    if wanted:
        pattern = compile_safe(str(wanted), ignore_case=True)
        lines = [line for line in lines if pattern.search(line)]
    return "\n".join([path, *lines[-int(arguments.get("lines", 50)) :]])


def _processes(state: TargetState, arguments: Mapping[str, Any], restarted: Collection[str] = ()) -> str:
    running = [p for p in state.processes if p.service is None or state.services[p.service].state in _RUNNING]
    key: Callable[[Any], float] = (
        (lambda p: p.mem) if arguments.get("sort_by") == "pmem" else (lambda p: p.cpu)
    )
    shown = sorted(running, key=key, reverse=True)[: int(arguments.get("limit", 10))]
    return "\n".join(f"{p.pid} {p.user} {p.command}" for p in shown)


def _service(state: TargetState, arguments: Mapping[str, Any], restarted: Collection[str] = ()) -> str:
    name = str(arguments["service"]).removesuffix(".service")
    service = state.services[name]
    if name in restarted and service.start_fails is not None:  # it started, then exited: failed
        failed = {"state": ServiceState.FAILED, "pid": 0, "result": service.start_fails.result, "sub": None}
        service = service.model_copy(update=failed)
    parts = [f"{name}.service: {service.state.value} ({service.sub_state})", f"since {MASK}"]
    if service.pid:
        parts.append(f"main PID {service.pid}")
    parts.append(f"{service.restarts} automatic restarts")
    if service.result != "success":
        parts.append(f"last result {service.result}")
    return ", ".join(parts) + (f" - {service.description}" if service.description else "")


def _package_log(state: TargetState, log: str) -> str:
    """The text of ``log`` and its rotations as the scenario writes them (gzip read as text)."""
    files = [f for f in state.files if f.path == log or f.path.startswith(f"{log}.")]
    return "\n".join(render_line(line, _AT) for f in files for line in f.lines) + "\n"


def _changes(state: TargetState, arguments: Mapping[str, Any], restarted: Collection[str] = ()) -> str:
    """The package changes and restarts of the window (default 6 h) read by the runner's own
    parser from the scenario's dpkg and apt logs: what, who and diff, no time."""
    since = _AT - parse_age(str(arguments.get("since", "6h")))
    dpkg = _package_log(state, "/var/log/dpkg.log")
    apt = _package_log(state, "/var/log/apt/history.log")
    shown = [
        "\n".join([change.what, f"who: {change.who}", change.diff])
        for change in package_changes(dpkg, apt, "target", "runner")
        if change.at >= since
    ]
    booted = state.machine.booted
    shown += [
        f"restart of {name}.service"
        for name, service in state.services.items()
        if service.since < booted and _AT - service.since >= since
    ]
    return "\n".join(shown)


def _load(state: TargetState, _arguments: Mapping[str, Any], restarted: Collection[str] = ()) -> str:
    machine = state.machine
    busy = machine.busy is not None and state.services[machine.busy.service].state in _RUNNING
    load = machine.busy.load if busy and machine.busy is not None else machine.load
    return f"load average: {', '.join(f'{value:.2f}' for value in load)}  ({machine.cores} CPUs)"


_READERS: Mapping[str, Callable[[TargetState, Mapping[str, Any], Collection[str]], str]] = {
    "tail_log": _tail,
    "top_processes": _processes,
    "service_status": _service,
    "cpu_load": _load,
    "recent_changes": _changes,
}


def literal_output(scenario: EvalScenario, call: PlannedCall, restarted: Collection[str] = ()) -> str:
    """The text ``call`` reads that the scenario declares, ``COMPUTED`` or ``RUNNER_DOWN``
    (``restarted``: the services of its target restarted before it, as the stand-in changes them).
    ``KeyError``/``StopIteration``: the call reads something the scenario does not have."""
    if call.tool in _NOT_CHECKED:
        return COMPUTED
    state = scenario.fleet.targets[str(call.target)]
    if state.runner == "down":
        return RUNNER_DOWN
    if call.tool in state.commands:
        return masked(state.commands[call.tool].output)
    return _READERS[call.tool](state, call.arguments, restarted)
