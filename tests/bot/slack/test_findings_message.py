"""The Findings message and the answer's citations in Slack (issue 30), end to end.

The Slack emulator delivers signed events to the bot's web app on a real port, the worker runs the
jobs with the real Slack presenter and the process's background sender, and the model is the
scripted OpenAI-compatible server over HTTP: ``update_findings`` and the final answer's
citations travel the real wire, and code's verdicts are read back from what Slack shows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from agent.types import RunStatus
from bot.slack.rendering.mrkdwn import escape
from emulator.models.openai_server import OpenAIServer, Reply
from tests.bot.slack.findings_flows import (
    DISK,
    LOAD,
    blocks_of,
    call,
    client,
    findings,
    findings_message,
    findings_posts,
    hypothesis,
    hypothesis_text,
    is_findings,
    labelled_links,
    sections,
    texts_of,
    tools,
    updates_of,
)
from tests.support.slack_bot import SlackBot
from tests.support.waiting import wait_for

CAUSE = "rotated api logs fill /var/log"


@pytest.fixture
def llm() -> Iterator[OpenAIServer]:
    with OpenAIServer(model="gpt-test") as server:
        yield server


def run(bot: SlackBot, text: str = "web-03 is out of disk") -> tuple[str, str]:
    ts = bot.mention(text)
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    return ts, run_id


def card_permalink(bot: SlackBot, ts: str) -> str:
    """The run card's permalink, as Slack gave it (escaped, as mrkdwn carries it in a link)."""
    card = bot.bot_replies(ts)[0]  # the run card: the bot's first message in the thread
    asked = [c for c in bot.calls("chat.getPermalink") if c["params"].get("message_ts") == card["ts"]]
    assert asked and all(c["ok"] for c in asked)
    return escape(str(asked[0]["response"]["permalink"]))


def test_findings_are_one_message_edited_in_place_showing_what_code_verified(
    llm: OpenAIServer, make_bot: Callable[..., SlackBot]
) -> None:
    bots: list[SlackBot] = []

    def second_update(body: object) -> Reply:
        # The sender coalesces (only the newest version is sent): the second update waits until the
        # first is in Slack, so this test reads an edit, not a coalesced first post.
        wait_for(lambda: findings_posts(bots[0]), what="the first Findings message")
        return findings(  # E4: H2 refuted, an unknown id, an id that is none, root cause with one source
            "root_cause_found",
            "high",
            hypothesis("H1", CAUSE, "supported", ("E1", "api.log.4 1.2G"), ("E9", "api.log.9 5G")),
            hypothesis("H2", "nginx cache is full", "refuted"),
            hypothesis("H3", "a cron job writes core dumps", "open", ("X1", "core.1234")),
        )

    llm.enqueue(
        call("check_disk"),  # E1
        call("check_load"),  # E2
        findings(  # E3: H1 verified (whitespace differs), H2 "supported" by a quote E2 never printed
            "investigating",
            "low",
            hypothesis("H1", CAUSE, "supported", ("E1", "api.log.4 1.2G")),
            hypothesis("H2", "nginx cache is full", "supported", ("E2", "nginx cache 40G")),
        ),
        second_update,
        Reply(
            text='The rotated api logs fill /var/log [E1: "api.log.4    1.2G"]; nginx [E2: "nginx cache 40G"] [E7].'
        ),
    )
    bot = make_bot(models=[client(llm)], tools=tools())
    bots.append(bot)
    ts, run_id = run(bot)
    bot.settle()

    # One message, posted at the first update and edited in place with the second.
    message = findings_message(bot, ts)
    [post] = findings_posts(bot)
    assert [m["ts"] for m in bot.bot_replies(ts) if is_findings(m)] == [message["ts"]]
    assert updates_of(bot, message["ts"]), "the second update edits the message"
    record = bot.service.get(run_id)
    assert record is not None and record.findings_ts == message["ts"]  # durable: a resumed run edits it

    # The first version: H2 claimed supported on a fabricated quote is shown open, "no verified evidence".
    first = list(texts_of(blocks_of(post)))
    assert "*Findings*" in first[0] and "Investigating" in first[0]
    h2 = next(t for t in first if t.startswith("*H2*"))
    assert ":white_circle: open" in h2 and "_no verified evidence_ (claimed supported)" in h2
    assert "*unverified* E2 `nginx cache 40G`: the quote does not occur in E2's output" in h2

    # The newest version, as shown after code's corrections.
    link = card_permalink(bot, ts)
    head = sections(message)[0]
    assert "*Findings*" in head and "*Root cause found*" in head and "confidence *medium*" in head
    assert "update 2" in head  # high needs two different results: one is cited
    assert any("claimed confidence _high_" in text for text in sections(message))
    h1 = hypothesis_text(message, "H1")
    assert h1.startswith("*H1* · :large_green_circle: supported · `rotated api logs fill /var/log`")
    assert f":white_check_mark: verified <{link}|E1 · check_disk> `api.log.4 1.2G`" in h1
    assert "*unverified* E9 `api.log.9 5G`: E9 names no tool result of this run" in h1
    h2 = hypothesis_text(message, "H2")
    assert h2 == "~H2~ · :red_circle: refuted · ~`nginx cache is full`~"  # struck through, kept
    h3 = hypothesis_text(message, "H3")
    assert "*unverified* `X1` `core.1234`: not an evidence id of this run" in h3
    assert [(item["target"], item["label"]) for item in labelled_links(message)] == [
        (link, "E1 · check_disk")
    ]  # the one labelled link: the verified piece's step

    # Every hypothesis has its menu: Refute, Focus on this.
    menus = [b["accessory"] for b in message["blocks"] if b.get("block_id", "").startswith("findings_")]
    assert [[o["text"]["text"] for o in m["options"]] for m in menus] == [["Refute", "Focus on this"]] * 3

    # The answer: a verified citation links to its step with its quote; the others say unverified.
    answer = next(m for m in bot.bot_replies(ts) if "nginx" in str(m["text"]) and not is_findings(m))
    text = str(answer["text"])
    assert f"[<{link}|E1 · check_disk> `api.log.4 1.2G`]" in text
    assert "[E2 *unverified* `nginx cache 40G`: the quote does not occur in E2's output]" in text
    assert "[E7 *unverified*: E7 names no tool result of this run]" in text
    assert '[E1: "' not in text and "\ue000" not in text
    assert "cites no verified evidence" not in text  # it does cite one
    # The card lists each step with the id the links are labelled with.
    card = bot.bot_replies(ts)[0]
    assert "*E1* `check_disk`" in str(card["blocks"]) and "*E2* `check_load`" in str(card["blocks"])


def test_a_root_cause_with_nothing_verified_is_shown_inconclusive_and_the_answer_says_so(
    llm: OpenAIServer, make_bot: Callable[..., SlackBot]
) -> None:
    llm.enqueue(
        call("check_disk"),
        findings(
            "root_cause_found",
            "high",
            hypothesis("H1", "the disk controller is failing", "supported", ("E1", "I/O error on sda")),
        ),
        Reply(text="The disk controller is failing; replace it."),
    )
    bot = make_bot(models=[client(llm)], tools=tools())
    ts, _ = run(bot)
    message = findings_message(bot, ts)
    head = sections(message)
    assert "*Inconclusive*" in head[0] and "confidence *medium*" in head[0]
    assert any("claimed _root cause found_" in text and "no hypothesis is supported" in text for text in head)
    h1 = hypothesis_text(message, "H1")
    assert ":white_circle: open · _no verified evidence_ (claimed supported)" in h1
    assert "*unverified* E1 `I/O error on sda`" in h1 and labelled_links(message) == []
    answer = wait_for(
        lambda: next((m for m in bot.bot_replies(ts) if "replace it" in str(m["text"])), None),
        what="the answer",
    )
    lines = str(answer["text"]).split("\n")
    assert lines[0] == (
        ":warning: _The model says it found the root cause, but this answer cites no verified evidence._"
    )
    assert lines[1] == "The disk controller is failing; replace it."


def test_no_fault_found_is_the_bots_own_words_with_what_was_checked(
    llm: OpenAIServer, make_bot: Callable[..., SlackBot]
) -> None:
    llm.enqueue(
        call("check_disk"),
        call("check_load"),
        findings(
            "no_fault_found",
            "medium",
            hypothesis("H1", "db-01 is overloaded", "refuted", ("E2", "load average: 0.12")),
        ),
        Reply(text="db-01 looks healthy: load is low [E2]."),
    )
    bot = make_bot(models=[client(llm)], tools=tools(disk=DISK, load=LOAD))
    ts, _ = run(bot, "db-01 is slow")
    message = findings_message(bot, ts)
    head = sections(message)
    assert "*No fault found*" in head[0]
    assert head[1].startswith(":white_check_mark: *No fault found*. Checked (steps on the <")
    assert head[1].endswith("|run card>): E1 `check_disk`, E2 `check_load`.")
    answer = wait_for(
        lambda: next((m for m in bot.bot_replies(ts) if "db-01 looks healthy" in str(m["text"])), None),
        what="the answer",
    )
    lines = str(answer["text"]).split("\n")
    assert lines[0] == ":white_check_mark: *No fault found*. Checked: E1 `check_disk`, E2 `check_load`."
    assert lines[1].startswith("db-01 looks healthy: load is low [<https://")


def test_a_streamed_answer_shows_its_citations_as_a_posted_one_does(
    llm: OpenAIServer, make_bot: Callable[..., SlackBot]
) -> None:
    llm.enqueue(
        call("check_disk"),
        findings(
            "root_cause_found", "medium", hypothesis("H1", CAUSE, "supported", ("E1", "api.log.4 1.2G"))
        ),
        Reply(text='Rotated logs [E1: "api.log.4 1.2G"], not the cache [E5].'),
    )
    bot = make_bot(models=[client(llm)], tools=tools(), chatops_slack_streaming="auto")
    ts, _ = run(bot)
    streamed = wait_for(
        lambda: next(
            (m for m in bot.bot_replies(ts) if m.get("stream") and "Rotated" in str(m["text"])), None
        ),
        what="the streamed answer",
    )
    link = card_permalink(bot, ts)
    text = str(streamed["text"])
    assert f"Rotated logs [[E1 · check_disk]({link}) `api.log.4 1.2G`]" in text
    assert "not the cache [E5 **unverified**: E5 names no tool result of this run]." in text
    assert [(item["kind"], item["label"]) for item in streamed["live"]] == [("link", "E1 · check_disk")]
    assert not [c for c in bot.calls("chat.postMessage") if "Rotated" in str(c["params"].get("text"))]
