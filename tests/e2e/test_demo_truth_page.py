"""The demo's page in a real browser: the alert button starts an alert thread with a run, and the
disk-full story's "Disk now" is web-03's simulated volume. Each step's page is kept as a picture
(``alert.png``, ``disk-full.png`` in the test's folder) to look at."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from emulator.demo.commands import percent_used
from emulator.demo.main import Demo
from emulator.demo.system import HostSystem
from tests.e2e.test_browser import APPROVE, mention

if TYPE_CHECKING:
    from playwright.sync_api import Page


pytestmark = pytest.mark.slow  # the whole demo and a browser: a minute


def test_the_alert_button_and_the_disk_full_story_through_the_page(
    page: Page, demo: Demo, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    page.goto(demo.page_url)
    expect(page.locator("body")).to_have_attribute("data-live", "true")

    fire = page.locator("#page-buttons button").filter(has_text="Fire an alert")
    expect(fire).to_be_visible()
    fire.click()
    expect(page.locator("#toast")).to_contain_text("the bot answered 200")
    alert = page.locator("article.entry").filter(has_text="PostgresHighLoad")
    expect(alert).to_have_count(1)
    expect(alert.locator(".message.reply.from-bot").filter(has_text="db-01 is busy")).to_be_visible(
        timeout=60_000
    )
    expect(alert).to_contain_text(re.compile(r"load average: 1\d\.\d\d"))  # the incident the press started
    alert.locator(".message").first.scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "alert.png"), animations="disabled")

    disk = mention(page, "@ops web-03 is out of disk, deal with it")
    expect(disk.locator(APPROVE)).to_be_visible(timeout=60_000)
    page.locator("#user-picker").select_option("U_BOB")
    disk.locator(APPROVE).click()
    page.locator("#confirm-yes").click()
    answer = disk.locator(".message.from-bot").filter(has_text="Disk now")
    expect(answer).to_be_visible(timeout=60_000)
    assert demo.host is not None
    system = HostSystem(demo.host.root)
    [volume] = [d for d in system.machine.disks if d.mount == "/var/log"]
    expect(answer).to_contain_text(
        re.compile(rf"/dev/vdb .* {percent_used(system.used(volume), volume.size)}% /var/log")
    )
    answer.scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "disk-full.png"), animations="disabled")
