"""The same answer streamed and posted reads the same in a real browser, and is inert in both.

One model answer, with the bot's kind of formatting (an emoji code, italics both ways, bold, a
quote, a list with code, a person the run knows) and hostile text (a broadcast, a labelled link,
a Markdown link, emphasis around a broadcast, a bare ``@here``), goes through the real bot twice:
streamed where Slack allows streams (``chat.startStream``: Markdown) and posted where the channel
refused them (``chat.postMessage``: mrkdwn). The emulator's page, in Debian's Chromium, must show
both the same way: same words, same emphasis, quote, code, links and mentions; and the emulator's
reading of what is live (``emulator.slack.live``) finds nothing in either but the requester.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from agent.scripted import FunctionModel
from agent.types import Request, RunStatus
from emulator.slack import SlackEmulator
from emulator.slack.live import live_in_message
from tests.support.slack_bot import SlackBot
from tests.support.slack_fixtures import control, make_bot
from tests.support.slack_workspace import BOT_USER, CHANNEL, suite_workspace

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

__all__ = ["control", "make_bot"]

OTHER = "C_RANDOM"
ANSWER = (
    ":information_source: This web-03 is _simulated_, and *really* so; **twice** checked, asked by U_ALICE.\n"
    "> the log said: disk full\n"
    "- `df -h` shows 97% <of> the disk & more\n"
    "<!channel> <http://evil.example|bank> *<!here>* @here [bank](http://evil.example/login)"
)
# The page's rendering as text with its formatting marked: what a person sees, tag by tag.
VISIBLE = """(node) => {
  const marked = { B: "b", I: "i", S: "s", CODE: "code", BLOCKQUOTE: "quote", PRE: "pre" };
  const walk = (n) => {
    if (n.nodeType === Node.TEXT_NODE) return n.textContent;
    if (n.nodeType !== Node.ELEMENT_NODE) return "";
    const inner = [...n.childNodes].map(walk).join("");
    if (n.tagName === "BR") return "\\n";
    const block = ["BLOCKQUOTE", "PRE", "DIV"].includes(n.tagName) ? "\\n" : "";  // on lines of their own
    if (marked[n.tagName]) return `${block}[${marked[n.tagName]}]${inner}[/${marked[n.tagName]}]${block}`;
    if (n.tagName === "A") return `[link ${n.getAttribute("href")}]${inner}[/link]`;
    if (n.classList.contains("mention")) return `[mention ${n.dataset.userId || ""}]${inner}[/mention]`;
    if (n.tagName === "DIV") return `\\n${inner}\\n`;
    return inner;
  };
  return walk(node).replace(/\\s+/g, " ").trim();
}"""

pytestmark = pytest.mark.slow


@pytest.fixture
def emulator() -> Iterator[SlackEmulator]:
    """The bot is in two channels: one streams, the other refuses streams."""
    with SlackEmulator(suite_workspace(bot_channels=(CHANNEL, OTHER))) as slack:
        yield slack


def answer(request: Request) -> str:
    return ANSWER


def answered(bot: SlackBot, channel: str) -> dict[str, Any]:
    """Mention the bot in ``channel``, run the job; its answer (the last bot reply)."""
    ts = str(bot.control.post_message(channel, "U_ALICE", f"<@{BOT_USER}> what is wrong?")["ts"])
    key = bot.keys.slack("thread_last_run", channel, ts)
    run_id = bot.control.wait_for(lambda: bot.redis.get(key), timeout=30)
    bot.work()
    assert bot.status(run_id.decode()) is RunStatus.COMPLETED
    replies = [m for m in bot.control.thread(channel, ts)[1:] if m.get("user") == BOT_USER]
    return replies[-1]


def shown(page: Page, url: str, ts: str, inner: str) -> Locator:
    from playwright.sync_api import expect

    page.goto(url)
    expect(page.locator("body")).to_have_attribute("data-live", "true")
    message = page.locator(f'.message[data-ts="{ts}"] {inner}').first
    expect(message).to_be_visible()
    return message


def test_a_streamed_and_a_posted_answer_read_the_same_and_neither_pings_or_disguises(
    page: Page, make_bot: Callable[..., SlackBot]
) -> None:
    bot = make_bot([FunctionModel(answer, model="fixed")], chatops_slack_streaming="auto")
    bot.control.inject_fault("chat.startStream", kind="error", error="feature_not_enabled", count=1)
    posted = answered(bot, OTHER)  # refused here: posted as mrkdwn
    streamed = answered(bot, CHANNEL)  # streamed here: Markdown
    assert posted.get("stream") is None and streamed["stream"]["state"] == "completed"

    for message in (posted, streamed):
        live = [
            p
            for p in live_in_message(message)
            if p.disguised or p.kind not in ("user", "link") or (p.kind == "user" and p.target != "U_ALICE")
        ]
        assert live == [], (message["text"], live)  # a link showing its own URL is no disguise

    emulator_url = bot.emulator.url
    as_posted = shown(page, f"{emulator_url}/?channel={OTHER}", posted["ts"], ".message-text").evaluate(
        VISIBLE
    )
    as_streamed = shown(page, f"{emulator_url}/?channel={CHANNEL}", streamed["ts"], ".markdown").evaluate(
        VISIBLE
    )
    assert as_streamed == as_posted
    # And what they both show is the formatting, not its marks; the hostile text as text.
    assert as_posted.startswith(
        "\u2139\ufe0f This web-03 is [i]simulated[/i], and [i]really[/i] so; [b]twice[/b]"
    )
    assert "asked by [mention U_ALICE]@alice[/mention]." in as_posted
    assert "[quote]the log said: disk full[/quote]" in as_posted
    assert "• [code]df -h[/code] shows 97% <of> the disk & more" in as_posted
    assert "<!channel> <http://evil.example|bank> [i]<!here>[/i] @\u2060here" in as_posted
    assert "bank ([link http://evil.example/login]http://evil.example/login[/link])" in as_posted
    for mark in (":information_source:", "_simulated_", "> the log", "&gt;", "&lt;", "&amp;"):
        assert mark not in as_posted
