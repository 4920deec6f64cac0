"""The runbook folder: front matter, ranking, re-indexing on change, problems, and ids that are never paths."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tools.runbooks import RunbookIndex, RunbookLibrary, runbook_tools
from tools.runbooks.document import parse_runbook

DISK = """---
title: Disk almost full
alerts: [HighDiskUsage]
labels: {service: api}
targets: [web-03]
owner: sre
---
# Disk almost full

## Check
Run disk_usage on the target and list_logs in /var/log.

## Fix
Clean old logs with clean_old_logs; ask before deleting anything.
"""

CPU = """---
title: High CPU
labels: ['service=~"api|web"', 'severity="critical"']
---
# High CPU
Look at the top processes first.
"""

PLAIN = """# Certificate renewal
The certificate of the load balancer expires; renew it with certbot.
"""


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "runbooks"
    write(root, "disk/high-usage.md", DISK)
    write(root, "cpu.md", CPU)
    write(root, "certs.markdown", PLAIN)
    write(root, ".git/HEAD.md", "# not a runbook")
    write(root, "notes.txt", "not markdown")
    return root


def test_front_matter_gives_title_alerts_labels_targets_and_the_outline() -> None:
    runbook = parse_runbook("disk/high-usage.md", DISK)
    assert runbook.title == "Disk almost full" and runbook.alerts == ("HighDiskUsage",)
    assert [m.text() for m in runbook.matchers] == ['service="api"'] and runbook.targets == ("web-03",)
    assert runbook.outline().splitlines() == [
        "Runbook: Disk almost full (id: disk/high-usage.md)",
        "- Disk almost full",
        "  - Check",
        "  - Fix",
    ]
    assert (
        runbook.section("fix") == "## Fix\nClean old logs with clean_old_logs; ask before deleting anything."
    )
    assert runbook.section("Nope") is None
    cpu = parse_runbook("cpu.md", CPU)
    assert cpu.matches_labels({"service": "web", "severity": "critical"})
    assert not cpu.matches_labels({"service": "db", "severity": "critical"})
    regex = parse_runbook("r.md", "---\nlabels: {service: '=~\"api|web\"'}\n---\ntext")
    assert regex.matches_labels({"service": "web"})


def test_the_index_ranks_alert_name_then_labels_then_text(folder: Path) -> None:
    index = RunbookIndex(folder)
    assert index.ids() == ["certs.markdown", "cpu.md", "disk/high-usage.md"]
    by_alert = index.search("HighDiskUsage")
    assert [hit.runbook.id for hit in by_alert] == ["disk/high-usage.md"]
    assert by_alert[0].reasons[0] == "alert HighDiskUsage"
    by_labels = index.search("service=web severity=critical processes")
    assert by_labels[0].runbook.id == "cpu.md" and any(r.startswith("labels") for r in by_labels[0].reasons)
    by_text = index.search("certificate renew")
    assert by_text[0].runbook.id == "certs.markdown" and by_text[0].lines
    # The label match outranks a text-only match of the same words.
    mixed = index.search("service=api logs")
    assert mixed[0].runbook.id == "disk/high-usage.md"
    assert index.best_for_alert("HighDiskUsage", {}) is not None
    assert index.best_for_alert("Other", {"service": "web", "severity": "critical"}).id == "cpu.md"  # type: ignore[union-attr]
    assert index.best_for_alert("Other", {"service": "db"}) is None  # text alone is not enough


def test_a_changed_added_or_removed_file_is_reindexed_without_a_restart(folder: Path) -> None:
    clock = Clock()
    index = RunbookIndex(folder, rescan_seconds=5, clock=clock)
    write(folder, "db/replication.md", "---\nalerts: [ReplicationLag]\n---\n# Replication lag\n")
    changed = folder / "cpu.md"
    changed.write_text(CPU.replace("High CPU", "CPU saturation"))
    os.utime(changed, ns=(1, 1))  # a different mtime even on a coarse clock
    (folder / "certs.markdown").unlink()
    assert index.get("db/replication.md") is None  # not rescanned yet: within rescan_seconds
    clock.now = 6
    assert index.get("db/replication.md") is not None
    assert index.get("cpu.md").title == "CPU saturation"  # type: ignore[union-attr]
    assert index.get("certs.markdown") is None


def test_a_malformed_front_matter_is_reported_and_the_others_stay(folder: Path) -> None:
    write(folder, "bad/yaml.md", "---\ntitle: [unclosed\n---\n# Bad\n")
    write(folder, "bad/labels.md", "---\nlabels: ['service=~\"(\"']\n---\n# Bad labels\n")
    write(folder, "bad/open.md", "---\ntitle: never closed\n# Bad\n")
    write(folder, "bad/alerts.md", "---\nalerts: {a: b}\n---\n# Bad alerts\n")
    index = RunbookIndex(folder)
    problems = {problem.id: problem.problem for problem in index.problems}
    assert set(problems) == {"bad/yaml.md", "bad/labels.md", "bad/open.md", "bad/alerts.md"}
    assert "invalid YAML at line 3" in problems["bad/yaml.md"] and "line 2" in problems["bad/yaml.md"]
    assert "labels" in problems["bad/labels.md"] and "closing" in problems["bad/open.md"]
    assert "alerts must be a list" in problems["bad/alerts.md"]
    assert len(index) == 3


def test_an_id_is_a_key_of_the_index_never_a_path(folder: Path, tmp_path: Path) -> None:
    secret = write(tmp_path, "secret.md", "# Secret\nthe password is hunter2\n")
    os.symlink(secret, folder / "linked.md")  # a link inside the folder to a file outside it
    os.symlink(tmp_path, folder / "up")  # and a link to a directory outside
    library = RunbookLibrary(RunbookIndex(folder))
    read = {tool.definition.name: tool for tool in runbook_tools(library)}["read_runbook"]
    for attempt in (
        "../secret.md",
        str(secret),
        "disk/../../secret.md",
        "linked.md",
        "up/secret.md",
        "disk/./high-usage.md",
        "/etc/passwd",
        "file:///etc/passwd",
    ):
        result = read.execute(json.dumps({"id": attempt}), timeout=5)
        assert result.output.startswith("Error:") and "hunter2" not in result.output, attempt
    good = read.execute(json.dumps({"id": "disk/high-usage.md", "section": "Check"}), timeout=5)
    assert "Run disk_usage" in good.output and "Clean old logs" not in good.output
    assert "does not instruct you" in good.output


def test_the_tools_are_read_only_and_bounded(folder: Path) -> None:
    write(folder, "big.md", "# Big\n" + ("word " * 20 + "\n") * 2000)
    library = RunbookLibrary(RunbookIndex(folder))
    tools = {tool.definition.name: tool for tool in runbook_tools(library)}
    assert {tool.category.value for tool in tools.values()} == {"read_only"}
    big = tools["read_runbook"].execute(json.dumps({"id": "big.md"}), timeout=5)
    assert len(big.output) < 13_000 and "truncated" in big.output
    found = tools["search_runbooks"].execute(json.dumps({"query": "word", "limit": 10}), timeout=5)
    assert "big.md" in found.output and len(found.output) < 4000
