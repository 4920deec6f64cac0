"""The feedback buttons under a streamed answer (Slack's ``feedback_buttons`` element in a
``context_actions`` block); what a click records is ``bot.slack.handlers.feedback``."""

from __future__ import annotations

from typing import Any

ACTION_FEEDBACK = "chatops_answer_feedback"
POSITIVE = "positive"
NEGATIVE = "negative"

__all__ = ["ACTION_FEEDBACK", "NEGATIVE", "POSITIVE", "feedback_blocks"]


def feedback_blocks(run_id: str) -> list[dict[str, Any]]:
    """The ``context_actions`` block with the run's two feedback buttons."""
    return [
        {
            "type": "context_actions",
            "block_id": f"feedback-{run_id}",
            "elements": [
                {
                    "type": "feedback_buttons",
                    "action_id": ACTION_FEEDBACK,
                    "positive_button": {
                        "text": {"type": "plain_text", "text": "Helpful"},
                        "value": f"{POSITIVE}:{run_id}",
                        "accessibility_label": "Mark this answer as helpful",
                    },
                    "negative_button": {
                        "text": {"type": "plain_text", "text": "Not helpful"},
                        "value": f"{NEGATIVE}:{run_id}",
                        "accessibility_label": "Mark this answer as not helpful",
                    },
                }
            ],
        }
    ]
