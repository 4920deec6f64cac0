"""A scenario's ``runbooks:``: loaded strictly (a runbook the bot's index would skip or misread is
refused at load), written as the folder the run's web and worker read, and absent without it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from emulator.eval.errors import ScenarioFileError
from emulator.eval.loading import parse_eval_scenario
from emulator.eval.runbooks import write_runbooks
from tools.runbooks.index import RunbookIndex

from .test_scenario_format import MINIMAL

RUNBOOK = "---\ntitle: The api is down\nalerts: [ApiDown]\nlabels: {service: api}\n---\n# The api is down\n## Check\nboom\n"


def with_runbooks(runbooks: Any, tags: tuple[str, ...] = ("single-cause", "knowledge")) -> dict[str, Any]:
    data = copy.deepcopy(MINIMAL)
    data["runbooks"] = runbooks
    data["tags"] = list(tags)
    return data


def problems(data: dict[str, Any]) -> str:
    with pytest.raises(ScenarioFileError) as caught:
        parse_eval_scenario(data, "tiny.yaml")
    return str(caught.value)


def test_runbooks_load_and_are_written_where_the_index_finds_them_by_id(tmp_path: Path) -> None:
    scenario = parse_eval_scenario(with_runbooks({"api/down.md": RUNBOOK}), "tiny.yaml")
    folder = write_runbooks(scenario.runbooks, tmp_path / "runbooks")
    index = RunbookIndex(folder)
    found = index.best_for_alert("ApiDown", {"service": "api"})
    assert found is not None and found.id == "api/down.md" and found.title == "The api is down"


def test_a_scenario_without_runbooks_has_none() -> None:
    assert parse_eval_scenario(copy.deepcopy(MINIMAL), "tiny.yaml").runbooks == {}


@pytest.mark.parametrize(
    ("runbooks", "expected"),
    [
        ({"../escape.md": RUNBOOK}, "runbooks.../escape.md: not a relative path of a Markdown file"),
        ({"/etc/passwd.md": RUNBOOK}, "not a relative path of a Markdown file"),
        ({"api/down.txt": RUNBOOK}, "not a relative path of a Markdown file"),
        ({"a/../b.md": RUNBOOK}, "not a relative path of a Markdown file"),
        (
            {"api/down.md": "---\ntitle: [unclosed\n---\n# x\n"},
            "runbooks.api/down.md: front matter: invalid YAML",
        ),
        ({"api/down.md": "---\ntitle: x\n# no end\n"}, "has no closing '---'"),
        (
            {"api/down.md": "---\nalert: [ApiDown]\n---\n# x\n"},
            "front matter key 'alert' is ignored by the index",
        ),
        (
            {"api/down.md": "---\nlabels: {service: '=~\"(\"'}\n---\n# x\n"},
            "runbooks.api/down.md: front matter: labels",
        ),
        ({"api/down.md": "x" * (512 * 1024 + 1)}, "larger than 512 KiB"),
        ({"api/down.md": 3}, "runbooks.api/down.md"),
        ("api/down.md", "runbooks: expected a mapping"),
    ],
)
def test_a_runbook_the_index_would_skip_or_misread_is_refused_with_its_id(
    runbooks: Any, expected: str
) -> None:
    assert expected in problems(with_runbooks(runbooks))


def test_the_knowledge_family_needs_runbooks() -> None:
    data = copy.deepcopy(MINIMAL)
    data["tags"] = ["single-cause", "knowledge"]
    assert "tags: knowledge: needs the knowledge the agent is to use; fix: add runbooks:" in problems(data)
