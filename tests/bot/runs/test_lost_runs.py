"""``LossDetector``: the start-up scan for cards of lost runs, and a stop asked for during it."""

from __future__ import annotations

import pytest
import redis
from rq.exceptions import StopRequested

from bot.keys import Keys
from bot.runs.lost_runs import LossDetector


def test_a_stop_requested_during_the_scan_stops_the_worker_and_frees_the_scan(
    redis_client: redis.Redis, keys: Keys
) -> None:
    """RQ's SIGTERM handler raises ``StopRequested`` inside an idle worker's maintenance, where
    the scan runs (retrying an unreachable Slack): it must reach the worker, not be logged as a
    failed scan, and the next worker must be free to scan."""

    def stopped_mid_scan(_since: float) -> int:
        raise StopRequested()

    with pytest.raises(StopRequested):
        LossDetector(redis_client, keys, stopped_mid_scan)()
    assert not redis_client.exists(keys.lost_scan())  # freed: another worker scans at once
    assert not redis_client.exists(keys.data_marker())  # not done: the scan is owed
    assert LossDetector(redis_client, keys, lambda _since: 2)() == 2


def test_a_failed_scan_is_tried_again_later_not_at_once(redis_client: redis.Redis, keys: Keys) -> None:
    def slack_down(_since: float) -> int:
        raise ConnectionError("slack.com unreachable")

    now = [1000.0]
    detector = LossDetector(redis_client, keys, slack_down, clock=lambda: now[0])
    assert detector() is None
    assert detector() is None  # waiting: no second attempt at once
    assert not redis_client.exists(keys.lost_scan())
