"""One scenario's processes: the demo's machinery (``emulator.demo.main.Demo``) on injected hosts.

``EvalSession`` is the demo with four parts replaced, nothing copied: its hosts are the scenario's
targets, written by the fault injector (``emulator.eval.injector``); its inventory names them with
the scenario's labels; its catalog adds the scenario's commands; its model is the scenario's agent
(``reference``) served by the scripted model server over the real wire; its Prometheus serves the
scenario's series. A target whose ``runner`` is ``down`` gets none. Everything else (Redis with a
prefix and queues of the session's own, runners, the Slack emulator, ``chatops web`` and
``chatops worker``, the teardown that leaves no process and no key) is the demo's own code.
"""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import IO

import yaml

from emulator.demo.host import DemoHost
from emulator.demo.main import Demo, DemoError
from emulator.demo.options import Options
from emulator.demo.processes import stop_children
from emulator.demo.prometheus import PrometheusAPI
from emulator.eval.injector import host_roots, inject, prometheus_series, write_eval_catalog
from emulator.eval.loading import reference_agent, reference_variables
from emulator.eval.spec import EvalScenario
from emulator.models.openai_server import OpenAIServer

AGENTS = ("reference",)
"""The scripted agents a session can serve (the bad agents come later)."""


class EvalSession(Demo):
    """The processes of one run of ``scenario``, in ``directory`` (``start`` / ``stop``)."""

    def __init__(
        self,
        scenario: EvalScenario,
        directory: Path,
        agent: str = "reference",
        redis_url: str | None = None,
        out: IO[str] | None = None,
    ) -> None:
        if agent not in AGENTS:
            raise DemoError(f"no agent {agent!r}; this harness serves: {', '.join(AGENTS)}")
        options = Options(
            directory=directory, port=0, redis_url=redis_url, open_browser=False, activity=False
        )
        super().__init__(options, out or io.StringIO())
        self.scenario = scenario
        self.agent = agent
        self.key_prefix = f"chatops-eval:{self.session}:"
        self.queue = f"chatops-eval-{self.session}"
        self.started_at = time.time()  # the run's start: what {time:AGE} and series count back from
        self.by_name: dict[str, DemoHost] = {}

    def _build_hosts(self) -> None:
        try:
            self.by_name = inject(self.scenario, self.directory, self.started_at)
        except ValueError as error:
            raise DemoError(str(error)) from error
        self.hosts = list(self.by_name.values())
        self._step("hosts", ", ".join(self.by_name) + f" injected under {self.directory / 'hosts'}")

    def _start_llm(self) -> dict[str, str]:
        variables = reference_variables(self.scenario.targets, host_roots(self.by_name))
        script = reference_agent(self.scenario, variables)
        self.script = script
        self.llm = OpenAIServer(model="chatops-scripted", fallback=script)
        self._step("model", f"scripted {self.agent} agent of {self.scenario.name} on {self.llm.url}")
        return {"LLM_BASE_URL": self.llm.url, "LLM_API_KEY": "eval", "LLM_MODEL": "chatops-scripted"}

    def _start_prometheus(self) -> None:
        series = prometheus_series(self.scenario.fleet, self.started_at)
        self.prometheus = PrometheusAPI([], fixed=series)
        self._step("metrics", f"{len(series)} series on {self.prometheus.url}")

    def _write_inventory(self) -> Path:
        targets = [
            {"name": name, "via": "runner", "labels": dict(state.labels)}
            for name, state in self.scenario.fleet.targets.items()
        ]
        self.inventory.write_text(yaml.safe_dump({"targets": targets}, sort_keys=False))
        return self.inventory

    def _write_catalog(self) -> Path:
        return write_eval_catalog(self.directory / "tools.yaml", self.scenario.fleet)

    def _runner_hosts(self) -> list[DemoHost]:
        return [host for host in self.hosts if self.scenario.fleet.targets[host.name].runner == "up"]

    def _bot_started(self) -> None:
        """No alert button, no demo incident: the scenario's state is all there is."""

    def _stop_processes(self) -> None:
        """Every process at once: the run has ended (or is abandoned), nothing calls a runner."""
        stop_children(self.children, self.say)
