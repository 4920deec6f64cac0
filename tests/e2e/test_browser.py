"""The demo in a real browser: the seed incident with Approve, then a reply that changes the plan.

Everything a person would do, on the emulator's page: type the mention, read the approval card
with the dry run, switch to another person, click Approve and confirm the destructive dialog, read
the answer; then ask for a restart and, while the approval card waits, reply in the thread and see
the model read the log instead. The screenshot of the first thread is the README's
(``CHATOPS_UPDATE_SCREENSHOT=1`` writes it to docs/demo.png).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from emulator.demo.main import Demo
from tests.support.waiting import wait_for

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
    # The entry whose own (root) message is the one just sent. Matching the whole entry's text could
    # pick another thread whose reply quotes the same words (help's example does), before the new
    # entry is even drawn.
    root = page.locator("article.entry > .message:not(.from-bot)", has_text=text.removeprefix("@ops "))
    expect(root).to_have_count(1)
    return page.locator(f'article.entry[data-ts="{root.get_attribute("data-ts")}"]')


def raw_ids_shown(entry: Locator) -> list[str]:
    """The people's raw IDs the bot's messages show as prose (code is verbatim, so left out)."""
    texts: list[str] = entry.locator(".message.from-bot").evaluate_all(
        """(nodes) => nodes.map((node) => {
             const copy = node.cloneNode(true);
             for (const code of copy.querySelectorAll("code, pre")) code.remove();
             return copy.innerText;
           })"""
    )
    return [
        f"{person}: {text}" for text in texts for person in ("U_ALICE", "U_BOB", "U_OPS") if person in text
    ]


def whole_thread_screenshot(page: Page, entry: Locator, path: Path) -> None:
    """``entry`` whole: the page never scrolls (its message list does), so it is made tall enough
    for the thread first, and given back its size afterwards."""
    size = page.viewport_size
    assert size is not None
    # The page redraws its messages on every refresh: an entry measured just as it was replaced
    # has no box, so it is measured again (a wait on the redraw, not a guess at its time).
    box = wait_for(entry.bounding_box, what="the entry's box")
    page.set_viewport_size({"width": size["width"], "height": max(size["height"], int(box["height"]) + 600)})
    entry.scroll_into_view_if_needed()
    entry.screenshot(path=str(path), animations="disabled")
    page.set_viewport_size(size)


def screenshot_path(tmp_path: Path, name: str = "demo.png") -> Path:
    """Where a screenshot goes: docs/ with ``CHATOPS_UPDATE_SCREENSHOT=1`` (the README's and
    docs/FINDINGS.md's pictures), else the test's own folder."""
    if os.environ.get("CHATOPS_UPDATE_SCREENSHOT"):
        return ROOT / "docs" / name
    return tmp_path / name


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

    # Alice, who asked, reads before any click that someone else must approve it.
    expect(disk).to_contain_text("Needs approval by someone other than @alice")
    page.locator("#user-picker").select_option("U_BOB")  # someone else approves
    disk.locator(APPROVE).click()
    expect(page.locator("#confirm-dialog")).to_be_visible()
    expect(page.locator("#confirm-title")).to_contain_text("destructive")
    expect(page.locator("#confirm-text")).to_contain_text("Only someone other than the person who asked")
    page.locator("#confirm-yes").click()

    answer = disk.locator(".message.from-bot").filter(has_text="Cleaned up")
    expect(answer).to_be_visible()
    expect(answer).to_contain_text("Deleted 6 of 6 planned files")
    # The run card says what happened, and names the approver as a mention, never as a raw ID.
    run_card = disk.locator(".message.from-bot").first
    expect(run_card).to_contain_text("Done · 1 change made")
    expect(run_card).to_contain_text("approved by @bob")
    expect(run_card).to_contain_text("6 iterations")  # one of them records its findings (update_findings)
    assert raw_ids_shown(disk) == []
    expect(disk.locator(APPROVE)).to_have_count(0)
    assert not old_log.exists()
    whole_thread_screenshot(page, disk, screenshot_path(tmp_path))
    # The Findings message: two hypotheses, one refuted, every quote verified against its output.
    findings = disk.locator(".message.from-bot").filter(
        has_text=re.compile(r"Findings\s*·\s*Root cause found")
    )
    expect(findings).to_have_count(1)  # one message, edited in place
    expect(findings.locator("s, del")).not_to_have_count(0)  # the refuted hypothesis, struck through
    expect(findings).not_to_contain_text("unverified")
    findings.screenshot(path=str(screenshot_path(tmp_path, "demo-findings.png")), animations="disabled")

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

    # db-01 is healthy: the answer says "No fault found" (the bot's words, not the model's), with
    # what was checked, and the load's range query comes back as a chart in the thread.
    db = mention(page, "@ops check db-01's load")
    answer = db.locator(".message.from-bot").filter(has_text="No fault found").last
    expect(answer).to_be_visible()
    expect(db.locator("img")).not_to_have_count(0)  # the chart of E<n> (prometheus_range)
    whole_thread_screenshot(page, db, screenshot_path(tmp_path, "demo-no-fault.png"))
