"""The emulator's page and a Findings message: a refuted hypothesis's statement shows struck through,
the model's text as code (never markup), and choosing Refute from its ⋯ menu sends the option as
Slack's ``block_actions`` payload does (``selected_option``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from slack_sdk import WebClient

from agent.findings import Conclusion, Confidence, Findings, Hypothesis, HypothesisStatus
from bot.slack.rendering.blockkit import notification_text
from bot.slack.rendering.findings import findings_blocks
from emulator.slack import SlackEmulator
from tests.emulator.slack.receiver import Receiver
from tests.support.emulator_workspace import TOKEN, make_config

if TYPE_CHECKING:
    from playwright.sync_api import Page

RUN = "b" * 32


def shown() -> Findings:
    def hypothesis(hid: str, statement: str, status: HypothesisStatus) -> Hypothesis:
        return Hypothesis(id=hid, statement=statement, status=status, claimed_status=status)

    return Findings(
        conclusion=Conclusion.INVESTIGATING,
        claimed_conclusion=Conclusion.INVESTIGATING,
        confidence=Confidence.LOW,
        claimed_confidence=Confidence.LOW,
        hypotheses=(
            hypothesis("H1", "rotated logs *verified* <b>x</b>", HypothesisStatus.OPEN),
            hypothesis("H2", "nginx cache is full", HypothesisStatus.REFUTED),
        ),
    )


def test_a_findings_message_on_the_page_and_its_menu(page: Page) -> None:
    from playwright.sync_api import expect

    receiver = Receiver()
    try:
        with SlackEmulator(make_config(events_url=receiver.url)) as slack:
            web = WebClient(token=TOKEN, base_url=slack.api_url)
            blocks = findings_blocks(shown(), RUN, None)
            web.chat_postMessage(channel="C_INCIDENT", text=notification_text(blocks), blocks=blocks)
            page.goto(slack.url + "/")
            expect(page.locator("body[data-ready=true]")).to_have_count(1)
            message = page.locator(".message").filter(has_text="Findings")
            expect(message.locator("s code")).to_have_text("nginx cache is full")  # struck, kept
            expect(message.locator("code").first).to_have_text("rotated logs *verified* <b>x</b>")
            assert message.locator("b").filter(has_text="verified").count() == 0  # code, not markup
            menus = message.locator("select.overflow")
            expect(menus).to_have_count(2)
            menus.nth(1).select_option(f"refute:H2:{RUN}")
            [request] = receiver.wait_for_matching(
                lambda r: r.headers["content-type"].startswith("application/x")  # the click, not events
            )
            [action] = json.loads(request.form_payload)["actions"]
            assert action["type"] == "overflow" and action["block_id"] == "findings_H2"
            assert action["selected_option"]["value"] == f"refute:H2:{RUN}"
    finally:
        receiver.close()
