"""The local demo: its scenarios, its two simulated hosts, and ``python -m emulator.demo`` from start to Ctrl-C.

The launcher tests are what ``make demo`` does: no settings in the environment, and a Redis
answering at ``REDIS_URL`` that the demo must leave alone (it embeds its own). One demo process serves the module (started by
the first test that needs it, stopped with Ctrl-C at the end, when every process it started must
be gone); each test drives one incident through the emulator's control API, the way a user does
on the page, and checks what happened on each simulated host's files.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import redis
import yaml

from bot.keys import Keys
from bot.memory.notes import SIMILAR_NOTE
from emulator.demo.commands import percent_used
from emulator.demo.env import common_env, runner_env
from emulator.demo.fleet import scenario_variables
from emulator.demo.host import DemoHost, build_host
from emulator.demo.main import RETRY_DELAYS, Demo, DemoError
from emulator.demo.options import Options
from emulator.demo.processes import free_port
from emulator.demo.system import HostSystem
from emulator.demo.systemctl import systemctl_main
from emulator.embedded_redis import RedisServer
from emulator.models.openai_server import OpenAIServer
from emulator.models.scenario import (
    ScenarioError,
    ScenarioSet,
    load_script,
    parse_scenario,
    parse_scenario_set,
)
from emulator.slack import SlackEmulatorClient
from tests.support.waiting import wait_for
from tools.runbooks import RunbookIndex

ROOT = Path(__file__).resolve().parents[2]
HOSTS = [
    DemoHost(Path(f"/srv/{n}"), Path(f"/srv/{n}/var/log"), Path(f"/srv/bin/{n}"), n)
    for n in ("web-03", "db-01")
]
ANSWER_TIMEOUT = 180  # a hang guard: the demo's processes share a busy machine with the suite
# The report's first log line (``emulator.demo.incident.statement_line``) as the answer cites it:
# verified (a link to its step: mrkdwn when posted, Markdown when streamed), the quote on one line.
STATEMENT_CITED = (
    r"when it started: \[(?:<[^|>\s]+\|E\d+ · tail_log[^>]*>|\[E\d+ · tail_log[^\]]*\]\([^)\s]+\)) `[^`]*"
    r"\[31877\] reporting@orders LOG: statement: SELECT c\.region, sum\(i\.amount\)"
)


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
    script = load_script("demo", scenario_variables(HOSTS))
    assert isinstance(script, ScenarioSet)
    return script


def test_the_demo_set_picks_a_scenario_by_the_first_user_message(demo_script: ScenarioSet) -> None:
    names = [
        "unknown-target",
        "what-changed",
        "db-load",
        "high-cpu",
        "scale-pool",
        "restart-api",
        "disk-full",
    ]
    assert [s.name for s in demo_script.scenarios] == names
    for text, name in [
        ("@ops the api on web-03 is burning CPU, restart it", "high-cpu"),
        ("@ops web-03 is out of disk, deal with it", "disk-full"),
        ("@ops restart the api on web-03", "restart-api"),
        ("@ops scale the web pool on web-03 to 6", "scale-pool"),
        ("<@U0BOB> asked to undo pool_scale (call c1)", "scale-pool"),  # an Undo click's run
        ("@ops check db-01's load", "db-load"),  # "load" is a high-cpu word: the host decides first
        ("@ops what about WEB-99?", "unknown-target"),
        ("@ops what changed on web-03 today?", "what-changed"),
        ("@ops did anything change on db-01?", "db-load"),  # db-01's changes: not this script's
        ("the disk on web-03 is full", "disk-full"),
        ("hello", "fallback"),  # nothing it knows: the honest list, not an incident
    ]:
        assert demo_script.pick([user(text)]).name == name, text
    # Later messages do not move a conversation to another scenario.
    later = [user("web-03 is out of disk"), assistant_call("disk_usage", "c1"), user("what about web-99?")]
    assert demo_script.pick(later).name == "disk-full"


def test_the_bots_notes_of_past_incidents_do_not_pick_the_scenario(demo_script: ScenarioSet) -> None:
    """The similar incidents after the request (``bot.memory.notes``) are the bot's words, not the
    person's: a restart asked on a host whose last incident was a full disk is still a restart."""
    past = "\n".join(
        [SIMILAR_NOTE, "abc | 2026-12-01 | why: target web-03", "   asked: web-03 is out of disk"]
    )
    assert demo_script.pick([user(f"restart the api on web-03\n\n{past}")]).name == "restart-api"
    assert demo_script.pick([user(f"hello\n\n{past}")]).name == "fallback"
    assert demo_script.pick([user(f"web-03 is out of disk\n\n{past}")]).name == "disk-full"


def test_every_scripted_call_names_its_target_and_stays_in_that_hosts_folders(
    demo_script: ScenarioSet,
) -> None:
    expected = {
        "disk-full": "web-03",
        "high-cpu": "web-03",
        "restart-api": "web-03",
        "scale-pool": "web-03",
        "db-load": "db-01",
        "what-changed": "web-03",
    }
    for scenario in demo_script.scenarios:
        replies = [*scenario.turns, *(rule.reply for rule in scenario.rules)]
        calls = [call for reply in replies for call in reply.get("tool_calls") or []]
        assert calls, scenario.name
        host = expected.get(scenario.name, "web-99")
        for call in calls:
            if call["name"] == "prometheus_range":  # the worker asks Prometheus about that host alone
                assert f'instance="{host}:9100"' in call["arguments"]["query"], (scenario.name, call)
                continue
            target = call["arguments"]["target"]
            assert target == host, (scenario.name, call)
            path = call["arguments"].get("path")
            assert path is None or path.startswith(f"/srv/{target}/var/log"), (scenario.name, call)


def test_host_variables_fill_tool_arguments_and_texts(demo_script: ScenarioSet) -> None:
    reply = demo_script({"messages": [user("web-03 is out of disk")]})
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [
        ("disk_usage", {"target": "web-03", "path": "/srv/web-03/var/log"})
    ]
    conversation = [user("web-03 is out of disk")]
    steps = ["disk_usage", "largest_files", "update_findings", "clean_old_logs", "disk_usage"]
    for number, name in enumerate(steps):
        conversation += [
            assistant_call(name, f"c{number}"),
            tool(f"c{number}", f"[E{number + 1}] [web-03] {name} said {{this}}"),
        ]
    answer = demo_script({"messages": conversation}).text or ""
    assert "[web-03] clean_old_logs said {this}" in answer  # tool results are quoted as they are
    assert "[E4] [web-03] clean_old_logs" not in answer  # without the runtime's evidence label
    assert "its logs are real files in `/srv/web-03/var/log`" in answer
    [load, chart, top] = demo_script({"messages": [user("check db-01's load")]}).tool_calls
    assert (load.name, load.arguments) == ("cpu_load", {"target": "db-01"})
    assert (chart.name, chart.arguments) == (
        "prometheus_range",
        {"query": 'node_load1{instance="db-01:9100"}', "minutes": 60},
    )
    assert (top.name, top.arguments) == ("top_processes", {"target": "db-01", "sort_by": "pcpu", "limit": 5})


@pytest.mark.parametrize(
    "text", ["@ops helo", "@ops " + "please look into the thing from yesterday " * 20, ""]
)
def test_an_unrecognised_request_gets_the_list_of_scenarios_and_no_tool_call(
    demo_script: ScenarioSet, text: str
) -> None:
    reply = demo_script({"messages": [user(text)]})
    assert not reply.tool_calls  # no clean-up, no restart: nothing runs for what it does not know
    assert reply.text is not None and reply.text.startswith("This demo model only knows these scenarios:\n")
    listed = [line.removeprefix("• ") for line in reply.text.splitlines() if line.startswith("• ")]
    assert listed == list(demo_script.examples) and len(listed) == len(demo_script.scenarios)


def test_a_disk_check_that_finds_no_full_disk_cleans_nothing(demo_script: ScenarioSet) -> None:
    df = "Filesystem     Type   Size  Used Avail Use% Mounted on\n/dev/vdb       ext4    55M   24M   31M  {}% /var/log"
    started = [user("web-03 is out of disk"), assistant_call("disk_usage", "c1")]
    calm = demo_script({"messages": [*started, tool("c1", "[E1] [web-03] " + df.format(43))]})
    [call] = calm.tool_calls  # no fault: it says so in its findings, citing the line that shows it
    assert call.name == "update_findings"
    findings = json.loads(call.arguments_json)
    assert findings["conclusion"] == "no_fault_found" and findings["hypotheses"][0]["status"] == "refuted"
    assert findings["hypotheses"][0]["evidence"] == [
        {"ref": "E1", "quote": "/dev/vdb       ext4    55M   24M   31M  43% /var/log"}
    ]
    recorded = "[E2] Findings recorded (update 1). Shown: conclusion no_fault_found, confidence medium."
    said = demo_script(
        {
            "messages": [
                *started,
                tool("c1", "[E1] [web-03] " + df.format(43)),
                *step("update_findings", recorded),
            ]
        }
    )
    assert not said.tool_calls and said.text is not None
    assert (
        said.text.startswith("web-03 is not out of disk, so I cleaned nothing")
        and " 43% /var/log" in said.text
    )
    assert '[E1: "/dev/vdb       ext4    55M   24M   31M  43% /var/log"]' in said.text
    calls = demo_script({"messages": [*started, tool("c1", "[web-03] " + df.format(98))]}).tool_calls
    assert [c.name for c in calls] == ["largest_files", "update_findings"]  # full: on with the story
    calls = demo_script({"messages": [*started, tool("c1", "Error: the runner is gone")]}).tool_calls
    assert calls[0].name == "largest_files"  # no df table: it does not claim the disk is fine
    nothing = demo_script(
        {
            "messages": [
                *started,
                tool("c1", df.format(98)),
                assistant_call("largest_files", "c2"),
                tool("c2", "..."),
                assistant_call("clean_old_logs", "c3"),
                tool("c3", "Nothing to do: no file matched"),
            ]
        }
    )
    assert (
        nothing.text is not None and nothing.text.startswith("I deleted nothing") and not nothing.tool_calls
    )


def step(name: str, content: str) -> list[dict[str, Any]]:
    """One assistant call of ``name`` and its result."""
    return [assistant_call(name, f"s-{name}"), tool(f"s-{name}", content)]


def test_a_reply_while_the_restart_waits_turns_to_the_log(demo_script: ScenarioSet) -> None:
    started = [
        user("the api on web-03 is burning CPU, restart it"),
        assistant_call("top_processes", "c1"),
        tool("c1", "..."),
        assistant_call("service_status", "c2"),
        tool("c2", "[web-03] api.service: active (running)"),
        assistant_call("service_restart", "c3"),
        tool("c3", "Error: declined: superseded by a new message"),
    ]
    redirect = user("don't restart it, show me the logs first")
    for conversation in ([*started, redirect], [*started[:-1], redirect, started[-1]]):
        [call] = demo_script({"messages": conversation}).tool_calls
        assert (call.name, call.arguments) == (
            "tail_log",
            {"target": "web-03", "path": "/srv/web-03/var/log/api/api.log", "lines": 12},
        )
    answer = demo_script(
        {"messages": [*started, redirect, assistant_call("tail_log", "c4"), tool("c4", "attempt 3391")]}
    )
    assert answer.text is not None and answer.text.startswith("OK, I have not restarted anything")
    assert "attempt 3391" in answer.text
    # Any other reply while it works stops the plan instead of restarting.
    other = demo_script({"messages": [*started[:-1], user("wait"), started[-1]]})
    assert other.text is not None and "I did not restart the api" in other.text


@pytest.mark.parametrize("placeholder", ["${web-3.log_dir}", "${Web 03}", "${db-01.logdir}", "${}"])
def test_a_typo_in_a_host_variable_stops_the_load_at_its_place(placeholder: str) -> None:
    data = {"turns": [{"tool_calls": [{"name": "tail_log", "arguments": {"path": f"{placeholder}/x"}}]}]}
    place = "one.yaml: turns[0].tool_calls[0].arguments.path"
    with pytest.raises(ScenarioError, match=re.escape(f"{place}: unknown variable {placeholder}")):
        parse_scenario(data, "one.yaml", scenario_variables(HOSTS))
    with pytest.raises(ScenarioError, match=r"unknown variable .*\(known: \$\{db-01\.host_root\}"):
        parse_scenario({"turns": [{"text": f"see {placeholder}"}]}, "one.yaml", scenario_variables(HOSTS))


def test_values_are_inserted_once_and_literally() -> None:
    hostile = {
        "web-03.log_dir": "/srv/${db-01.log_dir}/{last_tool_result}/$(rm -rf ~);`id`",
        "db-01.log_dir": "/db",
    }
    data = {
        "turns": [
            {"tool_calls": [{"name": "tail_log", "arguments": {"path": "${web-03.log_dir}/a"}}]},
            {"text": "in ${web-03.log_dir}, costs $$5, $HOME stays"},
        ]
    }
    scenario = parse_scenario(data, "one.yaml", hostile)
    [call] = scenario({"messages": [user("hi")]}).tool_calls
    assert call.arguments == {"path": "/srv/${db-01.log_dir}/{last_tool_result}/$(rm -rf ~);`id`/a"}
    text = scenario({"messages": [user("hi"), assistant_call("tail_log", "c1"), tool("c1", "secret")]}).text
    assert text == "in /srv/${db-01.log_dir}/{last_tool_result}/$(rm -rf ~);`id`, costs $5, $HOME stays"


def test_the_unknown_target_answer_quotes_the_error_and_asks(demo_script: ScenarioSet) -> None:
    [call] = demo_script({"messages": [user("what about web-99?")]}).tool_calls
    assert (call.name, call.arguments) == ("cpu_load", {"target": "web-99"})
    error = "Error: no such target 'web-99' for cpu_load; the targets are db-01, web-03."
    answer = demo_script(
        {"messages": [user("what about web-99?"), assistant_call("cpu_load", "c1"), tool("c1", error)]}
    )
    assert answer.text is not None and "there is no such target" in answer.text and error in answer.text


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


def test_turn_at_least_and_a_plain_scenario_over_http(tmp_path: Path) -> None:
    rules = [{"when": {"role": "user", "turn_at_least": 1}, "reply": {"text": "a reply"}}]
    script = parse_scenario_set(
        {"pick": [{"scenario": {"rules": rules, "turns": [{"text": "first"}]}}]}, "inline"
    )
    assert script({"messages": [user("hi")]}).text == "first"
    assert (
        script({"messages": [user("hi"), {"role": "assistant", "content": "x"}, user("?")]}).text == "a reply"
    )
    path = tmp_path / "one.yaml"
    path.write_text("name: one\nturns: [{text: 'logs in ${log_dir}, 100$$'}]\n")
    plain = load_script(path, {"log_dir": "/x"})  # the first host's, for older scenario files
    assert not isinstance(plain, ScenarioSet)
    with OpenAIServer(fallback=plain) as server:
        import httpx

        body = {"model": "m", "messages": [user("hi")]}
        answer = httpx.post(f"{server.url}/chat/completions", json=body, timeout=5).json()
    assert answer["choices"][0]["message"]["content"] == "logs in /x, 100$"


# -- the simulated hosts and their runners' environment --------------------------------------------


def systemctl(host: DemoHost, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(host.bin_dir / "systemctl"), *args], capture_output=True, text=True)


def test_web_03_has_dated_rotated_logs_and_a_systemctl_that_records_restarts(tmp_path: Path) -> None:
    now = time.time()
    host = build_host(tmp_path / "host", tmp_path / "bin", now=now)
    api = sorted((host.log_dir / "api").iterdir())
    assert api[0].name == "api.log" and len(api) == 10
    oldest = api[1]
    assert re.fullmatch(r"api\.log-\d{8}", oldest.name) and oldest.stat().st_size > 4_000_000
    assert now - oldest.stat().st_mtime > 8 * 86400
    assert "retrying now (attempt 3391" in (host.log_dir / "api" / "api.log").read_text()
    assert (host.log_dir / "nginx" / "access.log.2.gz").read_bytes()[:2] == b"\x1f\x8b"

    show = ["show", "--no-pager", "--property=Id,ActiveState,MainPID", "api"]
    assert systemctl(host, *show).stdout.splitlines() == [
        "Id=api.service",
        "ActiveState=active",
        "MainPID=2314",
    ]
    assert systemctl(host, "restart", "--no-ask-password", "api").returncode == 0
    assert "MainPID=2314" not in systemctl(host, *show).stdout
    assert "web-03 systemctl" in (host.state_dir / "journal.log").read_text()
    assert "Started api.service" in (host.log_dir / "api" / "api.log").read_text()
    missing = systemctl(host, "restart", "nope")
    assert missing.returncode == 5 and "Unit nope.service not found" in missing.stderr
    assert systemctl_main(["show", "--property=LoadState", "nope"], str(host.root)) == 0


def waiting_for_a_lock(pid: int) -> bool:
    """Whether ``pid`` waits for a lock someone else holds (a blocked entry of ``/proc/locks``)."""
    entries = Path("/proc/locks").read_text().splitlines()
    return any("->" in line and line.split()[5] == str(pid) for line in entries if len(line.split()) > 5)


def test_one_systemctl_at_a_time_changes_a_hosts_units(tmp_path: Path) -> None:
    """A run's read-only tools of one turn run in parallel: two reads of a unit that fails after its
    next read both loaded its count before either saved it, and both saw it running."""
    import fcntl

    host = build_host(tmp_path / "host", tmp_path / "bin", now=time.time())
    units = host.state_dir / "units.json"
    before = units.read_text()
    with open(host.state_dir / "units.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as another systemctl of this host, mid-change
        restart = subprocess.Popen(
            [str(host.bin_dir / "systemctl"), "restart", "api"], stdout=subprocess.PIPE, text=True
        )
        try:
            wait_for(lambda: waiting_for_a_lock(restart.pid), what="the restart to wait for the lock")
            assert units.read_text() == before  # it waits before it reads anything
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            restart.communicate(timeout=60)
    assert restart.returncode == 0
    assert units.read_text() != before


def test_a_unit_name_with_a_dot_is_a_service_unless_it_ends_with_a_unit_type(tmp_path: Path) -> None:
    # systemctl adds .service to php8.3-fpm (".3-fpm" is no unit type), not to nginx.socket
    host = build_host(tmp_path / "host", tmp_path / "bin", now=time.time())
    units = json.loads((host.state_dir / "units.json").read_text())
    units["php8.3-fpm.service"] = {**units["nginx.service"], "Id": "php8.3-fpm.service"}
    (host.state_dir / "units.json").write_text(json.dumps(units))
    show = ["show", "--no-pager", "--property=Id,LoadState"]
    assert systemctl(host, *show, "php8.3-fpm").stdout.splitlines() == [
        "Id=php8.3-fpm.service",
        "LoadState=loaded",
    ]
    assert systemctl(host, *show, "nginx.socket").stdout.splitlines() == [
        "Id=nginx.socket",
        "LoadState=not-found",
    ]


def test_db_01_is_a_host_of_its_own_with_a_healthy_postgresql(tmp_path: Path) -> None:
    web = build_host(tmp_path / "hosts" / "web-03", tmp_path / "bin" / "web-03", name="web-03")
    db = build_host(tmp_path / "hosts" / "db-01", tmp_path / "bin" / "db-01", name="db-01")
    assert (db.root / "etc" / "hostname").read_text() == "db-01\n" and dict(db.labels) == {
        "env": "prod",
        "role": "db",
    }
    live = (db.log_dir / "postgresql" / "postgresql-15-main.log").read_text()
    assert "orders@orders LOG:  duration:" in live and "checkpoint complete" in live
    assert "reporting@orders" not in live and "FATAL" not in live  # no incident until the alert button
    assert not (db.log_dir / "api").exists()  # nothing of web-03's story here
    assert "MainPID=1187" in systemctl(db, "show", "--property=MainPID", "postgresql").stdout
    assert systemctl(db, "restart", "api").returncode == 5  # db-01 has no api
    assert systemctl(db, "restart", "postgresql").returncode == 0
    assert "db-01 systemctl" in (db.state_dir / "journal.log").read_text()
    assert not (web.state_dir / "journal.log").exists()  # its own systemctl state: web-03 untouched
    assert "MainPID=902" in systemctl(web, "show", "--property=MainPID", "postgresql").stdout
    with pytest.raises(ValueError, match="no simulated host 'web-99'"):
        build_host(tmp_path / "web-99", tmp_path / "bin" / "web-99", name="web-99")


def test_a_runner_gets_its_host_and_no_credentials_whatever_the_shell_holds(tmp_path: Path) -> None:
    shell = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/root",
        "SLACK_BOT_TOKEN": "xoxb-real",
        "CHATOPS_LOG_DIRS": "/",  # the developer's own settings never reach the demo's children
        "LLM_API_KEY": "sk-real",
        "ANTHROPIC_API_KEY": "sk-ant",
        "GITHUB_TOKEN": "ghp_x",
        "AWS_SECRET_ACCESS_KEY": "aws",
        "PGPASSWORD": "pg",
    }
    common = common_env(
        redis_url="redis://r",
        key_prefix="p:",
        queue="q",
        inventory=tmp_path / "i.yaml",
        runner_secret="s3",
        shell=shell,
    )
    assert "CHATOPS_LOG_DIRS" not in common and "SLACK_BOT_TOKEN" not in common
    env = runner_env({**common, "SLACK_SIGNING_SECRET": "x", "LLM_BASE_URL": "http://llm"}, HOSTS[1])
    assert env["CHATOPS_LOG_DIRS"] == "/srv/db-01/var/log" and env["PATH"] == "/srv/bin/db-01:/usr/bin:/bin"
    assert env["CHATOPS_RUNNER_SECRET"] == "s3" and env["CHATOPS_SERVICE_BACKEND"] == "systemd"
    assert env["CHATOPS_INVENTORY_FILE"] == str(tmp_path / "i.yaml") and env["HOME"] == "/root"
    assert not [name for name in env if name.startswith(("SLACK_", "LLM_"))]
    credentials = {"xoxb-real", "sk-real", "sk-ant", "ghp_x", "aws", "pg", "x", "http://llm"}
    assert not credentials & set(env.values())


def test_the_demo_writes_its_two_runbooks_for_its_bot_each_indexed(tmp_path: Path) -> None:
    folder = Demo(Options(directory=tmp_path, open_browser=False), out=io.StringIO())._write_runbooks()
    assert folder == tmp_path.resolve() / "runbooks"
    index = RunbookIndex(folder)
    assert index.problems == ()
    disk = index.best_for_alert("HostDiskFull", {"instance": "web-03:9100"})
    cpu = index.best_for_alert("HostHighCpuLoad", {"instance": "db-01:9100"})
    assert disk is not None and disk.id == "disk/disk-full.md"
    assert cpu is not None and cpu.id == "cpu/high-cpu.md"
    # Nothing matches the demo's own alert: its run starts as it always has.
    assert index.best_for_alert("PostgresHighLoad", {"instance": "db-01:9100"}) is None


@pytest.mark.parametrize("name", ["demo:x", "demo,x"])
def test_a_folder_that_would_split_path_or_log_dirs_is_refused_before_any_host_is_built(
    tmp_path: Path, name: str
) -> None:
    out = io.StringIO()
    demo = Demo(Options(directory=tmp_path / name, open_browser=False), out=out)
    with pytest.raises(
        DemoError, match="would split its hosts' PATH or CHATOPS_LOG_DIRS: choose another with --dir"
    ):
        demo.start()
    demo.stop()
    assert not (tmp_path / name / "hosts").exists() and not demo.children


def test_a_typo_in_a_scenario_file_stops_the_demo_before_it_starts_any_process(tmp_path: Path) -> None:
    scenario = tmp_path / "typo.yaml"
    scenario.write_text(
        "turns: [{tool_calls: [{name: tail_log, arguments: {path: '${web-3.log_dir}/api'}}]}]\n"
    )
    demo = Demo(
        Options(directory=tmp_path / "demo", scenario=str(scenario), open_browser=False), out=io.StringIO()
    )
    with pytest.raises(
        DemoError, match=re.escape("unknown variable ${web-3.log_dir} (known: ${db-01.host_root}")
    ):
        demo.start()
    demo.stop()
    assert demo.redis is None and demo.llm is None and not demo.children


# -- python -m emulator.demo ------------------------------------------------------------------------


class DemoProcess:
    """``python -m emulator.demo`` in a fresh folder, its output in a file."""

    def __init__(self, directory: Path, *extra: str, shell_redis: str = "redis://127.0.0.1:1/0") -> None:
        self.directory = directory
        self.output = directory.parent / "demo-output.txt"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "CHATOPS_", "LLM_"))}
        env["REDIS_URL"] = shell_redis  # answering or not, the demo embeds its own unless --redis-url
        with open(self.output, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "emulator.demo", "--dir", str(directory), "--no-browser", *extra],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.early = ""  # the ts of the mention posted as soon as the page answered
        self.output_when_served = ""
        self.started: list[psutil.Process] = []  # every process it started (their children too)
        self.direct: list[psutil.Process] = []  # the ones it started itself
        self.control: SlackEmulatorClient | None = None

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def wait_for_line(self, pattern: str, timeout: float = 90) -> re.Match[str]:
        def probe() -> re.Match[str] | None:
            if self.process.poll() is not None:
                raise AssertionError(f"the demo exited with {self.process.returncode}:\n{self.text()}")
            return re.search(pattern, self.text())

        return wait_for(probe, timeout, f"{pattern!r} in the demo's output")

    def host(self, name: str) -> Path:
        return self.directory / "hosts" / name

    def children(self, command: str) -> list[psutil.Process]:
        return [p for p in self.direct if command in " ".join(p.cmdline())]

    def close(self) -> None:
        """Ctrl-C if still running (a failed test), so the demo's children and Redis go too."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


EARLY_MENTION = "@ops check db-01's load"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer) -> Iterator[DemoProcess]:
    """One demo for the module; at the end, Ctrl-C must stop every process it started.

    A mention is posted the moment the page answers, long before the bot can take it (the web
    process starts after the runners): ``early`` is its ts, ``output_when_served`` what the
    console said then.
    """
    port = free_port()
    process = DemoProcess(
        tmp_path_factory.mktemp("demo") / "demo",
        "--port",
        str(port),
        "--latency",
        "0",
        shell_redis=redis_server.url,  # the machine's Redis answers, and is not used
    )
    try:
        page = f"http://127.0.0.1:{port}/"
        wait_for(lambda: page_answers(process, page), 90, "the page to answer")
        process.control = SlackEmulatorClient(page)
        process.early = mention(process, EARLY_MENTION)
        process.output_when_served = process.text()
        redis_pid = int(process.wait_for_line(r"embedded redis-server \(pid (\d+)").group(1))
        assert process.wait_for_line(r"Open (http://127\.0\.0\.1:\d+/) ", 180).group(1) == page
        process.direct = psutil.Process(process.process.pid).children()
        process.started = [
            *psutil.Process(process.process.pid).children(recursive=True),
            psutil.Process(redis_pid),
        ]
        yield process
        process.process.send_signal(signal.SIGINT)
        assert process.process.wait(timeout=40) == 0
        assert "chatops demo: stopped" in process.text()
        _, alive = psutil.wait_procs(process.started, timeout=30)
        assert not alive, f"still running after Ctrl-C: {[p.pid for p in alive]}"
        assert (process.directory / "redis" / "redis.db").exists()  # the embedded Redis kept its data there
    finally:
        process.close()
        sys.stderr.write(f"--- demo output ---\n{process.text()[-4000:]}\n")


def page_answers(process: DemoProcess, url: str) -> bool:
    if process.process.poll() is not None:
        raise AssertionError(f"the demo exited with {process.process.returncode}:\n{process.text()}")
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=2) as answer:
            return int(answer.status) == 200
    except OSError:
        return False


def buttons(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for b in message.get("blocks") or [] if b["type"] == "actions" for e in b["elements"]]


def has_approve(message: dict[str, Any]) -> bool:
    return "chatops_approve" in str(buttons(message))


def mention(demo: DemoProcess, text: str) -> str:
    assert demo.control is not None
    return str(demo.control.post_message("#incident", "alice", text)["ts"])


def reply(demo: DemoProcess, ts: str, starts: str) -> dict[str, Any]:
    """The thread's message with a line starting with ``starts`` (the bot may put a line of its own,
    such as its "No fault found", above the model's answer), once it is complete: a streamed answer
    once stopped (``SlackEmulatorClient.wait_for_reply``)."""
    assert demo.control is not None
    line = re.compile(rf"(?m)^{re.escape(starts)}")
    return demo.control.wait_for_reply("incident", ts, lambda m: bool(line.search(m["text"])), ANSWER_TIMEOUT)


def approval_card(demo: DemoProcess, ts: str) -> dict[str, Any]:
    assert demo.control is not None
    return demo.control.wait_for_reply("incident", ts, has_approve, ANSWER_TIMEOUT)


def files(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root``: its size and modification time."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file()
    }


def remembered(demo: DemoProcess, question: str) -> str:
    """The line of ``chatops memory list`` (run with the demo worker's settings) of the incident
    whose question says ``question``, once the run's end has stored it."""
    [worker] = demo.children("bot.ops.cli worker")
    env = worker.environ()

    def listed() -> str | None:
        done = subprocess.run(
            [sys.executable, "-m", "bot.ops.cli", "memory", "list"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return next((line for line in done.stdout.splitlines() if question in line), None)

    return wait_for(listed, ANSWER_TIMEOUT, f"the incident of {question!r} in the memory")


def journal(demo: DemoProcess, name: str) -> str:
    path = demo.host(name) / "run" / "systemd" / "journal.log"
    return path.read_text() if path.exists() else ""


@pytest.mark.slow
def test_the_demos_worker_offers_the_runbook_tools_on_its_two_runbooks(demo: DemoProcess) -> None:
    from bot.ops.compose import runbook_tools
    from tools.runbooks import RunbookLibrary

    [worker] = [p for p in demo.children("worker") if "runner" not in " ".join(p.cmdline())]
    folder = Path(worker.environ()["CHATOPS_RUNBOOKS_DIR"])
    assert folder == demo.directory.resolve() / "runbooks"
    index = RunbookIndex(folder)  # what the worker indexed from that setting (bot.ops.compose)
    assert {tool.name for tool in runbook_tools(RunbookLibrary(index))} == {"search_runbooks", "read_runbook"}
    assert index.search("web-03 disk full")[0].runbook.id == "disk/disk-full.md"


@pytest.mark.slow
def test_the_demo_starts_two_hosts_each_with_a_runner_of_its_own(demo: DemoProcess) -> None:
    text = demo.text()
    assert re.search(r"host +web-03 \(env=prod, role=web\) simulated in ", text)
    assert re.search(r"host +db-01 \(env=prod, role=db\) simulated in ", text)
    assert "check db-01's load" in text and "Ctrl-C stops everything" in text
    inventory = yaml.safe_load((demo.directory / "inventory.yaml").read_text())
    assert inventory == {
        "targets": [
            {
                "name": "web-03",
                "via": "runner",
                "labels": {"env": "prod", "role": "web"},
                "watch": ["/etc/nginx"],
            },
            {
                "name": "db-01",
                "via": "runner",
                "labels": {"env": "prod", "role": "db"},
                "watch": ["/etc/pgbouncer"],
            },
        ]
    }
    secrets = set()
    for name in ("web-03", "db-01"):
        [runner] = demo.children(f"bot.ops.cli runner --target {name}")
        assert re.search(rf"runner +chatops runner --target {name} \(pid {runner.pid}\)", text)
        env = runner.environ()
        assert not [key for key in env if key.startswith(("SLACK_", "LLM_"))], sorted(env)
        assert env["CHATOPS_LOG_DIRS"] == str(demo.host(name) / "var" / "log")
        assert env["PATH"].split(os.pathsep)[0] == str(demo.directory / "bin" / name)
        secrets.add(env["CHATOPS_RUNNER_SECRET"])
    [worker] = demo.children("bot.ops.cli worker")
    [web] = demo.children("bot.ops.cli web")
    for bot in (worker, web):
        env = bot.environ()
        assert "CHATOPS_LOG_DIRS" not in env  # no host of its own: not its logs, not its systemctl
        assert not any(str(demo.directory) in entry for entry in env["PATH"].split(os.pathsep))
        secrets.add(env["CHATOPS_RUNNER_SECRET"])
    [secret] = secrets  # one secret, shared by web, worker and both runners
    assert len(secret) >= 32


@pytest.mark.slow
def test_web_03_out_of_disk_cleans_web_03_only_after_the_approval(demo: DemoProcess) -> None:
    assert demo.control is not None
    log_dir = demo.host("web-03") / "var" / "log"
    old_logs = sorted((log_dir / "api").glob("api.log-*"))[:6]
    db_before = files(demo.host("db-01"))
    ts = mention(demo, "@ops web-03 is out of disk, deal with it")
    card = approval_card(demo, ts)
    assert "clean_old_logs" in card["text"]
    blocks = json.dumps(card["blocks"])
    assert "Dry run: clean_old_logs would delete" in blocks and "`web-03` via runner" in blocks
    assert all(path.exists() for path in old_logs)  # nothing deleted before the Approve

    approve = next(b for b in buttons(card) if b["action_id"] == "chatops_approve")
    assert approve["confirm"]["style"] == "danger"  # destructive: the page asks to confirm
    assert demo.control.click(card["ts"], "bob", action_id="chatops_approve")["ok"]
    answer = reply(demo, ts, "Done.")
    assert "[web-03] Deleted 6 of 6 planned files" in answer["text"]
    # confirmed_by, written into the call, shown as the approver's mention (not a raw id)
    assert "approved by <@U_BOB>" in answer["text"] and "U_BOB)" not in answer["text"].replace("<@U_BOB>", "")
    assert not any(path.exists() for path in old_logs)
    assert (log_dir / "api" / "api.log").exists()
    assert files(demo.host("db-01")) == db_before  # db-01: not a file deleted, touched or added
    # "Disk now" is web-03's simulated /var/log volume, as its state says after the clean-up.
    web = HostSystem(demo.host("web-03"))
    [volume] = [disk for disk in web.machine.disks if disk.mount == "/var/log"]
    now = answer["text"].split("Disk now:", 1)[1]
    [row] = re.findall(r"^/dev/vdb .* (\d+)% /var/log$", now, re.MULTILINE)
    assert int(row) == percent_used(web.used(volume), volume.size) < 50

    # The finished run card's Postmortem draft: a Markdown file in the thread, its approval by bob in
    # the timeline.
    card_ts = demo.control.thread("incident", ts)[1]["ts"]
    assert demo.control.click(card_ts, "alice", action_id="chatops_postmortem")["ok"]
    [draft] = wait_for(
        lambda: [f for f in demo.control.files() if f["name"].startswith("postmortem-")],
        ANSWER_TIMEOUT,
        "the draft",
    )
    with urllib.request.urlopen(draft["url_private"], timeout=30) as answer_file:
        markdown = answer_file.read().decode()
    assert "## Timeline" in markdown and "U\\_BOB" in markdown and "clean\\_old\\_logs" in markdown

    # Asked again, the disk is not full: it says so, asks nobody and deletes nothing. The first
    # run's incident (its report's last step) is what the second starts from: "Similar:" in its thread.
    remembered(demo, "web-03 is out of disk")
    before = files(demo.host("web-03"))
    again = mention(demo, "@ops web-03 is out of disk, deal with it")
    calm = reply(demo, again, "web-03 is not out of disk, so I cleaned nothing")
    note = demo.control.wait_for_reply("incident", again, lambda m: "Similar: " in m["text"], ANSWER_TIMEOUT)
    assert "chatops_forget_incident" in json.dumps(note["blocks"])
    assert time.strftime("%Y-%m-%d", time.gmtime()) in note["text"]
    assert f" {row}% /var/log" in calm["text"]
    assert not any(has_approve(m) for m in demo.control.thread("incident", again))
    assert files(demo.host("web-03")) == before


@pytest.mark.slow
def test_restart_the_api_on_web_03_shows_the_target_and_prod_on_the_card(demo: DemoProcess) -> None:
    assert demo.control is not None
    units = demo.host("web-03") / "run" / "systemd" / "units.json"
    pid_before = json.loads(units.read_text())["api.service"]["MainPID"]
    ts = mention(demo, "@ops restart the api on web-03")
    card = approval_card(demo, ts)
    [target] = [
        f["text"] for b in card["blocks"] for f in b.get("fields") or [] if f["text"].startswith("*Target*")
    ]
    assert target == "*Target*\n`web-03` via runner\nenv=prod, role=web\n:red_circle: *PRODUCTION*"
    assert "on web-03: systemctl restart --no-ask-password api" in json.dumps(card["blocks"])
    shown = json.dumps(card["blocks"])  # issue 34: how it will be checked, and that it has no undo
    assert "*Then checks*" in shown and '"target\\":\\"web-03\\"' in shown and "*No undo*" in shown
    assert "restart api.service" not in journal(demo, "web-03")  # not before the Approve

    assert demo.control.click(card["ts"], "bob", action_id="chatops_approve")["ok"]
    answer = reply(demo, ts, "Restarted the api on web-03")
    pid_after = json.loads(units.read_text())["api.service"]["MainPID"]
    assert pid_after != pid_before and "[web-03] Restarted api" in answer["text"]
    assert f"main PID {pid_after}" in answer["text"]
    assert "web-03 systemctl" in journal(demo, "web-03") and "restart api.service" in journal(demo, "web-03")
    assert journal(demo, "db-01") == ""  # db-01's systemctl was never called
    # The check ran on web-03, through its runner, right after the restart (issue 34).
    verified = reply(demo, ts, ":white_check_mark: *Verified:* `service_status")
    assert "web-03" in verified["text"] and f"main PID {pid_after}" in verified["text"]


@pytest.mark.slow
def test_scaling_web_03s_pool_is_checked_and_its_undo_restores_the_count_read_before(
    demo: DemoProcess,
) -> None:
    """Issue 34's demo point: the card says how the change is checked and taken back; after the
    Approve the thread says "Verified" with an Undo button, whose click posts a card for exactly the
    undo call, and its approval scales the pool back to the count read just before the change."""
    assert demo.control is not None
    state = demo.host("web-03") / "var" / "lib" / "pool" / "web.json"
    assert json.loads(state.read_text())["replicas"] == 3
    ts = mention(demo, "@ops scale the web pool on web-03 to 6")
    card = approval_card(demo, ts)
    shown = json.dumps(card["blocks"])
    assert "*Then checks*" in shown and "pool_status" in shown and '\\"state\\": \\"running\\"' in shown
    assert "*Undo*" in shown and "{before.replicas}" in shown
    assert json.loads(state.read_text())["replicas"] == 3  # nothing before the Approve
    assert demo.control.click(card["ts"], "bob", action_id="chatops_approve")["ok"]
    verified = reply(demo, ts, ":white_check_mark: *Verified:* `pool_status")
    assert json.loads(state.read_text())["replicas"] == 6
    assert '"replicas": 3' in verified["text"] and '"replicas": 6' in verified["text"]  # before and after
    [undo] = [b for b in buttons(verified) if b["action_id"] == "chatops_undo"]
    assert undo["text"]["text"] == "Undo"
    reply(demo, ts, "Scaled the web pool on web-03")

    assert demo.control.click(verified["ts"], "alice", action_id="chatops_undo", value=undo["value"])["ok"]
    undo_card = demo.control.wait_for_reply(
        "incident", ts, lambda m: has_approve(m) and m["ts"] != card["ts"], ANSWER_TIMEOUT
    )
    undo_shown = json.dumps(undo_card["blocks"])
    assert "pool_scale" in undo_shown and '\\"replicas\\": 3,' in undo_shown  # the count read before
    assert json.loads(state.read_text())["replicas"] == 6  # not before its own Approve
    assert demo.control.click(undo_card["ts"], "bob", action_id="chatops_approve")["ok"]
    reply(demo, ts, "Undone: the web pool on web-03 is back")
    assert json.loads(state.read_text()) == {"pool": "web", "replicas": 3, "state": "running"}


@pytest.mark.slow
def test_check_db_01s_load_finds_no_fault_on_a_healthy_db_01(demo: DemoProcess) -> None:
    assert demo.control is not None
    ts = mention(demo, "@ops check db-01's load")
    answer = reply(demo, ts, "db-01 looks healthy: I found no fault")
    text = answer["text"]
    assert re.search(r"load average: 0\.\d\d, 0\.\d\d, 0\.\d\d", text)  # db-01's own, not this machine's
    assert "postgresql.service: active (running)" in text and "reporting" not in text
    assert (
        str(demo.host("db-01") / "var" / "log" / "postgresql") in text
    )  # db-01's own log, read by its runner
    assert "[web-03]" not in text
    assert not any(has_approve(m) for m in demo.control.thread("incident", ts))  # read-only: nobody asked


@pytest.mark.slow
def test_a_mention_typed_as_soon_as_the_page_answers_is_answered_after_a_retry(demo: DemoProcess) -> None:
    assert demo.control is not None
    # The page was served before the bot could take a mention, and not announced then.
    served = demo.output_when_served
    assert "Open http" not in served and not re.search(re.escape(demo.control.base_url) + r"/[\s,]", served)
    answer = early_answer(demo)  # answered, not lost
    assert "pgbouncer" in answer["text"]  # db-01's processes
    [root] = [m for m in demo.control.messages("incident") if m["ts"] == demo.early]
    assert any(r["name"] == "eyes" for r in root.get("reactions") or [])
    deliveries = [
        d for d in demo.control.deliveries() if d["type"] == "app_mention" and d["time"] < time.time()
    ]
    mine = [d for d in deliveries if d["event_id"] == deliveries[0]["event_id"]]
    assert mine[0]["retry_num"] == 0 and mine[0]["outcome"] == "connection_failed"  # the web was not up
    assert mine[-1]["outcome"] == "ok" and mine[-1]["retry_num"] >= 1  # Slack's retry delivered it
    assert [d["retry_num"] for d in mine] == list(range(len(mine)))
    assert all(d["retry_reason"] in ("connection_failed", "http_error", "http_timeout") for d in mine[1:])


def early_answer(demo: DemoProcess) -> dict[str, Any]:
    """The answer to the mention posted as the page first answered: after the retry that reached
    the bot (at most ``emulator.demo.main.RETRY_DELAYS`` after it, plus the run)."""
    assert demo.control is not None
    line = re.compile(r"(?m)^db-01 (looks healthy|is busy)")  # healthy, or busy if an alert came first
    return demo.control.wait_for_reply(
        "incident", demo.early, lambda m: bool(line.search(m["text"])), sum(RETRY_DELAYS) + ANSWER_TIMEOUT
    )


@pytest.mark.slow
def test_an_unrecognised_request_gets_the_honest_answer_and_nothing_runs(demo: DemoProcess) -> None:
    assert demo.control is not None
    before = {name: files(demo.host(name)) for name in ("web-03", "db-01")}
    ts = mention(demo, "@ops cna you hlep wiht teh thnig from yesterady")
    answer = reply(demo, ts, "This demo model only knows these scenarios:")
    assert "web-03 is out of disk, deal with it" in answer["text"] and "check db-01's load" in answer["text"]
    assert not any(has_approve(m) for m in demo.control.thread("incident", ts))
    for name, was in before.items():  # nothing deleted, added or cut short on either host (db-01's
        now = files(demo.host(name))  # live logs grow while an earlier test's incident goes on)
        assert now.keys() == was.keys() and all(now[f][0] >= was[f][0] for f in was), name


@pytest.mark.slow
def test_the_alert_button_starts_an_alert_thread_with_a_run(
    demo: DemoProcess, redis_server: RedisServer
) -> None:
    assert demo.control is not None
    [button] = [b for b in demo.control.state()["page_buttons"] if b["id"] == "fire-alert"]
    roots_before = {m["ts"] for m in demo.control.messages("incident")}
    said = demo.control.press(button["id"], "U_ALICE")
    assert (
        said.startswith("Incident started on db-01 (its report query): ") and "the bot answered 200" in said
    )

    def alert_root() -> dict[str, Any] | None:
        new = [
            m for m in demo.control.messages("incident") if m["ts"] not in roots_before and m.get("bot_id")
        ]
        return next((m for m in new if "PostgresHighLoad" in json.dumps(m)), None)

    root = wait_for(alert_root, ANSWER_TIMEOUT, "the alert's thread")
    # The press started db-01's incident, then alerted: the run finds the report query behind it.
    answer = reply(demo, root["ts"], "db-01 is busy, and it is postgresql")
    text = answer["text"]
    assert re.search(r"load average: 1\d\.\d\d", text) and "[web-03]" not in text
    assert re.search(r"31877 postgres +99\.1 .* postgres: reporting orders", text)  # the report query, in ps
    # Its start, in db-01's live log: cited from the log's report lines the run read, verified. Not
    # looked for in the end of the log the answer shows: the incident adds a line every 2 s or so,
    # and its last 12 lines hold the statement only for a run that read them within about 20 s of
    # the press. An alert's run has nobody to stream to: its answer is posted, in as many messages
    # as its length takes, so the citation's line is waited for in whichever holds it.
    cited = demo.control.wait_for_reply(
        "incident", root["ts"], lambda m: "when it started: " in m["text"], ANSWER_TIMEOUT
    )
    assert re.search(STATEMENT_CITED, cited["text"]), cited["text"]
    # A second press is a new delivery: a second thread, not a replay of the first.
    said = demo.control.press(button["id"], "U_BOB")
    assert said.startswith("db-01's incident runs: ") and "the bot answered 200" in said
    roots_before.add(root["ts"])
    second = wait_for(alert_root, ANSWER_TIMEOUT, "the second alert's thread")
    assert second["ts"] != root["ts"]
    reply(demo, second["ts"], "db-01 is busy, and it is postgresql")
    # A restart of postgresql ends the incident (and every backend): db-01 is healthy again, so the
    # other tests find it as they would without this one.
    db_bin = demo.directory / "bin" / "db-01"
    subprocess.run([str(db_bin / "systemctl"), "restart", "postgresql"], check=True, timeout=30)
    ps = subprocess.run([str(db_bin / "ps"), "--sort=-pcpu"], capture_output=True, text=True, timeout=30)
    assert "31877" not in ps.stdout and "pgbouncer" in ps.stdout
    # All of it in the demo's embedded Redis: the machine's Redis holds nothing of this demo.
    prefix = demo.wait_for_line(r"CHATOPS_REDIS_PREFIX=(chatops-demo:[0-9a-f]+:)").group(1)
    client = redis.Redis.from_url(redis_server.url)
    try:
        assert not list(client.scan_iter(match=f"{prefix}*", count=1000))
    finally:
        client.close()


@pytest.mark.slow
def test_the_printed_variables_point_the_cli_at_the_demo(demo: DemoProcess, tmp_path: Path) -> None:
    early_answer(demo)
    line = demo.wait_for_line(r"\n    export (.+)\n").group(1)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "CHATOPS_", "LLM_", "REDIS_"))}
    env.update(dict(part.split("=", 1) for part in shlex.split(line)))
    listed = subprocess.run(
        [sys.executable, "-m", "bot.ops.cli", "runs", "list"],
        cwd=tmp_path,  # no .env here
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    assert "check db-01's load" in listed.stdout  # the early mention's run, from the demo's Redis


@pytest.mark.slow
def test_what_about_web_99_answers_there_is_no_such_target(demo: DemoProcess) -> None:
    assert demo.control is not None
    before = {name: files(demo.host(name)) for name in ("web-03", "db-01")}
    ts = mention(demo, "@ops what about web-99?")
    answer = reply(demo, ts, "I cannot check web-99")
    assert "no such target 'web-99' for cpu_load; the targets are db-01, web-03" in answer["text"]
    assert not any(has_approve(m) for m in demo.control.thread("incident", ts))
    for name, was in before.items():  # nothing deleted, added or cut short on either host (db-01's
        now = files(demo.host(name))  # live logs grow while an earlier test's incident goes on)
        assert now.keys() == was.keys() and all(now[f][0] >= was[f][0] for f in was), name


@pytest.mark.slow
def test_the_cpu_incident_reads_web_03s_log_when_told_not_to_restart(demo: DemoProcess) -> None:
    assert demo.control is not None
    restarts = journal(demo, "web-03").count("restart api.service")
    ts = mention(demo, "@ops the api on web-03 is burning CPU, restart it")
    card = approval_card(demo, ts)
    assert "service_restart" in card["text"]
    demo.control.post_message("#incident", "alice", "don't restart it, show me the logs first", thread_ts=ts)
    answer = reply(demo, ts, "OK, I have not restarted anything")
    assert "[web-03] " in answer["text"] and "retrying now (attempt 3391" in answer["text"]
    assert journal(demo, "web-03").count("restart api.service") == restarts


@pytest.mark.slow
def test_the_nginx_button_edits_web_03_and_what_changed_shows_it_with_its_diff(demo: DemoProcess) -> None:
    assert demo.control is not None
    said = demo.control.press("edit-nginx", "U_ALICE")
    size = re.search(r"client_max_body_size (\w+)", said)
    assert size is not None, said
    exported = demo.wait_for_line(r"export REDIS_URL=(\S+) CHATOPS_REDIS_PREFIX=(chatops-demo:[0-9a-f]+:)")
    client = redis.Redis.from_url(exported.group(1))  # the demo's own, embedded Redis
    try:
        journal = Keys(exported.group(2)).changes("web-03")
        edit = f"+    client_max_body_size {size[1]};".encode()

        def recorded() -> bool:  # web-03's runner's next scan (every 5 s in the demo) sealed it in
            return any(edit in member for member in client.zrange(journal, 0, -1))

        wait_for(recorded, ANSWER_TIMEOUT, "web-03's runner to record the edit")
    finally:
        client.close()
    ts = mention(demo, "@ops what changed on web-03?")
    text = reply(demo, ts, "Here is what web-03's change journal holds")["text"]
    assert "| file | edited /etc/nginx/sites-enabled/orders-api" in text  # named as on the host
    assert f"+    client_max_body_size {size[1]};" in text and str(demo.directory) not in text
    assert "| package | upgrade nginx " in text and "who: deploy |" in text  # its apt history, Requested-By
    assert not any(has_approve(m) for m in demo.control.thread("incident", ts))  # read-only
