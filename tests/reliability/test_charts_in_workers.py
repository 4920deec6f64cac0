"""A chart through the production processes: Debian's Prometheus, the web app, a forking ``chatops``
worker subprocess (its work horse runs the run and exits after it) and the Slack emulator.

The chart is rendered and uploaded by the work horse's background sender; the horse's job waits for
the run's deliveries (the chart with the final card) before it exits, so the picture is in the
thread, once, with the answer.
"""

from __future__ import annotations

import io
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PIL import Image

from agent.types import RunStatus
from tests.reliability.cluster import Cluster
from tests.support.observability import Server, start_prometheus
from tests.support.waiting import wait_for

pytestmark = pytest.mark.reliability


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Server]:
    with start_prometheus(tmp_path / "prometheus") as server:
        yield server


def test_a_forked_work_horse_shares_the_chart_of_its_range_result(
    make_cluster: Callable[..., Cluster], prometheus: Server
) -> None:
    cluster = make_cluster(worker_env={"CHATOPS_PROMETHEUS_URL": prometheus.url})
    cluster.start_worker()
    ts = cluster.mention("range: up")
    cluster.wait_status(cluster.run_id(ts), RunStatus.COMPLETED)
    answer = wait_for(lambda: cluster.answers(ts), what="the answer")
    assert answer[0].startswith("done: 1 series (last 1 min, step 1s;")

    def shared() -> list[dict[str, object]]:
        return [f for m in cluster.bot_replies(ts) for f in m.get("files") or []]

    [chart] = wait_for(shared, what="the chart in the thread")
    assert chart["title"] == "E1 · prometheus_range: up" and chart["mimetype"] == "image/png"
    series = f'up{{instance="{prometheus.address}", job="prometheus"}}'
    assert f"query up: {series}: " in str(chart["alt_txt"])
    with urllib.request.urlopen(str(chart["url_private"]), timeout=5) as response:
        image = Image.open(io.BytesIO(response.read()))
    assert image.format == "PNG" and image.size == (chart["original_w"], chart["original_h"])
    cluster.settle()
    assert len(shared()) == 1 and len(cluster.control.calls("files.completeUploadExternal")) == 1
