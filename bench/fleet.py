"""Runners: what a call through a target's runner adds, and 20 targets checked in one turn.

Real ``chatops runner`` processes (one per target, each with its own catalog) over the bench
Redis; the worker side is the production composition (``bot.ops.fleet.build_fleet``) driving the
production loop (``agent.run.Run``) with a scripted zero-latency model.

1. Added latency: the built-in ``memory`` tool executed in this process, then the same tool on a
   runner target through the routed tool (enqueue, the runner's RQ job, the result back), one
   call at a time; p50 and p99 of each, and the difference.
2. Fan-out: a ``check`` catalog tool (``sleep 0.2`` and the host name, a stand-in for a real
   probe) on each of 20 targets, alone (the slowest of the 20 single checks), then on all 20 in one
   model turn (the loop runs read-only calls in parallel, bounded by ``bot.runs.service.MAX_PARALLEL_TOOLS``, 20).

Targets: p50 added latency at most 5 ms; 20 targets within 1.5x the slowest single check.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

import yaml

from agent.config import RunConfig
from agent.memory import InMemoryMemory
from agent.run import Run
from agent.scripted import ScriptedModel, tool_call
from agent.tooling import Tool
from agent.types import Message
from bench.common import BenchRedis, Options, Result, bench_redis, parse_options, percentile, settle
from bench.processes import Process, chatops_command, processes, start_process, wait_until
from bot.fleet.heartbeats import Heartbeats
from bot.keys import Keys
from bot.ops.fleet import build_fleet
from bot.settings import Settings
from tools.registry import build_registry_from_settings

NAME = "fleet"
TARGETS = 20
SAMPLES = 400
QUICK_TARGETS = 3
QUICK_SAMPLES = 10
SECRET = "bench-runner-secret-0123456789abcdef"
CHECK_SECONDS = 0.2


def write_site(directory: Path, names: Sequence[str]) -> Path:
    """An inventory of runner targets and, per target, a catalog whose ``check`` names its host."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        tools = [
            {
                "name": "check",
                "description": "Probe the host.",
                "category": "read_only",
                "parallel": True,
                "run": ["sh", "-c", f"sleep {CHECK_SECONDS} && echo {name} ok"],
            }
        ]
        (directory / f"tools-{name}.yaml").write_text(yaml.safe_dump({"tools": tools}))
    entries = [{"name": name, "via": "runner", "labels": {"env": "bench"}} for name in names]
    inventory = directory / "inventory.yaml"
    inventory.write_text(yaml.safe_dump({"targets": entries}))
    return inventory


def settings(bench: BenchRedis, queue: str, inventory: Path, tools_file: Path) -> Settings:
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        redis_url=bench.url,
        chatops_redis_prefix=bench.prefix,
        chatops_queue=queue,
        chatops_inventory_file=inventory,
        chatops_tools_file=tools_file,
        chatops_runner_secret=SECRET,
        chatops_runner_heartbeat_seconds=5,
    )


def start_runners(bench: BenchRedis, queue: str, directory: Path, names: Sequence[str]) -> list[Process]:
    started = []
    for name in names:
        env = {
            "REDIS_URL": bench.url,
            "CHATOPS_REDIS_PREFIX": bench.prefix,
            "CHATOPS_QUEUE": queue,
            "CHATOPS_INVENTORY_FILE": str(directory / "inventory.yaml"),
            "CHATOPS_TOOLS_FILE": str(directory / f"tools-{name}.yaml"),
            "CHATOPS_RUNNER_SECRET": SECRET,
            "CHATOPS_RUNNER_HEARTBEAT_SECONDS": "5",
            "CHATOPS_RUNNER_STATE_DIR": str(directory / "state" / name),
        }
        command = [*chatops_command(), "--log-level", "WARNING", "runner", "--target", name]
        started.append(start_process(f"runner-{name}", command, env, directory / "logs"))
    return started


def quiet_runners(started: Sequence[Process], limit: float = 30.0) -> None:
    """Wait (at most ``limit`` s) until the runners have finished starting: their imports and first
    registry builds would otherwise be measured as dispatch latency on a 2-core machine."""
    import psutil

    watched = [psutil.Process(process.popen.pid) for process in started]
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        for process in watched:
            process.cpu_percent(None)
        time.sleep(1.0)
        if sum(process.cpu_percent(None) for process in watched) < 5.0:
            return


def timed(tool: Tool, arguments: str, samples: int) -> list[float]:
    times = []
    for _ in range(samples):
        began = time.perf_counter()
        result = tool.execute(arguments, timeout=30)
        times.append((time.perf_counter() - began) * 1000)
        if result.is_error:
            raise RuntimeError(result.output)
    return times


def one_turn(tools: Sequence[Tool], targets: Sequence[str]) -> float:
    """Seconds the loop takes for one turn checking ``targets`` (and an answer)."""
    calls = [tool_call("check", f"c{i}", target=name) for i, name in enumerate(targets)]
    model = ScriptedModel([calls, "done"])
    memory = InMemoryMemory([Message.user("check them")])
    config = RunConfig(models=[model], memory=memory, tools=tools, max_parallel_tools=TARGETS)
    began = time.perf_counter()
    result = Run(config).execute()
    elapsed = time.perf_counter() - began
    outputs = [m.content or "" for m in memory.load_messages() if m.role == "tool"]
    if (
        result.status.value != "completed"
        or len(outputs) != len(targets)
        or any("ok" not in o for o in outputs)
    ):
        raise RuntimeError(f"the turn failed: {result.status} {outputs[:3]}")
    return elapsed


def measure(options: Options, bench: BenchRedis, directory: Path) -> Result:
    count = QUICK_TARGETS if options.quick else TARGETS
    samples = QUICK_SAMPLES if options.quick else SAMPLES
    names = [f"t-{index:02d}" for index in range(count)]
    queue = f"bench-fleet-{bench.prefix.split(':')[2]}"
    inventory = write_site(directory, names)
    config = settings(bench, queue, inventory, directory / f"tools-{names[0]}.yaml")
    keys = Keys(bench.prefix)
    heartbeats = Heartbeats(bench.client, keys, 5)
    result = Result(NAME, "Runners: added latency and fan-out", options.quick, settle(options.settle))
    with processes(start_runners(bench, queue, directory, names)) as started:
        wait_until(
            lambda: all(heartbeats.unreachable(name) is None for name in names), 60, "runners", watch=started
        )
        quiet_runners(started)
        registry = build_registry_from_settings(config)
        routed = {
            tool.definition.name: tool
            for tool in build_fleet(config, bench.client, keys, registry).tools_for("C")
        }
        local = registry["memory"]
        timed(local, "{}", 5), timed(routed["memory"], json.dumps({"target": names[0]}), 5)  # warm up
        here = timed(local, "{}", samples)
        there = timed(routed["memory"], json.dumps({"target": names[0]}), samples)
        rows = [
            ["memory, in this process", percentile(here, 50), percentile(here, 99)],
            ["memory, through the runner of " + names[0], percentile(there, 50), percentile(there, 99)],
        ]
        added50 = percentile(there, 50) - percentile(here, 50)
        added99 = percentile(there, 99) - percentile(here, 99)
        rows.append(["added by the runner", added50, added99])
        result.add_table(
            f"One read-only call, {samples} samples each (ms)", ["call", "p50 ms", "p99 ms"], rows
        )
        result.target(
            "added latency through a runner, p50 <= 5 ms",
            f"p50 {added50:.2f} ms, p99 {added99:.2f} ms",
            added50 <= 5,
        )
        tools = list(routed.values())
        singles = [one_turn(tools, [name]) for name in names]
        together = min(one_turn(tools, names) for _ in range(1 if options.quick else 3))
        slowest = max(singles)
        ratio = together / slowest
        result.add_table(
            f"The check ({CHECK_SECONDS:.1f} s each) on {count} targets, through the loop (s)",
            ["turn", "seconds"],
            [
                ["one target, fastest", min(singles)],
                ["one target, slowest", slowest],
                [f"{count} targets in one turn", together],
            ],
        )
        result.target(
            f"{count} targets in one turn within 1.5x the slowest single check",
            f"{together:.3f} s vs {slowest:.3f} s: {ratio:.2f}x",
            ratio <= 1.5,
        )
        result.data = {"local_ms": here, "runner_ms": there, "singles_s": singles, "together_s": together}
    return result


def main(argv: Sequence[str] | None = None) -> int:
    options, _ = parse_options(__doc__ or NAME, argv)
    import tempfile

    with bench_redis(NAME) as bench, tempfile.TemporaryDirectory(prefix="bench-fleet-") as folder:
        result = measure(options, bench, Path(folder))
        result.save(options)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
