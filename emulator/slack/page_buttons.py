"""Buttons the page shows above the channels for whoever runs the emulator (the demo's "Fire an
alert"): not Slack's, so nothing about them reaches the bot through Slack. ``press`` runs in the
emulator's process and answers the text the page shows (a toast)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

Press = Callable[[str], str]
"""Called with the id of the person acting on the page; answers what to tell them."""


@dataclass(frozen=True)
class PageButton:
    id: str
    label: str
    title: str  # the tooltip: what a press does
    press: Press


class PageButtons:
    """The buttons, in the order they were added."""

    def __init__(self) -> None:
        self._buttons: dict[str, PageButton] = {}
        self._lock = threading.Lock()

    def add(self, button: PageButton) -> None:
        with self._lock:
            self._buttons[button.id] = button

    def listed(self) -> list[dict[str, str]]:
        with self._lock:
            return [{"id": b.id, "label": b.label, "title": b.title} for b in self._buttons.values()]

    def press(self, button_id: str, user: str) -> str | None:
        """What pressing it says; None when there is no such button."""
        with self._lock:
            button = self._buttons.get(button_id)
        return None if button is None else button.press(user)
