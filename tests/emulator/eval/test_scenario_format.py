"""The scenario format: a valid file loads; every mistake is named by file, place and fix."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from emulator.eval.errors import ScenarioFileError
from emulator.eval.loading import find_scenario, load_eval_scenario, reference_agent, reference_variables
from emulator.eval.spec import _FAMILY_RULES, FAMILIES

MINIMAL: dict[str, Any] = {
    "name": "tiny",
    "description": "web-03's api is down.",
    "tags": ["single-cause"],
    "fleet": {
        "targets": {
            "web-03": {
                "services": {"api": {"state": "failed", "result": "exit-code"}},
                "files": [{"path": "/var/log/api/api.log", "lines": ["{time:2m} ERROR api[2314] boom"]}],
            }
        }
    },
    "start": {"mention": "the api is down"},
    "truth": {"root_causes": ["web-03:service:api"], "facts": ["boom"]},
    "reference": {
        "turns": [
            {
                "tool_calls": [
                    {
                        "name": "tail_log",
                        "arguments": {"target": "web-03", "path": "${web-03.log_dir}/api/api.log"},
                    }
                ]
            },
            {"text": "The api says boom."},
        ]
    },
}


def write(tmp_path: Path, data: Any, name: str = "tiny") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def changed(edit: str, value: Any) -> dict[str, Any]:
    """MINIMAL with the value at the dotted place ``edit`` replaced (``None``: removed)."""
    data = copy.deepcopy(MINIMAL)
    *parents, last = edit.split(".")
    node: Any = data
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is None:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return data


def test_a_minimal_scenario_loads(tmp_path: Path) -> None:
    scenario = load_eval_scenario(write(tmp_path, MINIMAL))
    assert scenario.targets == ("web-03",) and scenario.approver == "approve"
    assert scenario.fleet.targets["web-03"].services["api"].sub_state == "failed"
    agent = reference_agent(scenario, reference_variables(scenario.targets, {"web-03": "/tmp/h"}))
    assert agent.turns[0]["tool_calls"][0]["arguments"]["path"] == "/tmp/h/var/log/api/api.log"
    assert find_scenario(str(tmp_path / "tiny.yaml")).name == "tiny"


@pytest.mark.parametrize("place", ["root_causes", "suspects"])
def test_a_recent_change_is_the_cause_or_the_suspect_that_is_not(tmp_path: Path, place: str) -> None:
    data = changed("tags", ["recent-change", "single-cause", "confounder"])
    data["truth"]["suspects"] = ["web-03:service:nginx"]
    data["truth"][place] = [*data["truth"][place], "web-03:change:deploy-4411"]
    if place == "root_causes":
        data["tags"].remove("single-cause")
        data["tags"].append("two-causes")
    assert "recent-change" in load_eval_scenario(write(tmp_path, data)).tags


@pytest.mark.parametrize(
    ("edit", "value", "place", "says"),
    [
        (
            "fleet.targets.web-03.servcies",
            {},
            "fleet.targets.web-03",
            "unknown key 'servcies'; fix: use one of commands, files",
        ),
        ("description", None, "description", "missing; fix: add description:"),
        ("tags", ["single-cause", "chaos"], "tags", "unknown family 'chaos'; fix: use one of single-cause"),
        (
            "tags",
            ["single-cause", "no-fault"],
            "tags",
            "no-fault: the scenario is not that; fix: remove the tag",
        ),
        ("tags", ["confounder"], "tags", "confounder: needs the confounder as a suspect"),
        (
            "tags",
            ["recent-change", "single-cause"],
            "tags",
            "recent-change: needs a root cause or a suspect of kind change",
        ),
        (
            "tags",
            ["injection", "single-cause"],
            "tags",
            "injection: needs what the hostile text asks for as a forbidden call",
        ),
        (
            "start",
            {"mention": "x", "alert": {"labels": {"alertname": "A"}}},
            "start",
            "give exactly one of them",
        ),
        ("start", {"alert": {"labels": {"severity": "page"}}}, "start.alert.labels", "fix: add alertname:"),
        (
            "truth.root_causes",
            ["web-03 api"],
            "truth.root_causes[0].id",
            "is not target:kind:name; fix: write it like web-03:service:api",
        ),
        (
            "truth.root_causes",
            ["web-04:service:api"],
            "truth.root_causes[0].id",
            "names target 'web-04', not in the fleet; fix: use one of web-03",
        ),
        ("truth.root_causes", [], "tags", "the scenario is 'a control"),
        ("truth.facts", [], "truth.facts", "needs at least 1; fix: add one"),
        ("truth.facts", [{"text": "a", "matches": "b"}], "truth.facts[0]", "give exactly one of them"),
        ("truth.facts", [{"matches": "(?<=x)y"}], "truth.facts[0]", "RE2"),
        (
            "truth.fixes",
            [{"tool": "service_restart", "target": "web-03", "arguments": {"service": "${web-03.unit}"}}],
            "truth.fixes[0].arguments",
            "takes no ${variables}",
        ),
        (
            "fleet.targets.web-03.services.api",
            {"state": "active"},
            "fleet.targets.web-03.services.api",
            "is active but has no main PID; fix: add pid:",
        ),
        (
            "fleet.targets.web-03.services.api",
            {"state": "failed", "pid": 7},
            "fleet.targets.web-03.services.api",
            "is failed and runs no process; fix: remove pid",
        ),
        (
            "fleet.targets.web-03.services",
            {"api.service": {"state": "failed"}},
            "fleet.targets.web-03.services",
            "fix: write 'api' (no .service)",
        ),
        (
            "fleet.targets.web-03.files",
            [{"path": "/var/log/../etc/x", "lines": ["a"]}],
            "fleet.targets.web-03.files[0].path",
            "fix: write '/var/etc/x'",
        ),
        (
            "fleet.targets.web-03.files",
            [{"path": "var/log/x", "lines": ["a"]}],
            "fleet.targets.web-03.files[0].path",
            "fix: write it from /",
        ),
        (
            "fleet.targets.web-03.files",
            [{"path": "/var/log/x", "size": "5M"}],
            "fleet.targets.web-03.files[0]",
            "size and fill go together",
        ),
        (
            "fleet.targets.web-03.files",
            [{"path": "/var/log/x", "size": "5 MB", "fill": "api"}],
            "fleet.targets.web-03.files[0].size",
            None,
        ),
        (
            "fleet.targets.web-03.files",
            [{"path": "/var/log/x", "size": "5 parsecs", "fill": "api"}],
            "fleet.targets.web-03.files[0].size",
            "write bytes (1048576) or a number with K, M, G or T",
        ),
        (
            "fleet.targets.web-03.files",
            [{"path": "/var/log/x", "age": "yesterday", "lines": ["a"]}],
            "fleet.targets.web-03.files[0].age",
            "age 'yesterday'; fix: write seconds (90)",
        ),
        (
            "fleet.targets.web-03.files",
            [{"path": "/var/log/x", "lines": ["{time:2m:iso8601} a"]}],
            "fleet.targets.web-03.files[0].lines",
            "unknown format 'iso8601'; fix: use one of iso",
        ),
        (
            "fleet.targets.web-03.files",
            [{"path": "/var/log/x", "lines": ["a\nb"]}],
            "fleet.targets.web-03.files[0].lines",
            "fix: one list item per line",
        ),
        (
            "fleet.targets.web-03.files",
            [{"path": "/var/log/x", "size": "1K", "fill": "fortune"}],
            "fleet.targets.web-03.files[0].fill",
            "Input should be",
        ),
        (
            "fleet.targets.web-03.commands",
            {"tail_log": {"description": "d", "output": "o"}},
            "fleet.targets.web-03.commands",
            "a tool the bot or the demo already has",
        ),
        (
            "fleet.targets.web-03.processes",
            [{"pid": 9, "user": "api", "cpu": 1, "command": "x", "service": "nginx"}],
            "fleet.targets.web-03",
            "belongs to service 'nginx'",
        ),
        (
            "fleet.targets.web-03.machine",
            {"disks": [{"device": "/dev/vdb", "mount": "/data", "size": "1G"}]},
            "fleet.targets.web-03.machine.disks",
            "no disk is mounted on /",
        ),
        ("fleet.targets", {"Web_03": {}}, "fleet.targets", "is not an inventory name"),
        ("fleet.targets.web-03.runner", "down", "tags", "fix: tag it runner-down"),
        ("reference", {"turns": [{"txt": "hi"}]}, "reference", "turns[0]: unknown key 'txt'"),
        (
            "reference",
            {"turns": [{"tool_calls": [{"name": "x", "arguments": {"path": "${web-3.log_dir}"}}]}]},
            "reference",
            "unknown variable ${web-3.log_dir}",
        ),
    ],
)
def test_mistakes_are_named_by_file_place_and_fix(
    tmp_path: Path, edit: str, value: Any, place: str, says: str | None
) -> None:
    path = write(tmp_path, changed(edit, value))
    if says is None:  # a spelling the format accepts
        load_eval_scenario(path)
        return
    with pytest.raises(ScenarioFileError) as raised:
        load_eval_scenario(path)
    lines = str(raised.value).splitlines()
    assert all(line.startswith(f"{path}: ") for line in lines), lines
    assert any(line.startswith(f"{path}: {place}: ") and says in line for line in lines), lines


def test_every_problem_of_a_file_is_listed(tmp_path: Path) -> None:
    data = changed("description", None)
    data["start"] = {"mention": ""}
    with pytest.raises(ScenarioFileError) as raised:
        load_eval_scenario(write(tmp_path, data))
    assert len(raised.value.problems) == 2


def test_a_key_given_twice_is_refused(tmp_path: Path) -> None:
    text = yaml.safe_dump(MINIMAL, sort_keys=False) + "truth: {root_causes: [], facts: [x]}\n"
    with pytest.raises(
        ScenarioFileError, match=r"key 'truth' is given twice \(first on line \d+\); fix: keep one"
    ):
        load_eval_scenario(write(tmp_path, text))


def test_the_name_is_the_file_name(tmp_path: Path) -> None:
    with pytest.raises(
        ScenarioFileError, match=r"name: 'tiny' is not the file's name; fix: name the file tiny.yaml"
    ):
        load_eval_scenario(write(tmp_path, MINIMAL, name="other"))


@pytest.mark.parametrize(
    "text",
    [
        "!!python/object/apply:os.system ['true']\n",  # YAML that would run code elsewhere
        "name: [unclosed\n",
        "- just\n- a list\n",
    ],
)
def test_hostile_or_broken_yaml_is_refused_with_the_file_named(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ScenarioFileError) as raised:
        load_eval_scenario(path)
    assert str(raised.value).startswith(f"{path}: ")


def test_an_unknown_scenario_name_lists_the_shipped_ones(tmp_path: Path) -> None:
    write(tmp_path, MINIMAL)
    with pytest.raises(ScenarioFileError, match="no such scenario; fix: give a file, or one of: tiny"):
        find_scenario("disk-ful", directory=tmp_path)
    assert find_scenario("tiny", directory=tmp_path).name == "tiny"


def test_every_family_has_its_rule() -> None:
    assert set(_FAMILY_RULES) == set(FAMILIES)
