"""``chatops doctor``'s line about the change journal (``bot.changes``): there is one only with
``CHATOPS_RUNNER_SECRET``, which seals each target's entries and checks them when they are read."""

from __future__ import annotations

from bot.ops.doctor_check import Check, Outcome
from bot.settings import Settings


def check_changes(settings: Settings) -> Check:
    days = settings.chatops_changes_days
    if not settings.chatops_runner_secret:
        return Check(
            "changes",
            Outcome.PASS,  # a choice, like no runbook folder: nothing is broken
            "no change journal: CHATOPS_RUNNER_SECRET is not set, so no change can be sealed or read "
            "(recent_changes says so; alert roots list no change)",
        )
    return Check(
        "changes", Outcome.PASS, f"change journal sealed per target, kept {days} days (CHATOPS_CHANGES_DAYS)"
    )
