"""The local demo: its scenarios, its simulated host, and ``python -m emulator.demo`` from start to Ctrl-C.

The launcher test is what ``make demo`` does on a fresh machine: no Redis answering at
``REDIS_URL`` and no settings in the environment. It drives the seed incident through the
emulator's control API (mention, approval card with the dry run, Approve, answer), then sends
SIGINT and checks that every process the demo started is gone.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from emulator.demo_host import build_host
from emulator.demo_systemctl import systemctl_main
from emulator.openai_server import OpenAIServer
from emulator.scenario import ScenarioError, ScenarioSet, load_script, parse_scenario_set
from emulator.slack import SlackEmulatorClient
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant_call(name: str, call_id: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}],
    }


def tool(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


# -- the scenarios ----------------------------------------------------------------------------------


@pytest.fixture
def demo_script() -> ScenarioSet:
    script = load_script("demo", {"log_dir": "/srv/web-03/var/log"})
    assert isinstance(script, ScenarioSet)
    return script


def test_the_demo_set_picks_a_scenario_by_the_first_user_message(demo_script: ScenarioSet) -> None:
    assert [s.name for s in demo_script.scenarios] == ["high-cpu", "disk-full"]
    assert demo_script.pick([user("@ops the api on web-03 is burning CPU")]).name == "high-cpu"
    assert demo_script.pick([user("@ops web-03 is out of disk, deal with it")]).name == "disk-full"
    assert demo_script.pick([user("hello")]).name == "disk-full"  # the default is the last choice
    # Later messages do not move a conversation to another scenario.
    later = [user("web-03 is out of disk"), assistant_call("disk_usage", "c1"), user("is the CPU ok?")]
    assert demo_script.pick(later).name == "disk-full"


def test_variables_fill_tool_arguments_and_texts(demo_script: ScenarioSet) -> None:
    reply = demo_script({"messages": [user("web-03 is out of disk")]})
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [
        ("disk_usage", {"path": "/srv/web-03/var/log"})
    ]
    conversation = [user("web-03 is out of disk")]
    for number, name in enumerate(["disk_usage", "largest_files", "clean_old_logs", "disk_usage"]):
        conversation += [assistant_call(name, f"c{number}"), tool(f"c{number}", f"{name} said {{this}}")]
    answer = demo_script({"messages": conversation}).text or ""
    assert "clean_old_logs said {this}" in answer  # tool results are quoted as they are
    assert "its logs are in `/srv/web-03/var/log` on your machine" in answer


def test_a_reply_while_the_restart_waits_turns_to_the_log(demo_script: ScenarioSet) -> None:
    started = [
        user("the api on web-03 is burning CPU, restart it"),
        assistant_call("top_processes", "c1"),
        tool("c1", "..."),
        assistant_call("service_status", "c2"),
        tool("c2", "api.service: active (running)"),
        assistant_call("service_restart", "c3"),
        tool("c3", "Error: declined: superseded by a new message"),
    ]
    redirect = user("don't restart it, show me the logs first")
    for conversation in ([*started, redirect], [*started[:-1], redirect, started[-1]]):
        [call] = demo_script({"messages": conversation}).tool_calls
        assert (call.name, call.arguments) == (
            "tail_log",
            {"path": "/srv/web-03/var/log/api/api.log", "lines": 12},
        )
    answer = demo_script(
        {"messages": [*started, redirect, assistant_call("tail_log", "c4"), tool("c4", "attempt 3391")]}
    )
    assert answer.text is not None and answer.text.startswith("OK, I have not restarted anything")
    assert "attempt 3391" in answer.text
    # Any other reply while it works stops the plan instead of restarting.
    other = demo_script({"messages": [*started[:-1], user("wait"), started[-1]]})
    assert other.text is not None and "I did not restart the api" in other.text


def test_turn_at_least_tells_a_reply_from_the_first_message() -> None:
    data = {
        "pick": [
            {
                "scenario": {
                    "rules": [{"when": {"role": "user", "turn_at_least": 1}, "reply": {"text": "a reply"}}],
                    "turns": [{"text": "first answer"}],
                }
            }
        ]
    }
    script = parse_scenario_set(data, "inline")
    assert script({"messages": [user("hi")]}).text == "first answer"
    assert (
        script({"messages": [user("hi"), {"role": "assistant", "content": "x"}, user("?")]}).text == "a reply"
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"pick": []}, "pick: expected a list"),
        ({"pick": [{"scenario": "no-such-scenario"}]}, "no-such-scenario.yaml: cannot read"),
        ({"pick": [{"when": {"role": "user"}, "scenario": "disk-full"}]}, "pick[0].when: unknown key 'role'"),
        ({"pick": [{"when": {"matches": "("}, "scenario": "disk-full"}]}, "not a valid regular expression"),
        ({"pick": [{"scenario": 3}]}, "pick[0]: scenario: expected a name"),
    ],
)
def test_scenario_set_mistakes_name_the_place(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError, match=re.escape(message)):
        parse_scenario_set(data, "set.yaml")


def test_a_plain_scenario_loads_as_itself_and_serves_over_http(tmp_path: Path) -> None:
    path = tmp_path / "one.yaml"
    path.write_text("name: one\nturns: [{text: 'logs in ${log_dir}, 100$$'}]\n")
    script = load_script(path, {"log_dir": "/x"})
    assert not isinstance(script, ScenarioSet)
    with OpenAIServer(fallback=script) as server:
        import httpx

        body = {"model": "m", "messages": [user("hi")]}
        answer = httpx.post(f"{server.url}/chat/completions", json=body, timeout=5).json()
    assert answer["choices"][0]["message"]["content"] == "logs in /x, 100$"


# -- the simulated host -----------------------------------------------------------------------------


def test_the_host_has_dated_rotated_logs_and_a_systemctl_that_records_restarts(tmp_path: Path) -> None:
    now = time.time()
    host = build_host(tmp_path / "host", tmp_path / "bin", now=now)
    api = sorted((host.log_dir / "api").iterdir())
    assert api[0].name == "api.log" and len(api) == 10
    oldest = api[1]
    assert re.fullmatch(r"api\.log-\d{8}", oldest.name) and oldest.stat().st_size > 4_000_000
    assert now - oldest.stat().st_mtime > 8 * 86400
    assert "retrying now (attempt 3391" in (host.log_dir / "api" / "api.log").read_text()
    assert (host.log_dir / "nginx" / "access.log.2.gz").read_bytes()[:2] == b"\x1f\x8b"

    systemctl = str(host.bin_dir / "systemctl")
    show = [systemctl, "show", "--no-pager", "--property=Id,ActiveState,MainPID", "api"]
    before = subprocess.run(show, capture_output=True, text=True, check=True).stdout
    assert before.splitlines() == ["Id=api.service", "ActiveState=active", "MainPID=2314"]
    subprocess.run([systemctl, "restart", "--no-ask-password", "api"], check=True)
    after = subprocess.run(show, capture_output=True, text=True, check=True).stdout
    assert "MainPID=2314" not in after
    assert "restart api.service" in (host.state_dir / "journal.log").read_text()
    assert "Started api.service" in (host.log_dir / "api" / "api.log").read_text()
    missing = subprocess.run([systemctl, "restart", "nope"], capture_output=True, text=True)
    assert missing.returncode == 5 and "Unit nope.service not found" in missing.stderr
    assert systemctl_main(["show", "--property=LoadState", "nope"], str(host.root)) == 0


# -- python -m emulator.demo ------------------------------------------------------------------------


class DemoProcess:
    """``python -m emulator.demo`` in a fresh folder, its output in a file."""

    def __init__(self, directory: Path, *extra: str) -> None:
        self.directory = directory
        self.output = directory.parent / "demo-output.txt"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "CHATOPS_", "LLM_"))}
        env["REDIS_URL"] = "redis://127.0.0.1:1/0"  # nothing answers there: the demo embeds its own
        with open(self.output, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "emulator.demo", "--dir", str(directory), "--no-browser", *extra],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def wait_for_line(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        def probe() -> re.Match[str] | None:
            if self.process.poll() is not None:
                raise AssertionError(f"the demo exited with {self.process.returncode}:\n{self.text()}")
            return re.search(pattern, self.text())

        return wait_for(probe, timeout, f"{pattern!r} in the demo's output")

    def close(self) -> None:
        """Ctrl-C if still running (a failed test), so the demo's children and Redis go too."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[DemoProcess]:
    process = DemoProcess(tmp_path / "demo", "--port", "0", "--latency", "0")
    yield process
    process.close()
    sys.stderr.write(f"--- demo output ---\n{process.text()[-4000:]}\n")


def buttons(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for b in message.get("blocks") or [] if b["type"] == "actions" for e in b["elements"]]


@pytest.mark.slow
def test_the_demo_starts_from_nothing_runs_the_seed_incident_and_stops_cleanly(demo: DemoProcess) -> None:
    redis_pid = int(demo.wait_for_line(r"embedded redis-server \(pid (\d+)").group(1))
    page = demo.wait_for_line(r"Open (http://127\.0\.0\.1:\d+/) ").group(1)
    assert "Ctrl-C stops everything" in demo.text()
    children = psutil.Process(demo.process.pid).children(recursive=True)
    started = [*children, psutil.Process(redis_pid)]
    commands = [" ".join(c.cmdline()) for c in children]
    assert any("bot.ops.cli web" in c for c in commands) and any("bot.ops.cli worker" in c for c in commands)
    with urllib_open(page) as response:
        assert b"Slack emulator" in response.read()

    control = SlackEmulatorClient(page)
    log_dir = demo.directory / "host" / "var" / "log"
    old_logs = sorted((log_dir / "api").glob("api.log-*"))[:6]
    assert old_logs
    ts = control.post_message("#incident", "alice", "@ops web-03 is out of disk, deal with it")["ts"]
    card = control.wait_for_reply("incident", ts, lambda m: "chatops_approve" in str(buttons(m)), timeout=30)
    assert "clean_old_logs" in card["text"]
    assert "Dry run: clean_old_logs would delete" in json.dumps(card["blocks"])
    assert all(path.exists() for path in old_logs)  # nothing deleted before the Approve

    approve = next(b for b in buttons(card) if b["action_id"] == "chatops_approve")
    assert approve["confirm"]["style"] == "danger"  # destructive: the page asks to confirm
    assert control.click(card["ts"], "bob", action_id="chatops_approve")["ok"]
    answer = control.wait_for_reply("incident", ts, lambda m: m["text"].startswith("Done."), timeout=30)
    assert "Deleted 6 of 6 planned files" in answer["text"]
    assert "approved by U_BOB" in answer["text"]  # confirmed_by, written into the call
    assert not any(path.exists() for path in old_logs)
    assert (log_dir / "api" / "api.log").exists()

    # The restart goes through the real service_restart tool to the demo host's systemctl.
    ts = control.post_message("#incident", "alice", "@ops the api on web-03 is burning CPU, restart it")["ts"]
    card = control.wait_for_reply("incident", ts, lambda m: "chatops_approve" in str(buttons(m)), timeout=30)
    assert "service_restart" in card["text"]
    control.click(card["ts"], "bob", action_id="chatops_approve")
    answer = control.wait_for_reply("incident", ts, lambda m: m["text"].startswith("Restarted"), timeout=30)
    assert "api.service: active (running)" in answer["text"] and "main PID 2314" not in answer["text"]
    journal = demo.directory / "host" / "run" / "systemd" / "journal.log"
    assert "restart api.service (simulated by the chatops demo)" in journal.read_text()

    demo.process.send_signal(signal.SIGINT)
    assert demo.process.wait(timeout=30) == 0
    assert "chatops demo: stopped" in demo.text()
    _, alive = psutil.wait_procs(started, timeout=5)
    assert not alive, f"still running after Ctrl-C: {[p.pid for p in alive]}"
    assert (demo.directory / "redis" / "redis.db").exists()  # the embedded Redis kept its data there
    assert (demo.directory / "logs" / "worker.log").stat().st_size > 0


def urllib_open(url: str) -> Any:
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    return opener.open(url, timeout=5)
