"""Debian's Chromium for the browser tests: where it is, how it is launched, and why it cannot run here."""

from __future__ import annotations

import os

CHROMIUM = os.environ.get("CHATOPS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def browser_missing() -> str | None:
    """Why the browser test cannot run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[e2e]'; make test does it)"
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        return (
            f"Chromium is not installed at {CHROMIUM}: make test installs it with apt where it can "
            "(make browser); elsewhere install chromium or set CHATOPS_CHROMIUM to its path"
        )
    return None
