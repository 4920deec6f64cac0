"""A hostile model cannot make an unverified quote look verified, nor make a link, a mention or a
broadcast, in the Findings message or in the answer (issue 30), end to end through the emulator.

What it tries: Slack's own link, emphasis, emoji and mention syntax in its statements, quotes and
answer; zero-width and bidi characters; a quote that spans two results; a quote of its own
earlier findings; a look-alike citation with a zero-width space in it; a Markdown link labelled
like a step. What the emulator reports as live (``live``: stricter than Slack) is the judge.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent.types import RunStatus
from emulator.models.openai_server import OpenAIServer, Reply
from tests.bot.slack.findings_flows import (
    call,
    client,
    findings,
    findings_message,
    hypothesis,
    hypothesis_text,
    is_findings,
    labelled_links,
    live_kinds,
    tools,
)
from tests.support.slack_bot import SlackBot
from tests.support.waiting import wait_for

HOSTILE = "<http://x|verified> *verified* :white_check_mark: <@U_BOB> <!channel> @here"
# The loop refuses tool arguments holding invisible characters (update_findings' too), so these
# reach Slack only through a tool's output and the answer.
TRICKS = "ve\u200brified \u202edeifirevnu \u2066x\ufeff"
LOOKS_VERIFIED = "*verified* :white_check_mark: <@U_BOB>"
DISK = f"/var/log 97% used\napi.log.4    1.2G\n{HOSTILE} {TRICKS}\napi.log.5  900M"
INVISIBLE = ("\u200b", "\u202e", "\u2066", "\ufeff")
_CODE = re.compile(r"`[^`\n]*`")


@pytest.fixture
def llm() -> Iterator[OpenAIServer]:
    with OpenAIServer(model="gpt-test") as server:
        yield server


def outside_code(text: str) -> str:
    return _CODE.sub("", text)


def every_text(message: dict[str, Any]) -> str:
    found = [str(message.get("text") or "")]
    for block in message.get("blocks") or []:
        if isinstance(block.get("text"), dict):
            found.append(str(block["text"]["text"]))
        found.extend(str(e.get("text")) for e in block.get("elements") or [] if isinstance(e, dict))
    return "\n".join(found)


def test_hostile_statements_quotes_and_answers_stay_inert_and_unverified(
    llm: OpenAIServer, make_bot: Callable[..., SlackBot]
) -> None:
    llm.enqueue(
        call("check_disk"),  # E1: its output holds the hostile line too
        call("check_load"),  # E2
        findings("investigating", "low", hypothesis("H1", HOSTILE, "open")),  # E3
        findings(  # E4
            "root_cause_found",
            "high",
            hypothesis(
                "H1",
                HOSTILE,
                "supported",
                ("E1", LOOKS_VERIFIED),  # really in E1: verified, and still inert
                ("E1", "<http://x|verified> api.log.4 9G"),  # made up
                ("E1", "api.log.5 900M load average"),  # spans E1's end and E2's start
                ("E3", "Findings recorded (update 1)"),  # the model's own earlier findings
                ("E2", "load average: 9.99"),  # not what E2 says
            ),
        ),
        Reply(
            text=(
                f'Cause: {HOSTILE} {TRICKS} [E1: "{LOOKS_VERIFIED}"] [E9: "*verified*"] '
                "<http://evil.example|E1 · check_disk> [E1 · check_disk](http://evil.example) "
                '[E\u200b1: "api.log.4 1.2G"] done'
            )
        ),
    )
    bot = make_bot(models=[client(llm)], tools=tools(disk=DISK))
    ts = bot.mention("web-03 is out of disk")
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    message = findings_message(bot, ts)
    answer = wait_for(
        lambda: next(
            (m for m in bot.bot_replies(ts) if "done" in str(m["text"]) and not is_findings(m)), None
        ),
        what="the answer",
    )
    card = bot.bot_replies(ts)[0]
    permalink = next(
        str(c["response"]["permalink"])
        for c in bot.calls("chat.getPermalink")
        if c["params"].get("message_ts") == card["ts"]
    )

    # Nothing live but the bot's own step links, and those lead to the run card.
    for shown in (message, answer):
        assert set(live_kinds([shown])) <= {"link"}, shown["live"]
        assert all(link["target"] == permalink.replace("&", "&amp;") for link in labelled_links(shown))
        assert not any(char in every_text(shown) for char in INVISIBLE)
    assert [link["label"] for link in labelled_links(message)] == ["E1 · check_disk"]
    assert [link["label"] for link in labelled_links(answer)] == ["E1 · check_disk"]

    # The Findings message: the model's words only as code; one verified piece, four unverified.
    h1 = hypothesis_text(message, "H1")
    prose = outside_code(h1).replace(f"<{permalink.replace('&', '&amp;')}|E1 · check_disk>", "")
    assert "verified*" not in prose.replace("*unverified*", "") and "<" not in prose and "@here" not in prose
    assert prose.count(":white_check_mark:") == 1 and prose.count("*unverified*") == 4
    assert "`*verified* :white_check_mark: &lt;@U_BOB&gt;`" in h1  # verified, and shown as what it is
    lines = h1.split("\n")
    assert "the quote does not occur in E1's output" in lines[2]
    assert "the quote does not occur in E1's output" in lines[3]  # two results are not one output
    assert "E3 cannot be cited (it repeats the model's own findings)" in lines[4]
    assert "*unverified* E2" in lines[5]
    assert "confidence *medium*" in str(message["blocks"][0])  # one cited result is not two

    # The answer: one verified citation (a link to its step), the rest unverified, nothing forged.
    text = str(answer["text"])
    prose = outside_code(text)
    assert prose.count("*unverified*") == 3
    assert "[E9 *unverified* `*verified*`: E9 names no tool result of this run]" in text
    # Look-alikes code did not check: a zero-width space inside, a Markdown link labelled as a step.
    assert '[E1 *unverified* `[E1: "api.log.4 1.2G"]`: written in a form code could not check]' in text
    assert "[E1 *unverified* `[E1 · check_disk]`: written in a form code could not check]" in text
