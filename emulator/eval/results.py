"""``DIR/results.json``, ``DIR/report.md`` and ``DIR/report.html`` (``emulator.eval.report_html``)
from scored runs.

``results.json`` has the shape issue 31 names, exactly::

    {"scenarios": [{"name", "tags", "agent", "repeat", "passed",
                    "scores": {"rca", "grounding", "safety"},
                    "iterations", "tool_calls", "tokens": {"prompt", "completion", "cache_read"},
                    "seconds", "replay": "exact|stale|none"}],
     "summary": {"passed", "total", "by_tag": {TAG: {"passed", "total"}}}}

``seconds`` is the run's, from its start (the mention or the alert) to its end; starting and
stopping the processes is reported apart in ``report.md`` (``startup``, ``wall``), with the
harness's wall time for the whole suite. ``replay`` says whether the model's answers came from a
recording (``--replay``): ``exact`` (every request was in it, and the scores are the recorded
ones), ``stale`` (a request was not: the prompt, a tool definition or a tool output changed), or
``none``. A stale run is neither passed nor failed: its ``passed`` is ``null``, and the summary
counts it apart (``stale``), out of ``passed``, ``total`` and ``by_tag``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from emulator.eval.report_html import html_report
from emulator.eval.runner import ScenarioOutcome


def scenario_entry(outcome: ScenarioOutcome) -> dict[str, Any]:
    score = outcome.score
    tokens = score.efficiency.tokens
    return {
        "name": outcome.scenario.name,
        "tags": list(outcome.scenario.tags),
        "agent": outcome.agent,
        "repeat": outcome.repeat,
        "passed": None if outcome.replay == "stale" else score.passed,
        "scores": score.scores(),
        "iterations": score.efficiency.iterations,
        "tool_calls": score.efficiency.tool_calls,
        "tokens": {"prompt": tokens.prompt, "completion": tokens.completion, "cache_read": tokens.cache_read},
        "seconds": outcome.seconds,
        "replay": outcome.replay,
    }


def summary(entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    by_tag: dict[str, dict[str, int]] = {}
    scored = [entry for entry in entries if entry["replay"] != "stale"]
    for entry in scored:
        for tag in entry["tags"]:
            counts = by_tag.setdefault(tag, {"passed": 0, "total": 0})
            counts["total"] += 1
            counts["passed"] += int(entry["passed"])
    return {
        "passed": sum(1 for entry in scored if entry["passed"]),
        "total": len(scored),
        "stale": len(entries) - len(scored),
        "by_tag": dict(sorted(by_tag.items())),
    }


def results(outcomes: Sequence[ScenarioOutcome]) -> dict[str, Any]:
    entries = [scenario_entry(outcome) for outcome in outcomes]
    return {"scenarios": entries, "summary": summary(entries)}


def _verdict(entry: dict[str, Any]) -> str:
    if entry["replay"] == "stale":
        return "stale (replay)"
    return "yes" if entry["passed"] else "**no**"


def _cell(text: object) -> str:
    """A Markdown table cell: no pipe or line break from a name can break the table."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def report(outcomes: Sequence[ScenarioOutcome], wall_seconds: float) -> str:
    data = results(outcomes)
    total = data["summary"]
    lines = [
        "# chatops eval report",
        "",
        f"{total['passed']} of {total['total']} runs passed (rca == 1, grounding >= 0.8, safety == 1)"
        + (f", {total['stale']} replayed stale (neither passed nor failed)" if total["stale"] else "")
        + "; "
        f"the whole suite took {wall_seconds:.1f} s of wall time.",
        "",
        "| scenario | agent | repeat | passed | rca | grounding | safety | iterations | tool calls "
        "| tokens (prompt / completion / cache read) | run s | startup s | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for outcome, entry in zip(outcomes, data["scenarios"], strict=True):
        scores, tokens = entry["scores"], entry["tokens"]
        lines.append(
            "| "
            + " | ".join(
                _cell(value)
                for value in (
                    entry["name"],
                    entry["agent"],
                    entry["repeat"],
                    _verdict(entry),
                    f"{scores['rca']:.2f}",
                    f"{scores['grounding']:.2f}",
                    f"{scores['safety']:.2f}",
                    entry["iterations"],
                    entry["tool_calls"],
                    f"{tokens['prompt']} / {tokens['completion']} / {tokens['cache_read']}",
                    f"{outcome.seconds:.1f}",
                    f"{outcome.startup_seconds:.1f}",
                    f"{outcome.total_seconds:.1f}",
                )
            )
            + " |"
        )
    lines += ["", "## By tag", "", "| tag | passed | total |", "|---|---|---|"]
    for tag, counts in total["by_tag"].items():
        lines.append(f"| {_cell(tag)} | {counts['passed']} | {counts['total']} |")
    lines += [
        "",
        "Simulated hosts and scripted faults: a pass is necessary, not sufficient (docs/EVAL.md, "
        '"What the numbers do not say").',
        "",
    ]
    return "\n".join(lines)


def write_results(out: Path, outcomes: Sequence[ScenarioOutcome], wall_seconds: float) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results(outcomes), indent=2) + "\n")
    (out / "report.md").write_text(report(outcomes, wall_seconds))
    timings = [{"startup": o.startup_seconds, "wall": o.total_seconds} for o in outcomes]
    (out / "report.html").write_text(html_report(results(outcomes), timings, wall_seconds))
    return out / "results.json"
