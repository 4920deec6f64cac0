"""Sizes, ages and the ``{time:AGE}`` of a scenario's lines."""

from __future__ import annotations

import calendar
import re

import pytest

from emulator.eval.log_lines import MASK, check_line, masked, render_line
from emulator.eval.quantities import parse_age, parse_size
from tools.changes.packages import package_changes


@pytest.mark.parametrize(
    ("text", "size"),
    [
        (512, 512),
        ("512", 512),
        ("5M", 5 * 1024**2),
        ("1.5K", 1536),
        ("2 GiB", 2 * 1024**3),
        ("900kb", 900 * 1024),
        ("1T", 1024**4),
    ],
)
def test_sizes_are_binary_as_df_prints_them(text: object, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(
    ("text", "seconds"),
    [(90, 90.0), ("40s", 40.0), ("2h30m", 9000.0), ("3d", 259200.0), ("1d18h", 151200.0), (0, 0.0)],
)
def test_ages(text: object, seconds: float) -> None:
    assert parse_age(text) == seconds


@pytest.mark.parametrize("bad", [-1, True, "5 parsecs", "", "M5"])
def test_a_size_that_is_not_one_says_how_to_write_it(bad: object) -> None:
    with pytest.raises(ValueError, match="fix: write"):
        parse_size(bad)


@pytest.mark.parametrize("bad", [-5, False, "yesterday", "3 days", "h"])
def test_an_age_that_is_not_one_says_how_to_write_it(bad: object) -> None:
    with pytest.raises(ValueError, match="fix: write"):
        parse_age(bad)


NOW = float(calendar.timegm((2025, 5, 1, 12, 0, 0)))


@pytest.mark.parametrize(
    ("line", "written"),
    [
        ("{time:40s} ERROR api boom", "2025-05-01T11:59:20.000Z ERROR api boom"),
        ("{time:1h:syslog} web-03 kernel: x", "May 01 11:00:00 web-03 kernel: x"),
        ("{time:2m:postgres} [1] LOG: x", "2025-05-01 11:58:00.000 UTC [1] LOG: x"),
        ("{time:1d:nginx} GET /", "30/Apr/2025:12:00:00 +0000 GET /"),
        ("{time:0:nginx-error} [error]", "2025/05/01 12:00:00 [error]"),
        ("{time:3d:systemd}", "Mon 2025-04-28 12:00:00 UTC"),
        ("/var/log/api.log {", "/var/log/api.log {"),  # every other brace is literal
        ('{"level": "error", "at": "{time:5s}"}', '{"level": "error", "at": "2025-05-01T11:59:55.000Z"}'),
        ("a template: {{time:later} stays", "a template: {time:later} stays"),  # {{time: is a literal {time:
    ],
)
def test_times_are_written_relative_to_the_run(line: str, written: str) -> None:
    check_line(line)
    assert render_line(line, NOW) == written


def test_package_log_times_read_back_as_the_runner_reads_them() -> None:
    # dpkg and apt write the host's local time, as the runner's parser reads it, in any zone
    dpkg = render_line("{time:32m:dpkg} upgrade tzdata:all 2025a-0 2025b-0", NOW)
    apt = "\n".join(
        render_line(line, NOW)
        for line in (
            "Start-Date: {time:20m:apt}",
            "Requested-By: alice (1001)",
            "Remove: php8.2-fpm:amd64 (8.2.26-1)",
            "End-Date: {time:19m:apt}",
        )
    )
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d upgrade .*", dpkg)
    assert re.search(r"Start-Date: \d{4}-\d\d-\d\d  \d\d:\d\d:\d\d\n", apt)  # apt's two spaces
    changes = package_changes(dpkg + "\n", apt + "\n", "db-02", "runner")
    assert [(change.at, change.what, change.who) for change in changes] == [
        (NOW - 32 * 60, "upgrade tzdata 2025a-0 -> 2025b-0", ""),
        (NOW - 20 * 60, "remove php8.2-fpm 8.2.26-1", "alice"),
    ]


def test_masked_lines_hold_no_time() -> None:
    assert (
        masked("{time:40s} ERROR {time:1m:syslog} x {y} {{time:z}")
        == f"{MASK} ERROR {MASK} x {{y}} {{time:z}}"
    )


@pytest.mark.parametrize(
    ("line", "says"), [("{time:later} x", "age 'later'"), ("{time:5m:rfc} x", "unknown format 'rfc'")]
)
def test_a_time_that_cannot_be_written_is_refused(line: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        check_line(line)
