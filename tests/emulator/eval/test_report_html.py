"""``report.html``: the chart's rows say what results.json says, and no scenario name can inject
markup into the page."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

from emulator.eval.report_html import COLOURS, chart_rows, html_report


def entry(
    name: str, agent: str, repeat: int, passed: bool, replay: str = "none", prompt: int = 1000
) -> dict[str, Any]:
    return {
        "name": name,
        "tags": ["single-cause"],
        "agent": agent,
        "repeat": repeat,
        "passed": passed,
        "scores": {"rca": 1.0 if passed else 0.0, "grounding": 1.0, "safety": 1.0},
        "iterations": 4,
        "tool_calls": 3,
        "tokens": {"prompt": prompt, "completion": 100, "cache_read": 0},
        "seconds": 2.5,
        "replay": replay,
    }


def data(entries: list[dict[str, Any]]) -> dict[str, Any]:
    passed = sum(1 for e in entries if e["passed"])
    return {
        "scenarios": entries,
        "summary": {
            "passed": passed,
            "total": len(entries),
            "by_tag": {"single-cause": {"passed": passed, "total": len(entries)}},
        },
    }


def test_a_row_per_scenario_and_agent_with_its_pass_rate_over_the_repeats() -> None:
    rows = chart_rows(
        [
            entry("disk", "reference", 1, True, prompt=1000),
            entry("disk", "reference", 2, False, prompt=3000),
            entry("disk", "lazy", 1, False),
            entry("quiet", "reference", 1, True, replay="stale"),
        ]
    )
    assert [row.label for row in rows] == ["disk (reference)", "disk (lazy)", "quiet (reference)"]
    assert (rows[0].passed, rows[0].scored, rows[0].tokens) == (1, 2, 2100.0)
    assert rows[0].colour == COLOURS["some"] and rows[1].colour == COLOURS["none"]
    assert rows[2].rate is None and rows[2].colour == COLOURS["stale"]  # a stale replay is no verdict


def test_one_agent_rows_are_named_by_the_scenario_alone() -> None:
    rows = chart_rows([entry("disk", "reference", 1, True), entry("quiet", "reference", 1, True)])
    assert [(row.label, row.colour) for row in rows] == [("disk", COLOURS["all"]), ("quiet", COLOURS["all"])]


class Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_a_hostile_scenario_name_stays_text() -> None:
    hostile = '<script>alert(1)</script><img src=x onerror=alert(2)>"'
    page = html_report(
        data([entry(hostile, "reference", 1, True), entry("disk", "<b>agent</b>", 1, False)]),
        [{"startup": 1.0, "wall": 4.0}] * 2,
        12.0,
    )
    parsed = Elements()
    parsed.feed(page)
    assert "script" not in parsed.tags and "img" not in parsed.tags and "b" not in parsed.tags
    assert hostile in "".join(parsed.text)  # shown as the text it is
    assert "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")  # loads nothing


def test_the_tables_carry_every_run_and_tag() -> None:
    page = html_report(
        data([entry("disk", "reference", 1, True), entry("disk", "reference", 2, False, replay="stale")]),
        [{"startup": 1.5, "wall": 4.25}, {"startup": 1.0, "wall": 3.0}],
        9.5,
    )
    assert "1 of 2 runs passed" in page and "9.5 s of wall time" in page
    assert '<tr class="stale">' in page and "<td>1.5</td>" in page
    assert '<td class="text">single-cause</td><td>1</td><td>2</td><td>50%</td>' in page
