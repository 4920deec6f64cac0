"""The emulator's page shows a file the bot shared (files.completeUploadExternal): its title as
text (never markup), a preview, and a download link to the emulator itself."""

from __future__ import annotations

from typing import TYPE_CHECKING

from slack_sdk import WebClient

from emulator.slack import SlackEmulator, WorkspaceConfig

if TYPE_CHECKING:
    from playwright.sync_api import Page

TOKEN = "xoxb-page-token"


def test_a_shared_file_shows_as_text_with_a_preview_and_a_same_origin_link(page: Page) -> None:
    from playwright.sync_api import expect

    with SlackEmulator(WorkspaceConfig(bot_token=TOKEN)) as slack:
        web = WebClient(token=TOKEN, base_url=slack.api_url)
        parent = web.chat_postMessage(channel="C_INCIDENT", text="the incident")["ts"]
        web.files_upload_v2(
            channel="C_INCIDENT",
            thread_ts=parent,
            content="<img src=x onerror=alert(1)>\nthe whole answer",
            filename="answer.md",
            title="Answer <b>bold?</b>",
            initial_comment="The whole answer is attached.",
        )
        page.goto(slack.url + "/")
        expect(page.locator("body[data-ready=true]")).to_have_count(1)
        shared = page.locator(".file[data-file-id]")
        expect(shared.locator(".file-name")).to_have_text("Answer <b>bold?</b>")  # text, not markup
        expect(shared.locator(".file-preview")).to_contain_text("<img src=x onerror=alert(1)>")
        assert shared.locator("img").count() == 0
        href = shared.locator("a.file-name").get_attribute("href")
        assert href is not None and href.startswith(slack.url + "/files/")


def test_a_shared_png_shows_as_the_image_with_its_alt_text(page: Page) -> None:
    """A chart the bot uploads (a PNG, by its bytes) is shown as the picture, with its alt text as
    an attribute (never markup), loaded from the emulator itself."""
    from playwright.sync_api import expect

    from agent.series import Series
    from bot.runs.charts import Chart
    from bot.slack.rendering.chart import render_png

    chart = Chart("E2", "prometheus_range", "up", "last 5 min, step 2s", (Series("up", ((1.7e9, 1.0),)),))
    alt = 'Line chart of E2 <img src=x onerror="alert(1)">'
    with SlackEmulator(WorkspaceConfig(bot_token=TOKEN)) as slack:
        web = WebClient(token=TOKEN, base_url=slack.api_url)
        parent = web.chat_postMessage(channel="C_INCIDENT", text="the incident")["ts"]
        web.files_upload_v2(
            channel="C_INCIDENT",
            thread_ts=parent,
            file=render_png(chart),
            filename="chart-E2.png",
            title="E2 · prometheus_range: up",
            alt_txt=alt,
        )
        page.goto(slack.url + "/")
        expect(page.locator("body[data-ready=true]")).to_have_count(1)
        image = page.locator(".file[data-file-id] img.file-image")
        expect(image).to_have_attribute("alt", alt)
        expect(image).to_have_attribute("title", "E2 · prometheus_range: up")
        assert page.locator(".file .file-preview").count() == 0
        src = image.get_attribute("src")
        assert src is not None and src.startswith(slack.url + "/files/")
        page.wait_for_function("document.querySelector('img.file-image').naturalWidth > 0")
        assert image.evaluate("node => node.naturalWidth") == 800
        assert page.locator("img[src='x']").count() == 0  # the alt text stayed text
