"""Real ``chatops runner`` processes for tests: each with its own target, simulated root and catalog.

``FleetSite`` writes, under a test's ``tmp_path``, an inventory of runner targets and, per target,
a root (``hostname``, ``actions.log``) and a tool catalog whose commands act on that root only, so
a tool's output proves where it ran. ``start(name)`` launches ``chatops runner --target name``
as a subprocess (its own process group), and ``kill(name)`` SIGKILLs it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from bot.fleet.heartbeats import Heartbeats
from bot.settings import Settings
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
SECRET = "test-runner-secret-0123456789abcdef"
HEARTBEAT_SECONDS = 0.5


def runner_settings(
    tmp_path: Path, redis_url: str, prefix: str, queue: str, inventory: Mapping[str, object], **extra: object
) -> Settings:
    """Settings of a runner built in the test's process (``bot.ops.compose.build_runner``): the
    test's Redis, prefix and queue, ``inventory`` written under ``tmp_path``, a secret, ``extra``."""
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(inventory))
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        redis_url=redis_url,
        chatops_redis_prefix=prefix,
        chatops_queue=queue,
        chatops_inventory_file=path,
        **{"chatops_runner_secret": "s" * 32, **extra},  # type: ignore[arg-type]
    )


def catalog(root: Path) -> dict[str, object]:
    """The catalog of one simulated host: every command touches only ``root``."""
    log = str(root / "actions.log")
    return {
        "tools": [
            {
                "name": "whereami",
                "description": "Which host this is.",
                "category": "read_only",
                "parallel": True,
                "run": ["cat", str(root / "hostname")],
            },
            {
                # Each host's call waits (up to 20 s) until every host's has arrived: "met 2" from
                # both shows two runners worked on one turn's calls at the same time.
                "name": "meet",
                "description": "Wait for the other hosts at the meeting point.",
                "category": "read_only",
                "parallel": True,
                "timeout": 30,
                "run": [
                    "sh",
                    "-c",
                    'touch "$1/arrived.$2"; i=0; '
                    'while [ "$(ls "$1" | grep -c "^arrived[.]")" -lt 2 ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done; '
                    'echo "met $(ls "$1" | grep -c "^arrived[.]")"',
                    "sh",
                    str(root.parent / "meeting"),
                    root.name,
                ],
            },
            {
                "name": "restart_app",
                "description": "Restart an application on the host.",
                "category": "mutating",
                "timeout": 60,
                "params": {
                    "service": {"type": "string", "pattern": "^[a-z0-9-]+$"},
                    "pause": {
                        "type": "integer",
                        "minimum": 0,
                        "maximum": 60,
                        "default": 0,
                        "required": False,
                    },
                },
                "run": [
                    "sh",
                    "-c",
                    f'echo "$1 restarted by $2" >> {log} && sleep "$3" && echo "restarted $1 on $(cat {root}/hostname)"',
                    "sh",
                    "{service}",
                    "{confirmed_by}",
                    "{pause}",
                ],
            },
        ]
    }


@dataclass
class FleetSite:
    """The inventory, roots and catalogs of a test's targets, and their runner processes."""

    directory: Path
    redis_url: str
    prefix: str
    queue: str
    targets: dict[str, dict[str, str]]  # name -> labels
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    extra_env: dict[str, str] = field(default_factory=dict)  # e.g. CHATOPS_POLICY_FILE for the runners

    def __post_init__(self) -> None:
        entries = []
        for name, labels in self.targets.items():
            root = self.root(name)
            root.mkdir(parents=True, exist_ok=True)
            (root / "hostname").write_text(f"{name}\n")
            (root.parent / "meeting").mkdir(exist_ok=True)
            self.catalog_file(name).write_text(yaml.safe_dump(catalog(root)))
            entries.append({"name": name, "via": "runner", "labels": labels})
        self.inventory_file.write_text(yaml.safe_dump({"targets": entries}))

    @property
    def inventory_file(self) -> Path:
        return self.directory / "inventory.yaml"

    def root(self, name: str) -> Path:
        return self.directory / "hosts" / name

    def state_dir(self, name: str) -> Path:
        """The runner's ``CHATOPS_RUNNER_STATE_DIR``: kept across its restarts, like a host's disk."""
        return self.directory / "state" / name

    def catalog_file(self, name: str) -> Path:
        return self.directory / f"tools-{name}.yaml"

    def actions(self, name: str) -> list[str]:
        log = self.root(name) / "actions.log"
        return log.read_text().splitlines() if log.exists() else []

    def worker_env(self, name: str, llm_url: str, model: str) -> dict[str, str]:
        """A worker subprocess's settings for the production runtime: the model over HTTP, the
        tools of ``name``'s catalog on this site's inventory (``Cluster.start_worker(**env)``)."""
        return {
            "CHATOPS_RUNTIME": "bot.ops.worker:default_runtime",
            "LLM_BASE_URL": llm_url,
            "LLM_MODEL": model,
            "LLM_API_KEY": "sk-test",
            "CHATOPS_SLACK_STREAMING": "off",
            "CHATOPS_INVENTORY_FILE": str(self.inventory_file),
            "CHATOPS_TOOLS_FILE": str(self.catalog_file(name)),
            "CHATOPS_RUNNER_SECRET": SECRET,
            "CHATOPS_RUNNER_HEARTBEAT_SECONDS": str(HEARTBEAT_SECONDS),
        }

    def env(self, name: str, redis_url: str | None = None) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("CHATOPS_", "SLACK_", "LLM_", "REDIS_URL"))
        }
        env.update(
            REDIS_URL=redis_url or self.redis_url,
            CHATOPS_REDIS_PREFIX=self.prefix,
            CHATOPS_QUEUE=self.queue,
            CHATOPS_INVENTORY_FILE=str(self.inventory_file),
            CHATOPS_TOOLS_FILE=str(self.catalog_file(name)),
            CHATOPS_RUNNER_SECRET=SECRET,
            CHATOPS_RUNNER_HEARTBEAT_SECONDS=str(HEARTBEAT_SECONDS),
            CHATOPS_RUNNER_STATE_DIR=str(self.state_dir(name)),
            CHATOPS_CHANGES_ROOT=str(self.root(name)),  # its change scan reads its simulated host only
            CHATOPS_LOG_FORMAT="text",
            PYTHONPATH=str(ROOT),
        )
        env.update(self.extra_env)
        return env

    def start(
        self, name: str, heartbeats: Heartbeats, *, redis_url: str | None = None
    ) -> subprocess.Popen[bytes]:
        """Start ``name``'s runner and wait for its first heartbeat."""
        log = (self.directory / f"runner-{name}.log").open("ab")
        before = heartbeats.get(name)
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.ops.cli", "runner", "--target", name],
            env=self.env(name, redis_url),
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.processes[name] = proc

        def beating() -> bool:
            beat = heartbeats.get(name)
            if proc.poll() is not None:
                raise AssertionError(f"runner {name} exited: {self.output(name)}")
            return beat is not None and (before is None or beat.seen_at > before.seen_at)

        wait_until(beating, timeout=30, what=f"runner {name}'s first heartbeat")
        return proc

    def output(self, name: str) -> str:
        path = self.directory / f"runner-{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def kill(self, name: str) -> None:
        proc = self.processes.pop(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def stop_all(self) -> None:
        for name in list(self.processes):
            self.kill(name)
