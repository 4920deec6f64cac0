"""Browser fixtures: the local demo (``emulator.demo.main.Demo``) and Debian's Chromium driven by Playwright.

Playwright's own browser download is never used: the test launches ``/usr/bin/chromium`` (or
``CHATOPS_CHROMIUM``), which ``make test`` installs with apt where it can (``make browser``).
Without Chromium or the ``playwright`` package the browser tests are skipped, saying why; with
``CHATOPS_REQUIRE_BROWSER=1`` they fail instead.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from emulator.demo.main import Demo, Options
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, browser_missing
from tests.support.redis_cleanup import ISSUED

if TYPE_CHECKING:
    from playwright.sync_api import Page

WAIT_MS = 60_000


@pytest.fixture
def page(tmp_path: Path) -> Iterator[Page]:
    """A page of a fresh headless Chromium (its own profile, no network but localhost needed)."""
    reason = browser_missing()
    if reason is not None:
        if os.environ.get("CHATOPS_REQUIRE_BROWSER"):
            pytest.fail(f"CHATOPS_REQUIRE_BROWSER is set but {reason}")
        pytest.skip(reason)
    from playwright.sync_api import expect, sync_playwright

    # Playwright's assertions wait 5 s by default, its actions 30 s: both are bounds for a hang
    # only here (a busy machine answers later, never differently).
    expect.set_options(timeout=WAIT_MS)
    profile = tmp_path / "chromium-profile"
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1600, "height": 1000},
        )
        context.set_default_timeout(WAIT_MS)
        try:
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def demo(redis_url: str, request: pytest.FixtureRequest) -> Iterator[Demo]:
    """The demo in this process (its web and worker are child processes), on the test's Redis.

    Its folder has a short path: the paths the tools show (and the screenshot) stay readable.
    """
    directory = Path(tempfile.mkdtemp(prefix="chatops-demo-"))
    options = Options(
        directory=directory,
        port=0,
        latency=0.0,
        redis_url=redis_url,
        open_browser=False,
        activity=False,
    )
    running = Demo(options, out=io.StringIO())
    # It removes its keys and queues when it stops: the session's check holds it to that.
    ISSUED.add(prefix=running.key_prefix, queue=running.queue, owner=request.node.nodeid)
    try:
        running.start()
        yield running
    finally:
        running.stop()
        shutil.rmtree(directory, ignore_errors=True)
