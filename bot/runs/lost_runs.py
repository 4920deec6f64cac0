"""Runs Redis lost: noticing that Redis came back without its data, and telling each thread once.

A run waiting for approval has no job, so nothing of chatops touches it until someone clicks:
after Redis restarts empty, its card would say "Waiting for approval" for ever. Two things find
such cards (``bot/slack/delivery/lost_cards.py`` does the Slack half):

* a click on a card whose run or approval Redis does not know redraws that card as lost (the
  web process, ``bot/slack/handlers/actions.py``);
* this module's ``LossDetector``, run by every worker with its recovery sweep (at start, then
  once per ``CHATOPS_LEASE_TTL_SECONDS``: ``bot.ops.worker.recovery_interval``): ``{p}data_marker``
  (``bot.keys``) is written once and never expires, so finding it gone means Redis lost its data
  (or this is the first start). One worker (a lock) then scans the last day of Slack for the bot's
  cards still showing buttons whose ids Redis does not know, redraws each, and writes the marker
  again.

A thread is told once (``claim_notice``: ``{p}lost:notice:{channel}:{thread_ts}``), whoever tells
it: the sweep, a click, or the job that found its run gone mid-work (``bot/runs/jobs.py``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

import redis
from rq.exceptions import StopRequested

from bot.claims import claim_once, release_lock, take_lock
from bot.keys import Keys

log = logging.getLogger(__name__)

LOST_NOTICE = (
    ":warning: This run's state was lost (Redis restarted without its data); nothing will run for it. "
    "Mention me again to start over."
)
NOTICE_SECONDS = 2 * 24 * 3600  # a second loss wipes the claim anyway; this only bounds its life
SCAN_LOCK_SECONDS = 10 * 60.0  # longer than a scan takes; a worker that dies mid-scan frees it so
SCAN_WINDOW_SECONDS = 24 * 3600  # how far back in each channel's history the sweep looks
RETRY_SECONDS = 300.0  # after a failed scan (Slack down, a missing scope), before trying again

Scan = Callable[[float], int]  # (oldest epoch second) -> cards redrawn


def claim_notice(client: redis.Redis, keys: Keys, channel: str, thread_ts: str) -> bool:
    """True for the first caller since Redis lost its data: it tells the thread, nobody else does."""
    return claim_once(client, keys.lost_notice(channel, thread_ts), NOTICE_SECONDS)


class LossDetector:
    """Scans Slack for lost cards when the data marker is missing (see the module docstring)."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        scan: Scan,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._redis = client
        self._keys = keys
        self._scan = scan
        self._clock = clock
        self._wall = wall_clock
        self._not_before = float("-inf")

    def __call__(self) -> int | None:
        """Cards redrawn by this call's scan; ``None`` when it did not scan (data intact, another
        worker scanning, or waiting after a failure). Redis errors propagate to the caller."""
        if self._clock() < self._not_before or self._redis.exists(self._keys.data_marker()):
            return None
        token = take_lock(self._redis, self._keys.lost_scan(), SCAN_LOCK_SECONDS)
        if token is None:
            return None  # another worker scans
        try:
            redrawn = self._scan(self._wall() - SCAN_WINDOW_SECONDS)
        except StopRequested:
            # RQ's SIGTERM handler raises it in an idle worker (the scan runs in its maintenance):
            # swallowed, the worker would ignore the stop and run on until SIGKILL.
            self._release(token)
            raise
        except Exception:
            log.exception("the scan for cards of lost runs failed; trying again in %.0f s", RETRY_SECONDS)
            self._not_before = self._clock() + RETRY_SECONDS
            self._release(token)
            return None
        # The marker last: a worker that dies mid-scan leaves it missing, so the scan is done again.
        marker = json.dumps({"written_at": self._wall()})
        self._redis.set(self._keys.data_marker(), marker, nx=True)
        self._release(token)
        if redrawn:
            log.warning(
                "Redis had lost its data: %d card(s) of lost runs redrawn and their threads told", redrawn
            )
        return redrawn

    def _release(self, token: str) -> None:
        release_lock(self._redis, self._keys.lost_scan(), token)
