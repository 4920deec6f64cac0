"""The Slack experience in a real browser: instant :eyes:, the queued note, help, the Home tab, cards
that say what will happen, and a page that keeps the newest message and the composer in view.

The demo's worker is paused (SIGSTOP to its process group, which the demo fixture started) while
the first mention is stored: the :eyes: and the queued note come from the web process alone.
Screenshots go to ``slack-ux/`` under ``CHATOPS_ARTIFACTS`` (CI keeps that folder) or the test's
tmp_path; the path is printed.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from emulator.demo.main import Demo
from tests.e2e.test_browser import APPROVE, mention

if TYPE_CHECKING:
    from playwright.sync_api import Page

EYES = '.reaction[data-name="eyes"]'

pytestmark = pytest.mark.slow


@contextmanager
def worker_paused(demo: Demo) -> Iterator[None]:
    """No worker runs meanwhile: the demo's worker (and its work horses) are stopped, then resumed."""
    (worker,) = [child for child in demo.children if child.name == "worker"]
    group = os.getpgid(worker.process.pid)
    os.killpg(group, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(group, signal.SIGCONT)


def newest_and_composer_in_view(page: Page) -> None:
    """The last message of the channel (its thread's newest reply) and the composer are on screen."""
    from playwright.sync_api import expect

    expect(page.locator("#composer-input")).to_be_in_viewport()
    expect(page.locator("#user-picker")).to_be_in_viewport()
    expect(page.locator("article.entry").last.locator(".message").last).to_be_in_viewport()
    assert page.evaluate("document.scrollingElement.scrollTop") == 0  # the page itself never scrolls


def test_the_slack_experience_through_both_readme_scenarios(page: Page, demo: Demo, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    artifacts = Path(os.environ.get("CHATOPS_ARTIFACTS") or tmp_path) / "slack-ux"
    artifacts.mkdir(parents=True, exist_ok=True)
    print(f"screenshots in {artifacts}")
    page.goto(demo.page_url)
    expect(page.locator("body")).to_have_attribute("data-live", "true")

    # Help: no run, no model call; what it does, the inventory's targets, an example.
    help_entry = mention(page, "@ops help")
    reply = help_entry.locator(".message.from-bot").first
    expect(reply).to_contain_text("Targets I can act on here")
    expect(reply).to_contain_text("web-03")
    expect(reply).to_contain_text("Example:")
    expect(help_entry.locator(APPROVE)).to_have_count(0)

    # The seed incident with no worker running: :eyes: (from the web process: no worker runs), then
    # the queued note. How soon is the machine's business, not the test's verdict.
    with worker_paused(demo):
        disk = mention(page, "@ops web-03 is out of disk, deal with it")
        expect(disk.locator(EYES).first).to_be_visible()
        expect(disk.locator(".message.from-bot").filter(has_text="Queued")).to_be_visible()
        page.screenshot(path=str(artifacts / "1-eyes-and-queued.png"))
    expect(disk.locator(EYES)).to_have_count(1)

    # The destructive card: target (PRODUCTION), the exact command, expiry, who asked, why.
    card = disk.locator(".message.from-bot").filter(has=page.locator(APPROVE))
    expect(card).to_be_visible()
    expect(card).to_contain_text("web-03")
    expect(card).to_contain_text("PRODUCTION")
    expect(card).to_contain_text("Expires")
    expect(card).to_contain_text("Requested by")
    expect(card).to_contain_text("Why, in the model's words")
    expect(card).to_contain_text("Dry run")
    newest_and_composer_in_view(page)
    page.screenshot(path=str(artifacts / "2-destructive-card.png"))

    # The Home tab: alice's own run; bob sees the approval waiting for him.
    page.locator("#home-link").click()
    home = page.locator("#home")
    expect(home).to_contain_text("Your active runs")
    expect(home).to_contain_text("waiting for approval")
    # She may not approve her own destructive call: nothing waits for her.
    expect(home).to_contain_text("Nothing is waiting for you.")
    page.locator("#user-picker").select_option("U_BOB")
    expect(home).to_have_attribute("data-user", "U_BOB")
    expect(home).to_contain_text("clean_old_logs")
    expect(home).to_contain_text("asked by @alice")
    expect(page.locator("#composer-input")).to_be_in_viewport()
    page.screenshot(path=str(artifacts / "3-home-tab.png"))

    page.locator("li.channel", has_text="incident").first.click()
    expect(page.locator("#messages")).to_be_visible()
    disk.locator(APPROVE).click()
    page.locator("#confirm-yes").click()
    answer = disk.locator(".message.from-bot").filter(has_text="Cleaned up")
    expect(answer).to_be_visible()
    newest_and_composer_in_view(page)
    page.screenshot(path=str(artifacts / "4-disk-answer.png"))

    # The second scenario: the mutating card says what will run where; a reply redirects the run.
    page.locator("#user-picker").select_option("U_ALICE")
    cpu = mention(page, "@ops the api on web-03 is burning CPU, restart it")
    restart = cpu.locator(".message.from-bot").filter(has=page.locator(APPROVE))
    expect(restart).to_be_visible()
    expect(restart).to_contain_text("service_restart")
    expect(restart).to_contain_text("web-03")
    expect(restart).to_contain_text("PRODUCTION")
    expect(restart).to_contain_text("Command")
    expect(restart).to_contain_text("systemctl restart --no-ask-password api")
    expect(restart).to_contain_text("Expires")
    expect(restart).to_contain_text("Why, in the model's words")
    newest_and_composer_in_view(page)
    page.screenshot(path=str(artifacts / "5-mutating-card.png"))
    box = cpu.locator(".thread-input")
    box.fill("don't restart it, show me the logs first")
    box.press("Enter")
    expect(cpu.locator(".message.from-bot").filter(has_text="I have not restarted anything")).to_be_visible()
    expect(cpu.locator(EYES)).to_have_count(2)  # the mention and the reply, each once
    newest_and_composer_in_view(page)
    page.screenshot(path=str(artifacts / "6-redirected.png"))
