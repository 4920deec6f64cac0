"""Watched files: diffs of redacted snapshots, new and deleted files, and every hostile file bounded."""

from __future__ import annotations

import json
import os

import pytest

from tests.tools.changes.conftest import Host, only, whats
from tools.changes.content import Limits
from tools.changes.record import FILE, MAX_DIFF, MAX_WHAT

CONF = "/etc/myapp/config.yaml"
NGINX = "/etc/nginx"


@pytest.fixture
def watched(host: Host) -> Host:
    host.write(CONF, "listen: 8080\nworkers: 4\ndb_password=hunter2\n")
    host.write(f"{NGINX}/nginx.conf", "worker_processes 4;\nevents {}\n")
    host.write(f"{NGINX}/sites-enabled/default", "server { listen 80; }\n")
    host.watch = [host.path(CONF), host.path(NGINX)]
    return host


def snapshots(host: Host) -> str:
    """Every byte the scanner keeps on disk."""
    kept = [path.read_bytes() for path in host.state_dir.rglob("*") if path.is_file()]
    return b"\n".join(kept).decode("utf-8", errors="replace")


def test_the_first_scan_is_a_baseline_not_a_flood_of_created_files(watched: Host) -> None:
    report = watched.scanner().scan()
    assert report.changes == []
    assert report.problems == []


def test_an_edit_is_a_diff_with_its_secrets_redacted_on_disk_and_in_the_diff(watched: Host) -> None:
    watched.scanner().scan()
    watched.write(
        CONF, "listen: 8081\nworkers: 4\ndb_password=hunter3\ndsn: postgres://u:s3cr3t-from-env@db/x\n"
    )

    report = watched.scanner().scan()  # a restarted runner: the baseline came from disk

    change = only(report, FILE)
    assert change.what == f"edited {CONF}"
    assert change.seen and change.at == watched.now
    assert "-listen: 8080" in change.diff and "+listen: 8081" in change.diff
    assert change.diff.startswith(f"--- a{CONF}\n+++ b{CONF}")  # the host's names, not the root's
    for secret in ("hunter2", "hunter3", "s3cr3t-from-env"):
        assert secret not in change.diff
        assert secret not in snapshots(watched)
    assert "[REDACTED]" in change.diff


def test_a_change_of_a_secret_alone_is_told_without_showing_it(watched: Host) -> None:
    watched.scanner().scan()
    watched.write(CONF, "listen: 8080\nworkers: 4\ndb_password=rotated-value\n")
    change = only(watched.scanner().scan(), FILE)
    assert change.what.endswith("(only redacted content changed)")
    assert change.diff == ""


def test_new_and_deleted_files_in_a_watched_tree(watched: Host) -> None:
    scanner = watched.scanner()
    scanner.scan()
    watched.write(f"{NGINX}/conf.d/gzip.conf", "gzip on;\n")
    watched.path(f"{NGINX}/sites-enabled/default").unlink()

    report = scanner.scan()

    created, deleted = sorted(report.changes, key=lambda change: change.what)
    assert created.what == f"created {NGINX}/conf.d/gzip.conf"
    assert "--- /dev/null" in created.diff and "+gzip on;" in created.diff
    assert deleted.what == f"deleted {NGINX}/sites-enabled/default"
    assert "-server { listen 80; }" in deleted.diff
    assert scanner.scan().changes == []


def test_a_touched_file_with_the_same_content_is_no_change(watched: Host) -> None:
    scanner = watched.scanner()
    scanner.scan()
    os.utime(watched.path(CONF), ns=(1, 1))
    assert scanner.scan().changes == []


def test_a_symlink_out_of_the_tree_is_not_followed_and_told_once(watched: Host) -> None:
    outside = watched.write("/etc/shadow", "root:$6$verysecrethash:19000:0:99999:7:::\n")
    link = watched.path(f"{NGINX}/leak.conf")
    scanner = watched.scanner()
    scanner.scan()
    link.symlink_to(outside)

    report = scanner.scan()

    change = only(report, FILE)
    assert change.what == f"created {watched.named(link)}"
    assert "verysecrethash" not in change.diff and "verysecrethash" not in snapshots(watched)
    assert f"+symlink -> {outside}" in change.diff
    assert [problem for problem in report.problems if "out of the watched tree" in problem]
    outside.write_text("root:$6$changedhash:19000:0:99999:7:::\n")
    again = scanner.scan()
    assert again.changes == [] and again.problems == []


def test_a_huge_file_is_watched_by_size_and_digest_only(watched: Host) -> None:
    watched.limits = Limits(max_text_bytes=1024)
    big = watched.write(f"{NGINX}/big.log", "password=hunter2\n" + "x" * 5000)
    scanner = watched.scanner()
    first = scanner.scan()
    assert [problem for problem in first.problems if "larger than 1024 bytes" in problem]
    big.write_text("password=hunter2\n" + "y" * 6000)

    report = scanner.scan()

    change = only(report, FILE)
    assert change.what == f"edited {watched.named(big)} (large file, 5017 -> 6017 bytes; content not kept)"
    assert change.diff == ""
    assert "hunter2" not in snapshots(watched)
    assert report.problems == []  # told once


def test_a_binary_file_is_watched_by_digest_only(watched: Host) -> None:
    blob = watched.write(f"{NGINX}/cert.der", b"\x00\x01binary" * 10)
    scanner = watched.scanner()
    scanner.scan()
    blob.write_bytes(b"\x00\x02binary" * 11)
    change = only(scanner.scan(), FILE)
    assert change.what == f"edited {watched.named(blob)} (binary, 80 -> 88 bytes)"
    assert change.diff == ""


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_an_unreadable_file_is_told_once(watched: Host) -> None:
    scanner = watched.scanner()
    scanner.scan()
    secret = watched.write(f"{NGINX}/secret.key", "KEY\n")
    secret.chmod(0)

    report = scanner.scan()

    assert only(report, FILE).what.startswith(f"created {watched.named(secret)} (cannot read it")
    assert [problem for problem in report.problems if "cannot read it" in problem]
    secret.chmod(0)  # the same again
    assert scanner.scan().problems == []


def test_the_number_of_files_per_tree_is_capped_and_said(watched: Host) -> None:
    watched.limits = Limits(max_files_per_tree=5)
    for number in range(10):
        watched.write(f"{NGINX}/conf.d/{number:02}.conf", f"# {number}\n")
    scanner = watched.scanner()
    first = scanner.scan()
    assert [problem for problem in first.problems if "more than 5 files" in problem]
    assert scanner.scan().problems == []  # told once while it lasts
    watched.write(f"{NGINX}/conf.d/09.conf", "# changed past the cap\n")
    assert scanner.scan().changes == []


def test_hostile_content_is_bounded(watched: Host) -> None:
    scanner = watched.scanner()
    scanner.scan()
    watched.write(f"{NGINX}/mention.conf", "<!channel> <@U123> *bold*\n" * 2000)
    watched.write(f"{NGINX}/oneline.conf", "a" * 10_000_000)  # a 10 MB line: over the text cap
    evil = "\n<!here>"
    watched.write(f"{NGINX}/{evil}.conf", "x\n")

    report = scanner.scan()

    assert len(report.changes) == 3
    for change in report.changes:
        assert change == change.bounded()
        assert len(change.diff) <= MAX_DIFF and len(change.what) <= MAX_WHAT
        assert "\n" not in change.what
    assert any("\\n<!here>" in change.what for change in report.changes)


def test_a_corrupt_state_file_is_a_fresh_baseline(watched: Host) -> None:
    watched.scanner().scan()
    (watched.state_dir / "watch.json").write_text('{"trees": {"file:/x": {"files": {"/x": "junk"}}}')
    watched.write(CONF, "edited\n")
    report = watched.scanner().scan()
    assert report.changes == []
    assert any("fresh baseline" in problem for problem in report.problems)
    watched.write(CONF, "edited again\n")
    assert whats(watched.scanner().scan()) == [f"edited {CONF}"]


def test_damaged_entries_in_a_valid_state_file_do_not_break_the_scan(watched: Host) -> None:
    watched.scanner().scan()
    path = str(watched.path(CONF))
    key = f"file:{path}"
    damaged = {"trees": {key: {"files": {path: [1, 2, "x", None, 5]}}}, "told": 7}
    (watched.state_dir / "watch.json").write_text(json.dumps(damaged))
    report = watched.scanner().scan()
    assert not [problem for problem in report.problems if "not scanned" in problem]


def test_a_lost_digest_key_is_a_fresh_baseline(watched: Host) -> None:
    watched.scanner().scan()
    (watched.state_dir / "digest.key").unlink()
    report = watched.scanner().scan()
    assert report.changes == []


def test_a_watched_path_that_does_not_exist_yet(host: Host) -> None:
    host.watch = [host.path("/etc/later.conf")]
    scanner = host.scanner()
    assert scanner.scan().changes == []
    host.write("/etc/later.conf", "now here\n")
    assert whats(scanner.scan()) == [f"created {'/etc/later.conf'}"]


def test_state_files_are_private(watched: Host) -> None:
    watched.scanner().scan()
    for path in [watched.state_dir, *watched.state_dir.rglob("*")]:
        mode = path.stat().st_mode & 0o777
        assert mode & 0o077 == 0, (path, oct(mode))


def test_a_watched_tree_holding_the_state_dir_does_not_watch_its_own_snapshots(host: Host) -> None:
    host.state_dir = host.path("/var/lib/chatops-runner/changes/web-03")
    host.write("/var/lib/app.conf", "a=1\n")
    host.watch = [host.path("/var/lib")]
    scanner = host.scanner()
    scanner.scan()
    host.write("/var/lib/app.conf", "a=2\n")
    assert whats(scanner.scan()) == [f"edited {'/var/lib/app.conf'}"]
    assert scanner.scan().changes == []
