"""The incident memory's boundary and Forget, through the real web app, the worker's jobs (in
process), the Slack emulator and a scripted model that records what it is asked.

A private channel's incident (a real run there, its kind from ``conversations.info``) never
reaches another channel's run: not a mention's first message nor its thread, not an alert routed
to another channel, not the ``similar_incidents`` tool called by the model; a run in the same
channel gets it (mention: the first request and a "Similar:" note with Forget buttons). Forget on
that note is refused when forged (another incident, another channel or message, a replay) or
clicked by someone who may not decide there; done by an approver it removes the incident
everywhere (record, time entry, every index, feedback), is audited with the actor, and the next
run does not get it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.redis_util import as_text
from agent.scripted import FunctionModel, tool_call
from agent.types import Message, Request
from bot.memory.similar import IncidentMemory
from bot.memory.store import IncidentStore
from bot.observability.audit import AuditKind
from bot.slack.delivery.channel_facts import SlackChannelFacts
from bot.slack.delivery.client import make_client
from bot.slack.rendering.similar import ACTION_FORGET_INCIDENT
from emulator.slack import SlackEmulator
from tests.bot.alerts.test_alert_runbooks import ROUTES, send
from tests.bot.alerts.test_alert_text_inert import TOKEN
from tests.bot.slack.test_findings_clicks import forged
from tests.support.slack_bot import SlackBot
from tests.support.slack_fixtures import control, make_bot
from tests.support.slack_workspace import BOT_USER, suite_workspace
from tests.support.waiting import wait_for

__all__ = ["control", "make_bot"]

PUBLIC = "C_INCIDENT"
SECRET = "C0SECRET"
ALERTS = "C0ALERTS"
ASK = "the disk is full on web-03 again"
CAUSE = "The nginx access log filled /var on web-03."


@pytest.fixture
def emulator() -> Iterator[SlackEmulator]:
    config = suite_workspace(
        channels={PUBLIC: "incident", SECRET: "secret-ops", ALERTS: "alerts"},
        private_channels={SECRET: ("U_ALICE", "U_BOB", BOT_USER)},
        bot_channels=(PUBLIC, SECRET, ALERTS),
    )
    with SlackEmulator(config) as slack:
        yield slack


class Model:
    """Answers every run with the cause; a request whose first message says TOOLCHECK first calls
    similar_incidents. Keeps every request and every tool result it is given."""

    def __init__(self) -> None:
        self.requests: list[Request] = []

    def __call__(self, request: Request) -> Message | str:
        self.requests.append(request)
        first = next(m.content or "" for m in request.messages if m.role == "user")
        if "TOOLCHECK" in first and not any(m.role == "tool" for m in request.messages):
            return tool_call("similar_incidents", query="disk full web-03 nginx")
        return "Upstream pool exhausted on api-01." if "latency" in first else CAUSE

    def first_of(self, marker: str) -> str:
        """The first user message of the run whose request says ``marker``."""
        texts = [next(m.content or "" for m in r.messages if m.role == "user") for r in self.requests]
        return next(text for text in texts if marker in text)

    def tool_results(self, marker: str) -> list[str]:
        return [
            m.content or ""
            for r in self.requests
            if marker in next(m.content or "" for m in r.messages if m.role == "user")
            for m in r.messages
            if m.role == "tool"
        ]


def memory_bot(make_bot: Callable[..., SlackBot], tmp_path: Path, model: Model, **settings: Any) -> SlackBot:
    routes = tmp_path / "alerts.yaml"
    routes.write_text(ROUTES)
    bot = make_bot(
        models=[FunctionModel(model)],
        tools=[],
        chatops_alerts_file=routes,
        chatops_alerts_token=TOKEN,
        chatops_channels=[],
        chatops_approvers="U_ALICE",
        **settings,
    )
    bot.memory = IncidentMemory(
        IncidentStore(bot.redis, bot.keys, retention_days=180), scope=bot.settings.chatops_memory_scope
    )
    bot.channel_facts = SlackChannelFacts(make_client(bot.settings))
    return bot


def mention_in(bot: SlackBot, channel: str, text: str, user: str = "U_ALICE") -> tuple[str, str]:
    """A mention as ``user`` in ``channel``, worked until its run has ended; (thread ts, run id)."""
    ts = str(bot.control.post_message(channel, user, f"<@{BOT_USER}> {text}")["ts"])
    key = bot.keys.slack("thread_last_run", channel, ts)
    run_id = wait_for(lambda: (bot.work(), as_text(bot.redis.get(key)))[1], what=f"a run in {channel}")
    wait_for(lambda: (bot.work(), bot.status(run_id).terminal)[1], what=f"run {run_id} ended")
    bot.settle()
    return ts, run_id


def thread_text(bot: SlackBot, channel: str, ts: str) -> str:
    return json.dumps([m.get("blocks") or m.get("text") for m in bot.control.thread(channel, ts)])


def note_of(bot: SlackBot, channel: str, ts: str) -> dict[str, Any]:
    return next(
        m for m in bot.control.thread(channel, ts) if "Similar: " in json.dumps(m.get("blocks") or [])
    )


def stored(bot: SlackBot) -> IncidentStore:
    assert bot.memory is not None
    return bot.memory.store


def test_a_private_channels_incident_reaches_no_other_channels_run(
    make_bot: Callable[..., SlackBot], tmp_path: Path
) -> None:
    model = Model()
    bot = memory_bot(make_bot, tmp_path, model)
    _, secret_run = mention_in(bot, SECRET, ASK)
    incident = wait_for(lambda: stored(bot).get(secret_run), what="the private run's incident")
    assert incident.private and incident.channel == SECRET

    # A mention in a public channel: not in its first message, not in its thread, not by the tool.
    public_ts, _ = mention_in(bot, PUBLIC, f"{ASK} TOOLCHECK public")
    first = model.first_of("TOOLCHECK public")
    assert secret_run not in first and "Similar past incidents" not in first
    (result,) = model.tool_results("TOOLCHECK public")
    assert secret_run not in result and "No similar past incident" in result
    assert "Similar: " not in thread_text(bot, PUBLIC, public_ts)

    # An alert on the same host, routed to another channel.
    group = send(bot, "HighDiskUsage", "f1")
    wait_for(
        lambda: (bot.work(), group.run_id and bot.status(group.run_id).terminal)[1], what="the alert run"
    )
    bot.settle()
    alert_first = model.first_of("HighDiskUsage")
    assert secret_run not in alert_first
    assert secret_run not in thread_text(bot, ALERTS, group.root_ts)

    # The same channel's next run gets it: in its first message, by the tool, and in its thread.
    again_ts, _ = mention_in(bot, SECRET, f"{ASK} TOOLCHECK secret")
    first = model.first_of("TOOLCHECK secret")
    assert "Similar past incidents" in first and secret_run in first and "nginx access log" in first
    assert any(secret_run in r for r in model.tool_results("TOOLCHECK secret"))
    note = note_of(bot, SECRET, again_ts)
    assert "nginx access log filled" in json.dumps(note["blocks"])
    assert secret_run in [b["accessory"]["value"] for b in note["blocks"] if "accessory" in b]


def test_scope_channel_keeps_a_public_channels_incident_in_its_channel(
    make_bot: Callable[..., SlackBot], tmp_path: Path
) -> None:
    model = Model()
    bot = memory_bot(make_bot, tmp_path, model, chatops_memory_scope="channel")
    _, public_run = mention_in(bot, PUBLIC, ASK)
    assert not wait_for(lambda: stored(bot).get(public_run), what="the incident").private
    _, _ = mention_in(bot, SECRET, f"{ASK} TOOLCHECK elsewhere")
    assert public_run not in model.first_of("TOOLCHECK elsewhere")
    assert all(public_run not in r for r in model.tool_results("TOOLCHECK elsewhere"))
    _, _ = mention_in(bot, PUBLIC, f"{ASK} TOOLCHECK here")
    assert public_run in model.first_of("TOOLCHECK here")


def memory_keys(bot: SlackBot) -> list[str]:
    return sorted(as_text(k) or "" for k in bot.redis.scan_iter(match=f"{bot.keys.prefix}memory:*"))


def named_anywhere(bot: SlackBot, incident_id: str) -> list[str]:
    """Every memory key that still names ``incident_id`` (record, time, indexes, feedback, notes)."""
    found = []
    for key in memory_keys(bot):
        kind = as_text(bot.redis.type(key))
        in_zset = kind == "zset" and bot.redis.zscore(key, incident_id) is not None
        in_set = kind == "set" and bool(bot.redis.sismember(key, incident_id))
        if incident_id in key or in_zset or in_set:
            found.append(key)
    return found


def forgotten_entries(bot: SlackBot, incident_id: str) -> list[Any]:
    return [e for e in bot.service.audit.entries(incident_id) if e.kind is AuditKind.INCIDENT_FORGOTTEN]


def test_forget_on_the_note_refuses_forgeries_and_non_deciders_then_forgets_everywhere(
    make_bot: Callable[..., SlackBot], tmp_path: Path
) -> None:
    model = Model()
    bot = memory_bot(make_bot, tmp_path, model)
    _, secret_run = mention_in(bot, SECRET, ASK)
    _, public_run = mention_in(bot, PUBLIC, "api latency high on api-01")
    wait_for(lambda: stored(bot).get(secret_run) and stored(bot).get(public_run), what="both incidents")
    stored(bot).set_feedback(secret_run, "down")
    thread_ts, _ = mention_in(bot, SECRET, f"{ASK} second")
    note = note_of(bot, SECRET, thread_ts)
    assert public_run not in json.dumps(note["blocks"])  # nothing alike: not on this note
    assert bot.keys.memory_incident(secret_run) in named_anywhere(bot, secret_run)

    # Bob may not decide in this channel (CHATOPS_APPROVERS is Alice): refused, nothing forgotten.
    refused = bot.control.click(note["ts"], "U_BOB", action_id=ACTION_FORGET_INCIDENT, value=secret_run)
    assert refused["status"] == 200
    bot.settle()
    assert stored(bot).get(secret_run) is not None and forgotten_entries(bot, secret_run) == []

    # Forged clicks by Alice: another incident's id, another channel, another message.
    payload = dict(refused["payload"])
    payload["user"]["id"] = "U_ALICE"

    def other_incident(p: dict[str, Any]) -> None:
        p["actions"][0]["value"] = public_run

    def other_channel(p: dict[str, Any]) -> None:
        p["container"]["channel_id"] = PUBLIC
        p["channel"]["id"] = PUBLIC

    def other_message(p: dict[str, Any]) -> None:
        p["container"]["message_ts"] = thread_ts

    for change in (other_incident, other_channel, other_message):
        forged(bot, payload, change)
    bot.settle()
    assert stored(bot).get(secret_run) is not None and stored(bot).get(public_run) is not None
    assert forgotten_entries(bot, secret_run) == forgotten_entries(bot, public_run) == []

    # Alice, on the note itself: forgotten everywhere, audited once with her as the actor.
    done = bot.control.click(note["ts"], "U_ALICE", action_id=ACTION_FORGET_INCIDENT, value=secret_run)
    assert done["status"] == 200
    bot.settle()
    assert stored(bot).get(secret_run) is None
    assert named_anywhere(bot, secret_run) == []  # record, memory:time, every index, feedback, note
    (entry,) = forgotten_entries(bot, secret_run)
    assert entry.fields["user"] == "U_ALICE" and entry.fields["channel"] == SECRET
    now = next(m for m in bot.control.thread(SECRET, thread_ts) if m["ts"] == note["ts"])
    redrawn = json.dumps(now["blocks"])
    assert "forgotten by <@U_ALICE>" in redrawn and "nginx access log" not in redrawn

    # A replay of her click changes nothing and is not audited again.
    forged(bot, done["payload"], lambda p: None)
    bot.settle()
    assert len(forgotten_entries(bot, secret_run)) == 1 and stored(bot).get(public_run) is not None

    # The next run in the channel does not get it.
    _, _ = mention_in(bot, SECRET, f"{ASK} TOOLCHECK after")
    assert secret_run not in model.first_of("TOOLCHECK after")
    assert all(secret_run not in r for r in model.tool_results("TOOLCHECK after"))
