"""The Postmortem draft button and ``/ops postmortem``: real web app, emulated Slack, a real worker.

The draft is uploaded to the run's thread as a Markdown file (files.getUploadURLExternal, the
upload, files.completeUploadExternal) with a short summary message; every timeline line names an
audit entry of the run or links to a Slack message; a private channel's run is only for its members.
"""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent.types import RunStatus
from bot.observability.audit import AuditLog
from bot.slack.handlers.postmortem import NO_SUCH_RUN
from bot.slack.rendering import render
from emulator.slack import SlackEmulator, UserSpec
from tests.bot.slack.test_clicks import notes_to
from tests.support.slack_bot import SlackBot
from tests.support.slack_http import signed_post
from tests.support.slack_workspace import BOT_USER, CHANNEL, TOKEN, buttons, suite_workspace
from tests.support.waiting import wait_for

SECRET_CHANNEL = "C_SECRET"


@pytest.fixture
def emulator() -> Iterator[SlackEmulator]:
    config = suite_workspace(
        # Alice, who starts the runs, works in Kathmandu (UTC+05:45); Carol, who asks for the drafts, in UTC.
        users={
            "U_ALICE": UserSpec("alice", tz="Asia/Kathmandu"),
            "U_BOB": "bob",
            "U_CAROL": "carol",
            "U_EVE": "eve",
        },
        channels={CHANNEL: "incident", SECRET_CHANNEL: "sec-incident-42"},
        bot_channels=(CHANNEL, SECRET_CHANNEL),
        private_channels={SECRET_CHANNEL: ("U_ALICE", "U_CAROL")},
    )
    with SlackEmulator(config) as slack:
        yield slack


@pytest.fixture
def bot(make_bot: Callable[..., SlackBot]) -> SlackBot:
    return make_bot(chatops_approvers=["U_BOB", "U_CAROL"], chatops_channels=[CHANNEL, SECRET_CHANNEL])


def finished_run(bot: SlackBot, channel: str, approver: str) -> tuple[str, str, dict[str, Any]]:
    """Alice asks in ``channel``, ``approver`` approves the restart, Alice redirects; (thread, run, card)."""
    ts = str(
        bot.control.post_message(
            channel, "U_ALICE", f"<@{BOT_USER}> plan: check_health restart_service <!channel> *x*"
        )["ts"]
    )
    run_id = wait_for(lambda: bot.service.records.active_run(channel, ts), what="the run")
    bot.work()
    approval = wait_for(
        lambda: next((m for m in bot.control.thread(channel, ts)[1:] if "Approval" in m["text"]), None),
        what="the approval card",
    )
    bot.control.click(approval["ts"], approver, action_id=render.ACTION_APPROVE)
    wait_for(lambda: bot.service.queue.count, what="the resume job")
    bot.control.post_message(channel, "U_ALICE", "look at /var too [x](https://evil.example)", thread_ts=ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED

    def card() -> dict[str, Any] | None:
        found = bot.control.thread(channel, ts)[1]
        return found if len(buttons(found)) == 2 else None

    return ts, run_id, wait_for(card, what="the finished run card")


def drafts(bot: SlackBot, run_id: str) -> list[dict[str, Any]]:
    return [f for f in bot.control.files() if f["name"] == f"postmortem-{run_id[:12]}.md"]


def download(url: str) -> str:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return bytes(answer.read()).decode()


def test_the_button_uploads_a_draft_whose_every_line_is_backed_by_the_audit_or_a_message(
    bot: SlackBot,
) -> None:
    ts, run_id, card = finished_run(bot, CHANNEL, "U_BOB")
    assert [b["action_id"] for b in buttons(card)] == [render.ACTION_TRANSCRIPT, render.ACTION_POSTMORTEM]
    bot.control.click(card["ts"], "U_CAROL", action_id=render.ACTION_POSTMORTEM)
    [shared] = wait_for(lambda: drafts(bot, run_id), what="the draft file")
    markdown = download(shared["url_private"])
    [comment] = [m for m in bot.control.thread(CHANNEL, ts) if m.get("files")]
    assert comment["text"].startswith(
        f":memo: *Postmortem draft* of run `{run_id[:12]}`, asked for by <@U_CAROL>"
    )

    entries = {e.id: e for e in AuditLog(bot.redis, bot.keys, max_len=10_000).entries(run_id)}
    timeline = markdown[markdown.index("## Timeline") : markdown.index("## Actions")].splitlines()[2:-1]
    actors = []
    for line in timeline:
        audit = re.search(r"audit (?:`|\[audit )(\d+-\d+)", line)
        if audit is None:  # a message: its permalink, from chat.getPermalink
            assert re.search(rf"\]\(<https://[a-z0-9-]+\.slack\.com/archives/{CHANNEL}/p\d+>\)", line), line
        else:
            assert audit.group(1) in entries, line
        actors.append(line.split(" · ")[1])
    assert actors[0] == "U\\_ALICE" and "U\\_BOB" in actors and actors[-1] == "chatops"
    # Every time in UTC and on the requester's clock (Alice's, not Carol's who asked for the draft).
    assert all(
        re.search(r"\d\d:\d\d:\d\d UTC \(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d Asia/Kathmandu\)", line)
        for line in timeline
    )
    assert any("approved restart\\_service" in line and "after" in line for line in timeline)
    assert any("U\\_ALICE · replied in the thread" in line for line in timeline)
    assert "<!channel>" not in markdown.split("## The run's answer")[0] and "](https://evil" not in markdown

    bot.control.click(card["ts"], "U_CAROL", action_id=render.ACTION_POSTMORTEM)  # again at once
    assert notes_to(bot, "U_CAROL", 1)[-1] == "A postmortem draft of this run was just posted in its thread."
    assert len(drafts(bot, run_id)) == 1


def test_ops_postmortem_respects_the_channel_boundary(bot: SlackBot) -> None:
    ts, run_id, _ = finished_run(bot, SECRET_CHANNEL, "U_CAROL")
    link = f"https://team.slack.com/archives/{SECRET_CHANNEL}/p{ts.replace('.', '')}"
    for asked in (link, run_id, run_id[:12]):  # eve is not in the private channel
        answer = bot.control.command("U_EVE", CHANNEL, "/ops", f"postmortem {asked}")
        assert answer["status"] == 200
    assert notes_to(bot, "U_EVE", 3) == [NO_SUCH_RUN] * 3
    bot.control.command("U_EVE", CHANNEL, "/ops", "postmortem nothing-at-all")
    assert notes_to(bot, "U_EVE", 4)[-1] == NO_SUCH_RUN
    assert drafts(bot, run_id) == []
    bot.control.command("U_CAROL", CHANNEL, "/ops", f"postmortem {link}")  # a member, from another channel
    wait_for(lambda: drafts(bot, run_id), what="the draft in the private thread")
    assert any(m.get("files") for m in bot.control.thread(SECRET_CHANNEL, ts))
    assert notes_to(bot, "U_CAROL", 1)[-1] == "The postmortem draft is in the run's thread."


def test_a_forged_click_naming_another_channels_run_makes_nothing(bot: SlackBot) -> None:
    _, secret_run, _ = finished_run(bot, SECRET_CHANNEL, "U_CAROL")
    _, public_run, card = finished_run(bot, CHANNEL, "U_BOB")
    real = bot.control.click(card["ts"], "U_EVE", action_id=render.ACTION_TRANSCRIPT)["payload"]
    forged = json.loads(json.dumps(real).replace(public_run, secret_run))
    forged["actions"][0]["action_id"] = render.ACTION_POSTMORTEM
    body = urllib.parse.urlencode({"payload": json.dumps(forged)}).encode()
    assert signed_post(bot.events_url, body, content_type="application/x-www-form-urlencoded").status == 200
    notes = notes_to(bot, "U_EVE", 2)  # and the transcript's refusal (eve may not decide), in any order
    assert "This button does not belong to a run of this channel. No draft was made." in notes
    assert drafts(bot, secret_run) == []
