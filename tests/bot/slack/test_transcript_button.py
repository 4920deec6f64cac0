"""The Transcript button on a finished run card sends the run's Markdown transcript to the clicker alone."""

from __future__ import annotations

import re
from typing import Any

from agent.types import RunStatus
from bot.slack.rendering import render
from tests.bot.slack.test_clicks import notes_to
from tests.support.slack_bot import SlackBot
from tests.support.slack_workspace import CHANNEL, buttons
from tests.support.waiting import wait_for


def transcript_parts(bot: SlackBot) -> list[dict[str, Any]]:
    """Every transcript part the bot sent (ephemerally or not), with its ``user`` when ephemeral."""
    calls = bot.calls("chat.postEphemeral") + bot.calls("chat.postMessage")
    return [c["params"] for c in calls if "Transcript of run" in str(c["params"].get("text"))]


def test_the_transcript_button_sends_the_markdown_transcript_to_the_clicker_once(bot: SlackBot) -> None:
    ts = bot.mention("plan: check_health restart_service", user="U_ALICE")
    run_id = bot.run_id(ts)
    bot.work()
    approval = wait_for(lambda: next((m for m in bot.bot_replies(ts) if "Approval" in m["text"]), None))
    bot.control.click(approval["ts"], "U_BOB", action_id=render.ACTION_APPROVE)
    wait_for(lambda: bot.service.queue.count, what="the resume job")
    bot.say("the db password=hunter2hunter2 is fine", user="U_ALICE", thread_ts=ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED

    card_ts = bot.bot_replies(ts)[0]["ts"]

    def finished_card() -> dict[str, Any] | None:
        card = bot.message(ts, card_ts)
        return card if buttons(card) and "Done" in str(card["blocks"]) else None

    card = wait_for(finished_card, what="the finished run card")
    button, _postmortem = buttons(card)
    assert (button["action_id"], button["value"]) == (render.ACTION_TRANSCRIPT, run_id)

    bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_TRANSCRIPT)
    [post] = wait_for(lambda: transcript_parts(bot), what="the transcript, to bob")
    assert (post["user"], post["channel"], post["thread_ts"]) == ("U_BOB", CHANNEL, ts)  # ephemeral
    text = post["text"]
    assert text.startswith(f":scroll: *Transcript of run `{run_id[:12]}`* · only you can see this\n")
    assert "| " not in text and "# Run" not in text  # readable lines, no Markdown tables or headings
    assert "*Requested by* <@U_ALICE>" in text and "<#" not in text  # people as mentions; no channel link
    assert re.search(r"• `restart_service` \(mutating\) confirmed_by=&quot;U_BOB&quot;", text) is None
    assert re.search(r"• `restart_service` \(mutating\) .*· approved by <@U_BOB> → \*ok\*", text)
    assert re.search(r"\*\d+\. Reply\* from <@U_ALICE>", text)
    assert "password=[REDACTED]" in text and "hunter2hunter2" not in text
    assert not any("Transcript of run" in m.get("text", "") for m in bot.thread(ts))  # nothing public

    bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_TRANSCRIPT)  # again, within a minute
    assert (
        notes_to(bot, "U_BOB", 2)[-1] == "This run's transcript was just sent to you (only you can see it)."
    )
    assert len(transcript_parts(bot)) == 1


def test_a_long_transcript_is_split_into_code_blocks_within_slack_limits() -> None:
    markdown = "# Run r\n\n" + "\n".join(f"line {n} <{'x' * 90}> & more" for n in range(400))
    markdown += "\n" + "y" * 9000 + "\n```nested fence```\n"
    messages = render.transcript_messages(markdown, "r" * 32, max_messages=5)
    assert len(messages) == 5
    for number, message in enumerate(messages, 1):
        assert len(message) <= render.ANSWER_CHUNK
        assert message.count("```") == 2, "every part is one whole code block"
        assert f"(part {number} of 5)" in message.splitlines()[0]
    assert "&lt;xxx" in messages[0] and "&amp; more" in messages[0]
    assert messages[-1].endswith(f"see `chatops runs show {'r' * 32} --format markdown`._")
    everything = render.transcript_messages(markdown, "r" * 32, max_messages=100)
    body = "".join(m.split("```")[1] for m in everything)
    assert body.replace("\n", "").count("y") == 9000 and "'''nested fence'''" in body
