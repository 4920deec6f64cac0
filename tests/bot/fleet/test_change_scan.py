"""The runner's change scan: at start and every interval into its own target's journal, sealed with
its own key; a scan that raises is logged and the next one comes; changes of another target are
never stored; the runner built by the composition root scans when given a scan, and stops it."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
import redis

from bot.changes.journal import ChangeJournal
from bot.fleet.change_scan import ChangeScanThread
from bot.fleet.heartbeats import Heartbeats
from bot.fleet.target_keys import target_key
from bot.keys import Keys
from bot.ops.compose import build_runner
from bot.settings import Settings
from tests.support.runners import runner_settings
from tests.support.waiting import wait_for
from tools.changes.record import Change

SECRET = "s" * 32  # runner_settings's


def _journal(redis_client: redis.Redis, keys: Keys) -> ChangeJournal:
    return ChangeJournal(redis_client, keys, lambda target: target_key(SECRET.encode(), target))


class Host:
    """A scan function: each call returns the next batch, raises when the batch is an exception."""

    def __init__(self, *batches: Sequence[Change] | Exception) -> None:
        self.batches = list(batches)
        self.calls = 0
        self.lock = threading.Lock()

    def scan(self) -> Sequence[Change]:
        with self.lock:
            self.calls += 1
            batch = self.batches.pop(0) if self.batches else []
        if isinstance(batch, Exception):
            raise batch
        return batch


def _change(what: str, at: float = 1_800_000_000.0, target: str = "web-03") -> Change:
    return Change(target=target, kind="package", at=at, what=what, source="runner")


def test_the_scan_runs_at_start_and_again_and_survives_a_scan_that_raises(
    redis_client: redis.Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    host = Host([_change("upgrade nginx")], RuntimeError("dpkg.log vanished"), [_change("edited nginx.conf")])
    thread = ChangeScanThread(host.scan, _journal(redis_client, keys), "web-03", interval=0.05)
    thread.start()
    try:
        wait_for(lambda: thread.scans >= 2 and thread.failures >= 1, what="three scans, one failing")
    finally:
        thread.stop(timeout=10)
    stored = [c.what for c in _journal(redis_client, keys).between("web-03", 0, 2e9)]
    assert stored == ["upgrade nginx", "edited nginx.conf"]
    assert "the change scan of web-03 failed" in caplog.text and "dpkg.log vanished" in caplog.text


def test_a_change_of_another_target_is_not_stored(
    redis_client: redis.Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    host = Host([_change("mine"), _change("forged deploy", target="db-01")])
    thread = ChangeScanThread(host.scan, _journal(redis_client, keys), "web-03", interval=60)
    assert thread.scan_once() == 1
    assert _journal(redis_client, keys).between("db-01", 0, 2e9) == []
    assert not redis_client.exists(keys.changes("db-01"))
    assert "change(s) of other targets: dropped" in caplog.text


@pytest.fixture
def settings(tmp_path: Path, redis_url: str, keys: Keys, queue_name: str) -> Settings:
    inventory = {"targets": [{"name": "web-03", "via": "runner"}]}
    return runner_settings(
        tmp_path,
        redis_url,
        keys.prefix,
        queue_name,
        inventory,
        chatops_runner_state_dir=tmp_path / "state",
        chatops_changes_scan_seconds=30,
    )


def test_the_runner_scans_when_given_a_scan_and_stops_it_with_itself(
    settings: Settings, redis_client: redis.Redis, keys: Keys
) -> None:
    host = Host([_change("upgrade openssl")])
    runner = build_runner(settings, redis_client, "web-03", scan=host.scan)
    assert runner.change_scan is not None and runner.change_scan.interval == 30
    runner.work(burst=True)  # an empty queue: it starts, scans once, and stops
    assert host.calls == 1 and [c.what for c in _journal(redis_client, keys).between("web-03", 0, 2e9)] == [
        "upgrade openssl"
    ]
    assert not runner.change_scan.running
    beat = Heartbeats(redis_client, keys, 5).get("web-03")  # when its journal was brought up to date
    assert beat is not None and beat.scanned_at is not None and beat.scanned_at <= beat.seen_at


def test_chatops_runner_scans_its_own_host_under_its_root_and_names_paths_as_the_host_does(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis, keys: Keys, queue_name: str
) -> None:
    root = tmp_path / "host"  # the host's / as a containerised runner sees it (CHATOPS_CHANGES_ROOT)
    (root / "var/log").mkdir(parents=True)
    (root / "var/log/dpkg.log").write_text("2026-12-03 10:01:02 upgrade nginx:amd64 1.24.0-1 1.24.0-2\n")
    site = root / "etc/nginx/sites-enabled/shop"
    site.parent.mkdir(parents=True)
    site.write_text("client_max_body_size 25m;\npassword=hunter2\n")
    inventory = {"targets": [{"name": "web-03", "via": "runner", "watch": ["/etc/nginx"]}]}
    settings = runner_settings(
        tmp_path,
        redis_url,
        keys.prefix,
        queue_name,
        inventory,
        chatops_runner_state_dir=tmp_path / "state",
        chatops_changes_root=root,
        chatops_service_backend="kubernetes",  # no systemctl on this machine's behalf
    )
    runner = build_runner(settings, redis_client, "web-03")
    assert runner.change_scan is not None
    assert runner.change_scan.scan_once() == 1  # the baseline: the package history, no "created" flood
    site.write_text("client_max_body_size 1m;\npassword=hunter3\n")
    assert runner.change_scan.scan_once() == 1
    package, edit = _journal(redis_client, keys).between("web-03", 0, 2e9)
    assert package.what == "upgrade nginx 1.24.0-1 -> 1.24.0-2"
    assert edit.what == "edited /etc/nginx/sites-enabled/shop" and str(tmp_path) not in edit.diff
    assert "+client_max_body_size 1m;" in edit.diff and "hunter" not in edit.diff
    kept = [p.read_bytes() for p in (tmp_path / "state").rglob("*") if p.is_file()]
    assert kept and not any(b"hunter" in data for data in kept)  # redacted before anything is stored
