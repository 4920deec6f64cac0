"""The decline modal's reason field: Slack itself adds "(optional)" to an optional input's label."""

from __future__ import annotations

from bot.slack.rendering import render


def test_the_reason_label_says_optional_once() -> None:
    view = render.decline_modal("a1", {"channel": "C1", "ts": "1.0"}, "service_restart")
    (field,) = [block for block in view["blocks"] if block["type"] == "input"]
    assert field["optional"] is True
    assert field["label"]["text"] == "Reason"  # was "Reason (optional)", shown as "... (optional) (optional)"
