"""One scenario's processes: the demo's machinery (``emulator.demo.main.Demo``) on injected hosts.

``EvalSession`` is the demo with the scenario's parts replaced, nothing copied: its hosts are the
scenario's targets, written by the fault injector (``emulator.eval.injector``); its inventory names
them with the scenario's labels; its catalog adds the scenario's commands; its model is the
scenario's agent (``reference`` or a bad agent, ``emulator.eval.agents``; or the configured model)
served by the scripted model server over the real wire; its Prometheus serves the scenario's
series; its runbooks (``CHATOPS_RUNBOOKS_DIR``) are the scenario's, or none. A target whose
``runner`` is ``down`` gets none. Recording or replaying (``emulator.eval.recording``), the
worker's model is reached through a ``ModelProxy``, the state is injected at the recording's epoch
and the hosts live at a path that does not depend on ``--out`` (``world``), so what the worker
sends is the same bytes run after run. Everything else (Redis with a
prefix and queues of the session's own, runners, the Slack emulator, ``chatops web`` and
``chatops worker``, the teardown that leaves no process and no key) is the demo's own code.
"""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import IO

import yaml

from emulator.demo.alert import ALERT_CHANNEL
from emulator.demo.host import DemoHost
from emulator.demo.main import Demo, DemoError
from emulator.demo.options import Options
from emulator.demo.processes import stop_children
from emulator.demo.prometheus import PrometheusAPI
from emulator.eval.agents import AGENTS, agent_script
from emulator.eval.injector import host_roots, inject, prometheus_series, write_eval_catalog
from emulator.eval.loading import reference_variables
from emulator.eval.model_agent import MODEL_AGENT, configured_model
from emulator.eval.model_proxy import ModelProxy
from emulator.eval.past_incidents import seed_incidents
from emulator.eval.recording import RecordingPlan
from emulator.eval.runbooks import write_runbooks
from emulator.eval.spec import EvalScenario
from emulator.models.openai_server import OpenAIServer

CHECK_SECONDS = "4"
"""The workers' ``CHATOPS_CHECK_SECONDS`` in a run (a passing check passes at its first try)."""


class EvalSession(Demo):
    """The processes of one run of ``scenario``, in ``directory`` (``start`` / ``stop``)."""

    def __init__(
        self,
        scenario: EvalScenario,
        directory: Path,
        agent: str = "reference",
        redis_url: str | None = None,
        out: IO[str] | None = None,
        recording: RecordingPlan | None = None,
        system_prompt: Path | None = None,
    ) -> None:
        if agent not in (*AGENTS, MODEL_AGENT):
            raise DemoError(f"no agent {agent!r}; this harness serves: {', '.join((*AGENTS, MODEL_AGENT))}")
        options = Options(
            directory=directory, port=0, redis_url=redis_url, open_browser=False, activity=False
        )
        super().__init__(options, out or io.StringIO())
        self.scenario = scenario
        self.agent = agent
        self.key_prefix = f"chatops-eval:{self.session}:"
        self.queue = f"chatops-eval-{self.session}"
        # The run's start: what {time:AGE} and series count back from (a replay's: its recording's).
        self.recording = recording
        self.system_prompt = system_prompt  # the worker's CHATOPS_SYSTEM_PROMPT_FILE; None: the shipped one
        self.started_at = recording.epoch if recording is not None else time.time()
        self.world = recording.world if recording is not None else self.directory
        self.proxy: ModelProxy | None = None
        self.model_settings: dict[str, str] = {}  # the worker's LLM_* but its URL (key included)
        self.by_name: dict[str, DemoHost] = {}

    def _build_hosts(self) -> None:
        if self.recording is not None:
            self.recording.take_world()
        try:
            self.by_name = inject(self.scenario, self.world, self.started_at)
        except ValueError as error:
            raise DemoError(str(error)) from error
        self.hosts = list(self.by_name.values())
        self._step("hosts", ", ".join(self.by_name) + f" injected under {self.world / 'hosts'}")

    def model_requests(self) -> int:
        """How many requests the model has received (its turns so far)."""
        if self.proxy is not None:
            return len(self.proxy.requests)
        return len(self.llm.requests) if self.llm is not None else 0

    def _start_llm(self) -> dict[str, str]:
        recording = self.recording
        if recording is not None and recording.meta is not None:  # replaying: no model, no network
            meta = recording.meta
            self.model_settings = dict(meta.settings)
            self.proxy = ModelProxy("replay", recording.folder)
            self._step(
                "model", f"replaying {meta.provider}:{meta.model} of {meta.recorded} on {self.proxy.url}"
            )
            return {**meta.settings, "LLM_API_KEY": "replay", "LLM_BASE_URL": self.proxy.url + meta.base_path}
        if self.agent == MODEL_AGENT:
            model = configured_model()
            env, upstream, secrets = dict(model.env), model.url, model.secrets
            self._step("model", f"{model.label()} (the configured model settings)")
        else:
            variables = reference_variables(self.scenario.targets, host_roots(self.by_name))
            script = agent_script(self.scenario, self.agent, variables)
            self.script = script
            self.llm = OpenAIServer(model="chatops-scripted", fallback=script)
            self._step("model", f"scripted {self.agent} agent of {self.scenario.name} on {self.llm.url}")
            env = {"LLM_PROVIDER": "openai", "LLM_API_KEY": "eval", "LLM_MODEL": "chatops-scripted"}
            upstream, secrets = self.llm.url, ()
        self.model_settings = env
        if recording is None:
            return {**env, "LLM_BASE_URL": upstream}
        self.proxy = ModelProxy("record", recording.folder, upstream=upstream, secrets=secrets)
        self._step("model", f"recording into {recording.folder} through {self.proxy.url}")
        return {**env, "LLM_BASE_URL": self.proxy.url}

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

    def _write_runbooks(self) -> Path | None:
        """The scenario's runbooks (``runbooks:``), none without: its worker then offers no runbook
        tool, as before runbooks existed (the demo's own runbooks are no scenario's)."""
        if not self.scenario.runbooks:
            return None
        return write_runbooks(self.scenario.runbooks, self.directory / "runbooks")

    def _runner_hosts(self) -> list[DemoHost]:
        return [host for host in self.hosts if self.scenario.fleet.targets[host.name].runner == "up"]

    def _bot_started(self) -> None:
        """No alert button, no demo incident: the scenario's state is all there is, its past
        incidents included (``incidents:``, stored in the run's channel before it starts)."""
        assert self.redis is not None
        count = seed_incidents(
            self.scenario.name,
            self.scenario.incidents,
            redis_url=self.redis.url,
            key_prefix=self.key_prefix,
            channel=ALERT_CHANNEL,  # #incident: where the run is asked, or its alert routed
            started_at=self.started_at,
        )
        if count:
            self._step("memory", f"{count} past incident(s) of the scenario remembered")

    def _spawn(
        self, name: str, arguments: list[str], env: dict[str, str], pass_fds: tuple[int, ...] = ()
    ) -> None:
        # A command's elapsed time would make every run's tool results, and so what the worker
        # sends its model, different bytes: no recording could be replayed (docs/EVAL.md).
        env = {**env, "CHATOPS_TOOL_ELAPSED": "false"}
        # A check that fails retries until its budget is spent: a few seconds tell a unit that
        # came back failed (the scenarios whose first fix does not work) without a minute's wait.
        env.setdefault("CHATOPS_CHECK_SECONDS", CHECK_SECONDS)
        if self.system_prompt is not None and name in ("web", "worker"):
            env["CHATOPS_SYSTEM_PROMPT_FILE"] = str(self.system_prompt.resolve())
        super()._spawn(name, arguments, env, pass_fds)

    def stop(self) -> None:
        if self._stopped:
            return
        super().stop()
        if self.proxy is not None:
            self.proxy.close()
        if self.recording is not None:
            self.recording.release_world(self.directory / "hosts")

    def _stop_processes(self) -> None:
        """Every process at once: the run has ended (or is abandoned), nothing calls a runner."""
        stop_children(self.children, self.say)
