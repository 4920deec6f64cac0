"""Events API callbacks that are not events: ``app_rate_limited``.

Slack sends ``{"type": "app_rate_limited", "minute_rate_limited": <epoch minute>, "team_id",
"api_app_id"}`` when the app's event deliveries pass 30,000 an hour in a workspace
(docs.slack.dev/reference/events/app_rate_limited): events of that minute are dropped, not
retried. Bolt has no listener for it and would answer 404; this middleware answers 200 (after
Bolt's signature check: an unsigned copy never gets this far) and logs what was lost, with the
minute, for the on-call to look at. A run whose mention fell in that minute is not started, and
the log line is the only trace of it, so it is an error, not a debug line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from slack_bolt import BoltResponse

log = logging.getLogger(__name__)

APP_RATE_LIMITED = "app_rate_limited"


def answer_app_rate_limited(body: dict[str, Any], next: Callable[[], BoltResponse]) -> BoltResponse | None:
    """Bolt middleware: acknowledge ``app_rate_limited`` with 200 and log it; pass anything else on."""
    if body.get("type") != APP_RATE_LIMITED:
        return next()
    minute = body.get("minute_rate_limited")
    when = (
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(minute))
        if isinstance(minute, int) and not isinstance(minute, bool)
        else "an unknown minute"
    )
    log.error(
        "Slack rate-limited this app's events in team %s at %s: events of that minute are dropped "
        "(more than 30,000 deliveries an hour); mentions made then must be repeated",
        str(body.get("team_id"))[:32],
        when,
    )
    return BoltResponse(status=200, body="")
