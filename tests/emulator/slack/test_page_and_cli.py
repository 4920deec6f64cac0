"""The web page, its live update stream and the standalone command."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

import pytest

from emulator.slack import SlackEmulator, SlackEmulatorClient


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def test_the_page_and_its_assets_are_served(emulator: SlackEmulator) -> None:
    status, kind, html = get(emulator.url + "/")
    assert (status, kind) == (200, "text/html; charset=utf-8")
    for hook in (
        'id="composer-input"',
        'id="messages"',
        'id="user-picker"',
        'id="modal"',
        'id="confirm-dialog"',
    ):
        assert hook in html
    for asset in ("app.js", "blocks.js", "mrkdwn.js"):
        status, kind, _ = get(f"{emulator.url}/static/{asset}")
        assert (status, kind) == (200, "text/javascript")
    assert get(emulator.url + "/static/style.css")[:2] == (200, "text/css")


@pytest.mark.parametrize(
    "path", ["/static/../server.py", "/static/%2e%2e/server.py", "/static/nope.js", "/elsewhere"]
)
def test_nothing_else_is_served(emulator: SlackEmulator, path: str) -> None:
    assert get(emulator.url + path)[0] == 404


def read_event(response: http.client.HTTPResponse) -> tuple[str, dict[str, object]]:
    """The next ``event:``/``data:`` pair from a server-sent event stream."""
    name, data = "", ""
    while True:
        line = response.readline().decode().rstrip("\n")
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            data = line[len("data: ") :]
        elif line == "" and name:
            return name, json.loads(data)


def test_the_stream_announces_a_new_message(emulator: SlackEmulator, control: SlackEmulatorClient) -> None:
    host, port = urllib.parse.urlsplit(emulator.url).netloc.split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=5)
    connection.request("GET", "/stream")
    response = connection.getresponse()
    assert response.headers["Content-Type"] == "text/event-stream"
    assert read_event(response)[0] == "hello"
    ts = control.post_message("incident", "alice", "hello page")["ts"]
    while True:
        name, notice = read_event(response)
        if name == "message":
            break
    assert notice == {"type": "message", "channel": "C_INCIDENT", "ts": ts, "thread_ts": None}
    connection.close()


def test_the_command_serves_the_configured_workspace() -> None:
    command = [
        sys.executable,
        "-m",
        "emulator.slack",
        "--port",
        "0",
        "--signing-secret",
        "s3cret",
        "--user",
        "U_CAROL:carol",
        "--channel",
        "C_OPS:ops-war-room",
        "--bot-channel",
        "C_OPS",
        "--events-url",
        "http://127.0.0.1:9/slack/events",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        url = banner.split("page ", 1)[1].split("/ ", 1)[0]
        state = SlackEmulatorClient(url).state()
        assert [u["name"] for u in state["users"]] == ["carol", "ops"]
        assert state["channels"] == [{"id": "C_OPS", "name": "ops-war-room", "bot_member": True}]
        assert state["events_url"] == "http://127.0.0.1:9/slack/events"
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0
