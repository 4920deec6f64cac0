"""Unit files, restarts, failures, reboots and crontabs, each within one scan."""

from __future__ import annotations

import os
import time
from pathlib import Path

from emulator.demo.system import write_clock
from emulator.demo.systemctl import install_units, systemctl_main, write_systemctl
from tests.tools.changes.conftest import BOOT, Host, only, whats
from tools.changes.record import CRONTAB, FAILURE, REBOOT, RESTART, UNIT
from tools.changes.systemd import parse_show, parse_timestamp, systemctl_reader

NGINX_UNIT = "/etc/systemd/system/nginx.service"


def stamp(at: float) -> str:
    return time.strftime("%a %Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


def running(started: float, restarts: int = 0) -> dict[str, str]:
    return {
        "ActiveState": "active",
        "Result": "success",
        "ActiveEnterTimestamp": stamp(started),
        "NRestarts": str(restarts),
    }


def test_a_new_edited_and_removed_unit_file(host: Host) -> None:
    host.write("/lib/systemd/system/ssh.service", "[Service]\nExecStart=/usr/sbin/sshd -D\n")
    scanner = host.scanner()
    assert scanner.scan().changes == []
    host.write(NGINX_UNIT, "[Service]\nExecStart=/usr/sbin/nginx\n")
    created = only(scanner.scan(), UNIT)
    assert created.what == f"unit file created {NGINX_UNIT}"
    assert "+ExecStart=/usr/sbin/nginx" in created.diff

    host.write("/lib/systemd/system/ssh.service", "[Service]\nExecStart=/usr/sbin/sshd -D -e\n")
    host.path(NGINX_UNIT).unlink()
    assert sorted(whats(scanner.scan())) == [
        f"unit file deleted {NGINX_UNIT}",
        f"unit file edited {'/lib/systemd/system/ssh.service'}",
    ]


def test_an_enabled_unit_link_is_a_change_and_not_a_problem(host: Host) -> None:
    host.write("/lib/systemd/system/nginx.service", "[Service]\n")
    scanner = host.scanner()
    scanner.scan()
    wants = host.path("/etc/systemd/system/multi-user.target.wants")
    wants.mkdir(parents=True)
    (wants / "nginx.service").symlink_to(host.path("/lib/systemd/system/nginx.service"))
    report = scanner.scan()
    assert only(report, UNIT).what == f"unit file created {host.named(wants)}/nginx.service"
    assert report.problems == []


def test_a_restart_is_a_change_at_the_units_start_time(host: Host) -> None:
    host.units["nginx.service"] = running(BOOT + 30)
    host.units["api.service"] = running(BOOT + 31)
    scanner = host.scanner()
    assert scanner.scan().changes == []  # started by the boot: no change
    host.units["nginx.service"] = running(host.now - 120)

    change = only(scanner.scan(), RESTART)

    assert change.what == "restart of nginx.service"
    assert change.at == host.now - 120 and not change.seen
    assert scanner.scan().changes == []


def test_an_automatic_restart_and_a_failure(host: Host) -> None:
    host.units["api.service"] = running(BOOT + 30)
    scanner = host.scanner()
    scanner.scan()
    host.units["api.service"] = running(host.now - 60, restarts=1)
    assert only(scanner.scan(), RESTART).what == "automatic restart of api.service"

    host.units["api.service"] = {**running(host.now - 60, 1), "ActiveState": "failed", "Result": "exit-code"}
    failure = only(scanner.scan(), FAILURE)
    assert failure.what == "api.service failed (result exit-code)"
    assert failure.seen and failure.at == host.now
    assert scanner.scan().changes == []  # still failed: told once


def test_the_first_scan_reports_failed_units_and_restarts_after_boot(host: Host) -> None:
    host.units["nginx.service"] = running(BOOT + 30)
    host.units["api.service"] = running(host.now - 600)
    host.units["cron.service"] = {"ActiveState": "failed", "Result": "signal"}
    report = host.scanner().scan()
    assert sorted(whats(report)) == ["cron.service failed (result signal)", "restart of api.service"]


def test_a_failing_systemd_reader_is_a_problem_not_a_crash(host: Host) -> None:
    def broken() -> dict[str, dict[str, str]]:
        raise OSError("systemctl: not found")

    host.reader = broken
    scanner = host.scanner()
    assert scanner.scan().problems == ["services: not scanned: OSError: systemctl: not found"]
    assert scanner.scan().problems == []  # told once while it fails the same way


def test_a_reboot_is_a_change_at_the_boot_time(host: Host) -> None:
    scanner = host.scanner()
    assert scanner.scan().changes == []
    rebooted = host.now - 30
    host.boot("22222222-2222-2222-2222-222222222222", rebooted)

    change = only(scanner.scan(), REBOOT)

    assert change.at == rebooted and not change.seen
    assert "22222222" in change.what
    assert host.scanner().scan().changes == []


def test_a_reboot_without_a_boot_time_is_seen_at_the_scan(host: Host) -> None:
    host.scanner().scan()
    host.boot("33333333-3333-3333-3333-333333333333", BOOT)
    host.path("/proc/stat").write_text("cpu 1 2 3\n")
    change = only(host.scanner().scan(), REBOOT)
    assert change.seen and change.at == host.now


def test_a_crontab_edit_is_a_diff(host: Host) -> None:
    host.write("/etc/crontab", "17 * * * * root cd / && run-parts --report /etc/cron.hourly\n")
    host.write("/var/spool/cron/crontabs/alice", "0 3 * * * /home/alice/backup.sh\n")
    scanner = host.scanner()
    scanner.scan()
    host.write("/var/spool/cron/crontabs/alice", "0 3 * * * /home/alice/backup.sh --token=abcdef123456\n")
    host.write("/etc/cron.d/certbot", "0 */12 * * * root certbot -q renew\n")

    report = scanner.scan()

    edited, created = sorted(report.changes, key=lambda change: change.what, reverse=True)
    assert {edited.kind, created.kind} == {CRONTAB}
    assert edited.what == f"crontab edited {'/var/spool/cron/crontabs/alice'}"
    assert "abcdef123456" not in edited.diff and "[REDACTED]" in edited.diff
    assert created.what == f"crontab created {'/etc/cron.d/certbot'}"


def test_the_reader_reads_systemctl_show_through_the_demos_systemctl(tmp_path: Path, host: Host) -> None:
    demo = tmp_path / "demo"
    install_units(demo / "run" / "systemd", BOOT)
    bin_dir = write_systemctl(tmp_path / "bin", demo).parent
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    reader = systemctl_reader(["nginx.service", "api.service"], env=env)
    host.reader = reader  # the real reader, over the demo host's systemctl
    scanner = host.scanner()
    assert set(reader()) == {"nginx.service", "api.service"}
    assert scanner.scan().changes == []
    write_clock(demo, host.now - 5)
    assert systemctl_main(["restart", "nginx"], str(demo)) == 0

    change = only(scanner.scan(), RESTART)

    assert change.what == "restart of nginx.service"
    assert change.at == host.now - 5


def test_parse_show_splits_units_and_refuses_hostile_names() -> None:
    output = (
        "Id=a.service\nActiveState=active\nId=b.service\nActiveState=failed\n\nId=<!channel> x\nResult=x\n"
    )
    assert parse_show(output) == {
        "a.service": {"Id": "a.service", "ActiveState": "active"},
        "b.service": {"Id": "b.service", "ActiveState": "failed"},
    }


def test_parse_timestamp_reads_systemds_forms() -> None:
    assert parse_timestamp("Thu 2026-12-03 10:01:02 UTC") == 1_796_292_062.0
    assert parse_timestamp("@1796292062") == 1_796_292_062.0
    assert parse_timestamp("n/a") is None
    assert parse_timestamp("") is None


def test_every_state_file_damaged_is_a_fresh_baseline_not_a_crash(host: Host) -> None:
    host.units["nginx.service"] = running(BOOT + 30)
    host.write(NGINX_UNIT, "[Service]\n")
    host.scanner().scan()
    for path in host.state_dir.glob("*.json"):
        path.write_bytes(b"\x00\xff[1, 2")
    host.boot("44444444-4444-4444-4444-444444444444", host.now - 3600)

    report = host.scanner().scan()

    assert report.changes == []  # no previous boot id, units or files to compare with: a baseline
    assert not [problem for problem in report.problems if "not scanned" in problem]
    host.units["nginx.service"] = running(host.now - 5)
    assert whats(host.scanner().scan()) == ["restart of nginx.service"]
