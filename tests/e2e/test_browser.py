"""The demo in a real browser: the seed incident with Approve, then a reply that changes the plan.

Everything a person would do, on the emulator's page: type the mention, read the approval card
with the dry run, switch to another person, click Approve and confirm the destructive dialog, read
the answer; then ask for a restart and, while the approval card waits, reply in the thread and see
the model read the log instead. The screenshot of the first thread is the README's
(``CHATOPS_UPDATE_SCREENSHOT=1`` writes it to docs/demo.png).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from emulator.demo import Demo

if TYPE_CHECKING:  # the page fixture skips the test when playwright is missing
    from playwright.sync_api import Locator, Page

ROOT = Path(__file__).resolve().parents[2]
APPROVE = 'button.block-button[data-action-id="chatops_approve"]'

pytestmark = pytest.mark.slow


def mention(page: Page, text: str) -> Locator:
    """Post ``text`` from the composer; the channel entry (message and thread) it starts."""
    from playwright.sync_api import expect

    composer = page.locator("#composer-input")
    composer.fill(text)
    composer.press("Enter")
    entry = page.locator("article.entry").filter(has_text=text.removeprefix("@ops "))
    expect(entry).to_have_count(1)
    return entry


def screenshot_path(tmp_path: Path) -> Path:
    if os.environ.get("CHATOPS_UPDATE_SCREENSHOT"):
        return ROOT / "docs" / "demo.png"
    return tmp_path / "demo.png"


def test_the_seed_incident_and_a_redirect_through_the_page(page: Page, demo: Demo, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    page.goto(demo.page_url)
    expect(page.locator("body")).to_have_attribute("data-live", "true")  # the event stream is open

    # The seed incident: the destructive step waits for a person, who sees the dry run first.
    disk = mention(page, "@ops web-03 is out of disk, deal with it")
    expect(disk.locator(APPROVE)).to_be_visible()
    expect(disk).to_contain_text("Dry run: clean_old_logs would delete 6 files")
    assert demo.host is not None
    old_log = sorted((demo.host.log_dir / "api").glob("api.log-*"))[0]
    assert old_log.exists()

    page.locator("#user-picker").select_option("U_BOB")  # someone else approves
    disk.locator(APPROVE).click()
    expect(page.locator("#confirm-dialog")).to_be_visible()
    expect(page.locator("#confirm-title")).to_contain_text("destructive")
    page.locator("#confirm-yes").click()

    answer = disk.locator(".message.from-bot").filter(has_text="Cleaned up")
    expect(answer).to_be_visible()
    expect(answer).to_contain_text("Deleted 6 of 6 planned files")
    # The bot names the approver as a mention (the run card's step), not as a raw ID.
    expect(disk.locator(".message.from-bot").first).to_contain_text("approved by @bob")
    expect(disk.locator(APPROVE)).to_have_count(0)
    assert not old_log.exists()
    disk.screenshot(path=str(screenshot_path(tmp_path)), animations="disabled")

    # A reply while the restart waits for approval supersedes it: the model reads the log instead.
    page.locator("#user-picker").select_option("U_ALICE")
    cpu = mention(page, "@ops the api on web-03 is burning CPU, restart it")
    expect(cpu.locator(APPROVE)).to_be_visible()
    expect(cpu).to_contain_text("service_restart")
    reply = cpu.locator(".thread-input")
    reply.fill("don't restart it, show me the logs first")
    reply.press("Enter")

    expect(cpu.locator(".message.from-bot").filter(has_text="I have not restarted anything")).to_be_visible()
    expect(cpu).to_contain_text("retrying now (attempt 3391")
    expect(cpu.locator(APPROVE)).to_have_count(0)
    expect(cpu.locator('.reaction[data-name="eyes"]')).to_have_count(2)  # the mention and the reply were read
    assert not (demo.host.state_dir / "journal.log").exists()  # systemctl never restarted anything
