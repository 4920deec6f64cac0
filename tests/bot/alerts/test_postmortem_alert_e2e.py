"""The postmortem of an alert's incident through the real web app, the Slack emulator, a worker and
a scripted model (issue 35's acceptance): the alert fires, the run refutes a hypothesis
(``update_findings``), a second person approves a restart, its check passes, a thread reply
redirects the run, the alert resolves; the Postmortem draft's timeline has each of those facts in
order, each with its actor and a working link (a permalink to the thread's message or an audit
entry id), no line the audit stream or a message does not back, and the times in UTC and in the
asker's time zone as Slack gives it (``users.info``; Asia/Kathmandu: +05:45, not a whole hour).
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from agent.types import RunStatus
from bot.alerts.store import AlertStore, Group, group_id
from bot.observability.audit import AuditLog
from bot.slack.rendering import render
from emulator.models.openai_server import OpenAIServer, Reply, ScriptedToolCall
from emulator.slack import SlackEmulator
from emulator.slack.config import UserSpec
from tests.bot.alerts.conftest import ALERT_CHANNEL as ALERTS
from tests.bot.alerts.test_alert_follow_ups import ALERT, ALERT_TOKEN, AUTO_ROUTES, GROUP_KEY
from tests.bot.slack.test_checks_e2e import fake_systemctl
from tests.bot.slack.test_clicks import notes_to
from tests.bot.slack.test_thread_continues import client, llm
from tests.support.slack_bot import SlackBot
from tests.support.slack_http import http
from tests.support.slack_workspace import TOKEN, buttons, suite_workspace
from tests.support.waiting import wait_for

__all__ = ["fake_systemctl", "llm"]

KATHMANDU = timezone(timedelta(hours=5, minutes=45))
REDIRECT = "the restart is fine, but *also* look at <!here> [the db](https://evil.example) # now"


@pytest.fixture
def emulator() -> Iterator[SlackEmulator]:
    config = suite_workspace(
        users={"U_ALICE": "alice", "U_BOB": "bob", "U_CAROL": UserSpec("carol", tz="Asia/Kathmandu")},
        channels={"C_INCIDENT": "incident", ALERTS: "alerts"},
        bot_channels=("C_INCIDENT", ALERTS),
    )
    with SlackEmulator(config) as slack:
        yield slack


def call(name: str, **arguments: Any) -> Reply:
    return Reply(tool_calls=[ScriptedToolCall(name, json.dumps(arguments))])


def findings(h1: str, conclusion: str, *evidence: dict[str, str]) -> Reply:
    hypotheses = [
        {"id": "H1", "statement": "the api process hung", "status": h1, "evidence": list(evidence)},
        {"id": "H2", "statement": "the api needs a restart to pick up its config", "status": "open"},
    ]
    return call("update_findings", hypotheses=hypotheses, conclusion=conclusion, confidence="low")


def post_alert(bot: SlackBot, status: str) -> None:
    assert bot.server is not None
    body = json.loads(json.dumps(ALERT))
    body["status"] = body["alerts"][0]["status"] = status
    if status == "resolved":
        body["alerts"][0]["endsAt"] = "2026-12-01T17:40:00Z"
    posted = http(
        f"{bot.server.url}/alerts/alertmanager",
        json.dumps(body).encode(),
        {"Authorization": f"Bearer {ALERT_TOKEN}", "Content-Type": "application/json"},
    )
    assert posted.status == 200, posted.body


def utc_of(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S UTC").replace(tzinfo=UTC).timestamp()


def test_the_postmortem_of_an_alert_incident_tells_each_fact_in_order_with_its_actor_and_link(
    llm: OpenAIServer, make_bot: Callable[..., SlackBot], fake_systemctl: Path, tmp_path: Path
) -> None:
    from tools.builtin.services import make_backend, service_tools

    routes = tmp_path / "alerts.yaml"
    routes.write_text(AUTO_ROUTES)
    llm.enqueue(
        call("service_status", service="api"),
        findings("open", "investigating"),
        findings("refuted", "investigating", {"ref": "E1", "quote": "active (running)"}),
        call("service_restart", service="api"),
        Reply(text="Restarted the api; it is active again."),
    )
    env = {"PATH": f"{fake_systemctl / 'bin'}:/usr/bin:/bin", "FAKE_SYSTEMCTL_DIR": str(fake_systemctl)}
    bot = make_bot(
        models=[client(llm)],
        tools=service_tools(make_backend("systemd", env)),
        chatops_alerts_file=routes,
        chatops_alerts_token=ALERT_TOKEN,
        chatops_check_seconds=20,
    )
    store = AlertStore(bot.redis, bot.keys)
    gid = group_id("alertmanager", GROUP_KEY)

    # The alert fires; its run reads, refutes H1 and asks to restart the api.
    post_alert(bot, "firing")
    bot.work()
    group = wait_for(lambda: store.group(gid), what="the alert's thread")
    run_id = group.run_id
    assert run_id and bot.status(run_id) is RunStatus.AWAITING_APPROVAL
    card = wait_for(
        lambda: next(
            (m for m in bot.control.thread(ALERTS, group.root_ts)[1:] if "Approval" in m["text"]), None
        ),
        what="the approval card",
    )
    # Meanwhile the shift handoff lists the firing alert group and the approval still waiting.
    bot.control.command("U_CAROL", "C_INCIDENT", "/ops", "handoff --since 1h")
    [handoff] = notes_to(bot, "U_CAROL", 1)
    assert f"alert firing: DiskFull (run {run_id})" in handoff and f"[{gid}]" in handoff
    assert re.search(
        rf"approval of service_restart( on \S+)? waiting \d+ (s|min) \(run {run_id[:12]}", handoff
    )
    # Bob (a second person) approves; Alice redirects in the thread before the run goes on.
    bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_APPROVE)
    wait_for(lambda: bot.service.queue.count, what="the resume job")
    bot.control.post_message(ALERTS, "U_ALICE", REDIRECT, thread_ts=group.root_ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    assert any(REDIRECT[:20] in str(m.get("content") or "") for m in llm.requests[-1].body["messages"])
    post_alert(bot, "resolved")
    bot.work()

    def resolution() -> Group | None:
        found = store.group(gid)
        return found if found is not None and found.status == "resolved" else None

    resolved = wait_for(resolution, what="the resolution")

    def finished_card() -> dict[str, Any] | None:
        for message in bot.control.thread(ALERTS, group.root_ts)[1:]:
            if render.ACTION_POSTMORTEM in [b["action_id"] for b in buttons(message)]:
                return message
        return None

    bot.control.click(wait_for(finished_card)["ts"], "U_CAROL", action_id=render.ACTION_POSTMORTEM)
    name = f"postmortem-{run_id[:12]}.md"
    [shared] = wait_for(lambda: [f for f in bot.control.files() if f["name"] == name], what="the draft")
    request = urllib.request.Request(shared["url_private"], headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        markdown = bytes(answer.read()).decode()

    # Every line: UTC, then Carol's zone; its actor; a link that works.
    assert "## Timeline (UTC, and Asia/Kathmandu)" in markdown
    timeline = markdown[markdown.index("## Timeline") : markdown.index("## Actions")].splitlines()[2:-1]
    audit = {e.id: e for e in AuditLog(bot.redis, bot.keys, max_len=10_000).entries()}
    root_link = f"/archives/{ALERTS}/p{group.root_ts.replace('.', '')}>)"
    facts: list[tuple[str, str]] = []
    for line in timeline:
        stamp, local, actor, what, link = re.fullmatch(
            r"- (\S+ \S+ UTC) \((\S+ \S+) Asia/Kathmandu\) · (.+?) · (.+) · (.+)", line
        ).groups()  # type: ignore[union-attr]
        at = utc_of(stamp)
        assert datetime.fromtimestamp(at, KATHMANDU).strftime("%Y-%m-%d %H:%M:%S") == local
        entry_id = re.fullmatch(r"(?:audit `|\[audit )(\d+-\d+)(?:`|\]\(<https://\S+>\))", link)
        if entry_id is not None:  # one audit entry: this run's, at that second, naming that actor
            entry = audit[entry_id.group(1)]
            assert entry.run_id == run_id and int(entry.at) == int(at), line
            assert actor == "chatops" or actor.replace("\\", "") in entry.fields.values(), line
        else:  # the alert thread's first message (fired, then as updated when resolved)
            assert link.startswith("[message](<https://") and link.endswith(root_link), line
            assert (
                actor == "alertmanager"
                and bot.control.thread(ALERTS, group.root_ts)[0]["ts"] == group.root_ts
            )
        facts.append((actor.replace("\\", ""), what.replace("\\", "")))

    def at(actor: str, starts: str) -> int:
        found = [i for i, (who, what) in enumerate(facts) if who == actor and what.startswith(starts)]
        assert len(found) == 1, (actor, starts, facts)
        return found[0]

    order = [
        at("alertmanager", "alert fired"),
        at("chatops", "hypothesis H1 open:"),
        at("chatops", "hypothesis H1 open → refuted"),
        at("chatops", "asked approval to run service_restart"),
        at("U_BOB", "approved service_restart"),
        at("chatops", "check service_status"),
        at("chatops", "run ended: completed"),
        at("alertmanager", "alert resolved"),
    ]
    ran = at("chatops", "ran service_restart")
    redirect = at("U_ALICE", "replied in the thread, read by the run: the restart is fine")
    assert order == sorted(order) and order[4] < ran < order[5] and order[4] < redirect < order[6]
    assert "approved by U_BOB" in facts[ran][1] and "passed" in facts[order[5]][1]
    assert resolved.resolved_at and "Hypothesis H1 (the api process hung) was refuted" in markdown.replace(
        "\\", ""
    )
    # The hostile redirect stays text: no broadcast, emphasis, link or heading.
    assert "<!here>" not in markdown and "](https://evil" not in markdown and "\\*also\\*" in markdown
    assert re.search(r"service\\_restart .*approved by U\\_BOB: ok; check passed; no undo", markdown)
