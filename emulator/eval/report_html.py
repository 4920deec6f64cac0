"""``DIR/report.html``: the suite's table, its pass rates by tag, and a chart, from ``results.json``.

Built from the same data as ``results.json`` (``emulator.eval.results.results``), so the page says
nothing the file does not. The chart is inline SVG, drawn here: one row per scenario and agent, a
bar for its pass rate over the repeats (green when every repeat passed, amber when some did, red
when none did, grey when every repeat was a stale replay) and beside it a bar for the mean tokens
its runs spent (prompt + completion). Scenario names and tags come from files anyone can write, so
every text is escaped; the page loads nothing from anywhere (no script, no stylesheet link).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

ROW_HEIGHT = 22
LABEL_WIDTH = 300
BAR_WIDTH = 260
GAP = 110  # room for the pass-rate label right of a full bar
TOP = 40
COLOURS = {"all": "#2e7d32", "some": "#f9a825", "none": "#c62828", "stale": "#9e9e9e"}
TOKENS_COLOUR = "#1565c0"
LEGEND = (
    ("green", "every repeat passed"),
    ("amber", "some did"),
    ("red", "none did"),
    ("grey", "stale replay"),
)


@dataclass(frozen=True)
class ChartRow:
    """One scenario run by one agent, over its repeats."""

    label: str
    passed: int
    scored: int  # repeats that were neither stale nor errors
    repeats: int
    tokens: float  # mean prompt + completion tokens per run

    @property
    def rate(self) -> float | None:
        return self.passed / self.scored if self.scored else None

    @property
    def colour(self) -> str:
        if self.scored == 0:
            return COLOURS["stale"]
        if self.passed == self.scored:
            return COLOURS["all"]
        return COLOURS["some"] if self.passed else COLOURS["none"]


def chart_rows(entries: Sequence[Mapping[str, Any]]) -> list[ChartRow]:
    """Rows in the order the scenarios first appear (``results.json``'s order)."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for entry in entries:
        groups.setdefault((str(entry["name"]), str(entry["agent"])), []).append(entry)
    agents = {agent for _, agent in groups}
    rows = []
    for (name, agent), runs in groups.items():
        scored = [run for run in runs if run.get("replay") != "stale"]
        tokens = [int(run["tokens"]["prompt"]) + int(run["tokens"]["completion"]) for run in runs]
        rows.append(
            ChartRow(
                label=name if len(agents) == 1 else f"{name} ({agent})",
                passed=sum(1 for run in scored if run["passed"]),
                scored=len(scored),
                repeats=len(runs),
                tokens=sum(tokens) / len(tokens),
            )
        )
    return rows


def chart_svg(rows: Sequence[ChartRow]) -> str:
    """Pass rate and mean tokens per scenario, two aligned horizontal bar panels."""
    height = TOP + ROW_HEIGHT * len(rows) + 30
    width = LABEL_WIDTH + 2 * BAR_WIDTH + GAP + 90
    most = max((row.tokens for row in rows), default=0.0) or 1.0
    tokens_x = LABEL_WIDTH + BAR_WIDTH + GAP
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="pass rate and tokens per scenario">',
        f'<text x="{LABEL_WIDTH}" y="20" class="head">pass rate</text>',
        f'<text x="{tokens_x}" y="20" class="head">mean tokens per run (prompt + completion)</text>',
    ]
    for index, row in enumerate(rows):
        y = TOP + index * ROW_HEIGHT
        parts.append(f'<text x="{LABEL_WIDTH - 8}" y="{y + 14}" class="label">{escape(row.label)}</text>')
        rate = row.rate
        width_rate = BAR_WIDTH * (rate if rate is not None else 1.0)
        parts.append(
            f'<rect x="{LABEL_WIDTH}" y="{y + 3}" width="{width_rate:.1f}" height="{ROW_HEIGHT - 6}" '
            f'fill="{row.colour}"><title>{escape(_rate_text(row))}</title></rect>'
        )
        parts.append(
            f'<text x="{LABEL_WIDTH + width_rate + 4:.1f}" y="{y + 14}" class="value">'
            f"{escape(_rate_text(row))}</text>"
        )
        width_tokens = BAR_WIDTH * row.tokens / most
        parts.append(
            f'<rect x="{tokens_x}" y="{y + 3}" width="{width_tokens:.1f}" height="{ROW_HEIGHT - 6}" '
            f'fill="{TOKENS_COLOUR}"/>'
        )
        parts.append(
            f'<text x="{tokens_x + width_tokens + 4:.1f}" y="{y + 14}" class="value">{row.tokens:,.0f}</text>'
        )
    axis_y = TOP + ROW_HEIGHT * len(rows) + 4
    legend = "; ".join(f"{colour_name}: {what}" for colour_name, what in LEGEND)
    parts.append(f'<text x="{LABEL_WIDTH}" y="{axis_y + 20}" class="value">{legend}</text>')
    for x in (LABEL_WIDTH, tokens_x):
        parts.append(f'<line x1="{x}" y1="{TOP - 4}" x2="{x}" y2="{axis_y}" class="axis"/>')
    parts.append("</svg>")
    return "\n".join(parts)


def _rate_text(row: ChartRow) -> str:
    if row.rate is None:
        return f"stale ({row.repeats} run{'s' if row.repeats != 1 else ''})"
    return f"{row.rate:.0%} ({row.passed}/{row.scored})"


STYLE = """
body { font: 14px system-ui, sans-serif; margin: 24px; color: #212121; }
table { border-collapse: collapse; margin: 12px 0 24px; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; }
th.text, td.text { text-align: left; }
tr.failed td { background: #ffebee; } tr.stale td { background: #eeeeee; }
svg text { font: 12px system-ui, sans-serif; fill: #212121; }
svg text.label { text-anchor: end; } svg text.head { font-weight: 600; }
svg line.axis { stroke: #757575; }
"""


def html_report(data: Mapping[str, Any], timings: Sequence[Mapping[str, float]], wall_seconds: float) -> str:
    """The page for ``data`` (``results.json``); ``timings`` holds each entry's ``startup`` and ``wall``
    seconds, in the same order."""
    entries: list[Mapping[str, Any]] = list(data["scenarios"])
    total = data["summary"]
    head = (
        f"{total['passed']} of {total['total']} runs passed (rca == 1, grounding &gt;= 0.8, safety == 1); "
        f"the whole suite took {wall_seconds:.1f} s of wall time."
    )
    body = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8"><title>chatops eval report</title>',
        f"<style>{STYLE}</style></head><body>",
        "<h1>chatops eval report</h1>",
        f"<p>{head}</p>",
        chart_svg(chart_rows(entries)),
        "<h2>Runs</h2>",
        _runs_table(entries, timings),
        "<h2>By tag</h2>",
        _tags_table(total["by_tag"]),
        "<p>Simulated hosts and scripted faults: a pass is necessary, not sufficient (docs/EVAL.md, "
        "&ldquo;What the numbers do not say&rdquo;).</p>",
        "</body></html>",
    ]
    return "\n".join(body) + "\n"


def _runs_table(entries: Sequence[Mapping[str, Any]], timings: Sequence[Mapping[str, float]]) -> str:
    texts = {"scenario", "agent", "passed", "replay"}
    names = ["scenario", "agent", "repeat", "passed", "rca", "grounding", "safety", "iterations"]
    names += ["tool calls", "tokens (prompt / completion / cache read)", "replay", "run s", "startup s"]
    header = "<tr>" + "".join(_th(name, name in texts) for name in [*names, "wall s"]) + "</tr>"
    rows = [header]
    for entry, timing in zip(entries, timings, strict=True):
        scores, tokens = entry["scores"], entry["tokens"]
        stale = entry.get("replay") == "stale"
        verdict = "stale" if stale else ("yes" if entry["passed"] else "no")
        css = "stale" if stale else ("" if entry["passed"] else "failed")
        cells = [
            f'<td class="text">{escape(str(entry["name"]))}</td>',
            f'<td class="text">{escape(str(entry["agent"]))}</td>',
            f"<td>{int(entry['repeat'])}</td>",
            f'<td class="text">{verdict}</td>',
            *(f"<td>{float(scores[metric]):.2f}</td>" for metric in ("rca", "grounding", "safety")),
            f"<td>{int(entry['iterations'])}</td>",
            f"<td>{int(entry['tool_calls'])}</td>",
            f"<td>{int(tokens['prompt'])} / {int(tokens['completion'])} / {int(tokens['cache_read'])}</td>",
            f'<td class="text">{escape(str(entry.get("replay", "none")))}</td>',
            f"<td>{float(entry['seconds']):.1f}</td>",
            f"<td>{timing['startup']:.1f}</td>",
            f"<td>{timing['wall']:.1f}</td>",
        ]
        rows.append(f'<tr class="{css}">' + "".join(cells) + "</tr>")
    return "<table>\n" + "\n".join(rows) + "\n</table>"


def _th(name: str, text: bool) -> str:
    return f'<th class="text">{name}</th>' if text else f"<th>{name}</th>"


def _tags_table(by_tag: Mapping[str, Mapping[str, int]]) -> str:
    rows = ['<tr><th class="text">tag</th><th>passed</th><th>total</th><th>pass rate</th></tr>']
    for tag, counts in by_tag.items():
        rate = counts["passed"] / counts["total"] if counts["total"] else 0.0
        rows.append(
            f'<tr><td class="text">{escape(tag)}</td><td>{counts["passed"]}</td>'
            f"<td>{counts['total']}</td><td>{rate:.0%}</td></tr>"
        )
    return "<table>\n" + "\n".join(rows) + "\n</table>"
