"""Package changes from dpkg's log and apt's history: rotated, gzipped, incremental, hostile."""

from __future__ import annotations

import gzip
import os
from datetime import datetime

from tests.tools.changes.conftest import Host, whats
from tools.changes.record import MAX_WHAT, PACKAGE

DPKG = "/var/log/dpkg.log"
APT = "/var/log/apt/history.log"


def local(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S").timestamp()


def append(host: Host, absolute: str, text: str) -> None:
    with open(host.path(absolute), "a") as handle:
        handle.write(text)


def test_the_first_scan_reads_the_history_plain_rotated_and_gzipped(host: Host) -> None:
    host.write(DPKG, "2026-12-03 10:01:02 upgrade nginx:amd64 1.24.0-1 1.24.0-2\n")
    host.write(f"{DPKG}.1", "2026-11-20 08:00:00 install curl:amd64 <none> 8.5.0-2\n")
    with gzip.open(host.path(f"{DPKG}.2.gz"), "wt") as handle:
        handle.write("2026-10-01 09:30:00 remove telnet:amd64 0.17-44 <none>\n")
        handle.write("2026-10-01 09:30:01 status installed telnet:amd64 0.17-44\n")

    report = host.scanner().scan()

    assert whats(report) == [
        "remove telnet 0.17-44",
        "install curl 8.5.0-2",
        "upgrade nginx 1.24.0-1 -> 1.24.0-2",
    ]
    assert report.changes[-1].at == local("2026-12-03 10:01:02")
    assert {change.kind for change in report.changes} == {PACKAGE}
    assert not report.changes[-1].seen
    assert report.problems == []


def test_a_later_scan_reads_only_what_is_new(host: Host) -> None:
    host.write(DPKG, "2026-12-03 10:01:02 upgrade nginx:amd64 1.24.0-1 1.24.0-2\n")
    host.scanner().scan()
    assert host.scanner().scan().changes == []  # a restarted runner: nothing new

    append(host, DPKG, "2026-12-03 11:00:00 upgrade openssl:amd64 3.0.2-1 3.0.2-2\n2026-12-03 11:00:0")
    assert whats(host.scanner().scan()) == ["upgrade openssl 3.0.2-1 -> 3.0.2-2"]  # the half line waits

    append(host, DPKG, "1 install jq:amd64 <none> 1.7.1-3\n")
    assert whats(host.scanner().scan()) == ["install jq 1.7.1-3"]


def test_a_rotation_between_scans_loses_nothing(host: Host) -> None:
    host.write(DPKG, "2026-12-03 10:01:02 upgrade nginx:amd64 1.24.0-1 1.24.0-2\n")
    scanner = host.scanner()
    scanner.scan()
    append(host, DPKG, "2026-12-03 11:00:00 upgrade openssl:amd64 3.0.2-1 3.0.2-2\n")
    os.rename(host.path(DPKG), host.path(f"{DPKG}.1"))  # logrotate, delaycompress
    host.write(DPKG, "2026-12-04 00:00:05 install jq:amd64 <none> 1.7.1-3\n")

    report = scanner.scan()

    assert whats(report) == ["upgrade openssl 3.0.2-1 -> 3.0.2-2", "install jq 1.7.1-3"]
    assert report.problems == []


def test_a_rotation_straight_to_gzip_is_followed_into_the_gzip(host: Host) -> None:
    host.write(DPKG, "2026-12-03 10:01:02 upgrade nginx:amd64 1.24.0-1 1.24.0-2\n")
    scanner = host.scanner()
    scanner.scan()
    append(host, DPKG, "2026-12-03 11:00:00 upgrade openssl:amd64 3.0.2-1 3.0.2-2\n")
    with open(host.path(DPKG), "rb") as old, gzip.open(host.path(f"{DPKG}.1.gz"), "wb") as packed:
        packed.write(old.read())
    host.path(DPKG).unlink()
    host.write(DPKG, "2026-12-04 00:00:05 install jq:amd64 <none> 1.7.1-3\n")

    assert whats(scanner.scan()) == ["upgrade openssl 3.0.2-1 -> 3.0.2-2", "install jq 1.7.1-3"]


def test_apt_history_says_who_and_its_dpkg_lines_are_not_repeated(host: Host) -> None:
    host.write(
        APT,
        "\nStart-Date: 2026-12-03  10:01:00\n"
        "Commandline: apt-get install nginx\n"
        "Requested-By: alice (1000)\n"
        "Install: libfoo:amd64 (1.0, automatic)\n"
        "Upgrade: nginx:amd64 (1.24.0-1, 1.24.0-2)\n"
        "End-Date: 2026-12-03  10:01:05\n",
    )
    host.write(
        DPKG,
        "2026-12-03 10:01:02 install libfoo:amd64 <none> 1.0\n"
        "2026-12-03 10:01:03 upgrade nginx:amd64 1.24.0-1 1.24.0-2\n"
        "2026-12-03 12:00:00 upgrade curl:amd64 8.5.0-1 8.5.0-2\n",
    )

    report = host.scanner().scan()

    first, second = report.changes
    assert first.what == "install libfoo 1.0, upgrade nginx 1.24.0-1 -> 1.24.0-2 (apt-get install nginx)"
    assert first.who == "alice"
    assert first.at == local("2026-12-03 10:01:00")
    assert "upgrade nginx 1.24.0-1 -> 1.24.0-2" in first.diff
    assert second.what == "upgrade curl 8.5.0-1 -> 8.5.0-2"
    assert second.who == ""


def test_an_apt_transaction_still_running_is_read_when_it_ends(host: Host) -> None:
    host.write(APT, "Start-Date: 2026-12-03  10:01:00\nRequested-By: bob (1001)\nUpgrade: vim:amd64 (2, 3)\n")
    scanner = host.scanner()
    assert scanner.scan().changes == []
    append(host, APT, "End-Date: 2026-12-03  10:01:09\n")
    report = scanner.scan()
    assert whats(report) == ["upgrade vim 2 -> 3"]
    assert report.changes[0].who == "bob"


def test_hostile_log_lines_are_skipped_or_bounded(host: Host) -> None:
    host.write(
        DPKG,
        "garbage <!channel> line\n"
        f"2026-12-03 10:01:02 upgrade {'<!channel>' * 15}:amd64 1 2\n"
        "2026-13-45 10:01:02 upgrade bad-date:amd64 1 2\n"
        + "2026-12-03 10:01:03 install "
        + "x" * 10_000_000
        + " <none> 1\n",
    )
    report = host.scanner().scan()
    assert len(report.changes) == 1
    assert len(report.changes[0].what) <= MAX_WHAT
    assert report.changes[0].what.startswith("upgrade <!channel>")  # bounded here; shown inert by readers


def test_a_missing_log_is_no_change_and_no_problem(host: Host) -> None:
    report = host.scanner().scan()
    assert report.changes == []
    assert report.problems == []


def test_a_corrupt_state_file_reads_the_history_again(host: Host) -> None:
    host.write(DPKG, "2026-12-03 10:01:02 upgrade nginx:amd64 1.24.0-1 1.24.0-2\n")
    first = host.scanner().scan()
    (host.state_dir / "packages.json").write_text("{not json")

    again = host.scanner().scan()

    assert [change.id for change in again.changes] == [change.id for change in first.changes]
    assert any("unreadable" in problem for problem in again.problems)
