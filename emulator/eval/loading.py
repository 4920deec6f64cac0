"""Reading scenario files: strictly, with every mistake named by file, place and fix.

``load_eval_scenario(path)`` reads one file; ``shipped_scenarios()`` every file the project ships
(``emulator/eval/scenarios``, installed with the package); ``find_scenario(name_or_path)`` what
``chatops eval run --scenario`` will accept. A file is refused, all its problems listed one a
line (``FILE: PLACE: what is wrong; fix: what to write``), when:

* it is not YAML, or a key is given twice in one mapping (YAML would keep the last silently);
* the scenario model refuses it (``emulator.eval.spec``: unknown keys, wrong types, tags that do
  not fit what the scenario declares, ...);
* its ``name`` is not the file's name (``--scenario NAME`` finds a file by its name);
* its ``reference`` is not a valid scripted model (``emulator.models.scenario``), with the
  simulated hosts' folders standing in for the ones a run will have.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from emulator.eval.errors import ScenarioFileError
from emulator.eval.spec import EvalScenario
from emulator.models.scenario import Scenario, ScenarioError, parse_scenario

SCENARIO_DIR = Path(__file__).parent / "scenarios"
PLACEHOLDER_ROOT = "/srv/chatops-eval"
"""Where the hosts' folders stand when a reference agent is checked without a run."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping."""


def _unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _value in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"key {key!r} is given twice (first on line {seen[key] + 1}); fix: keep one",
                key_node.start_mark,
            )
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ScenarioFileError(str(path), [f"cannot read: {error}"]) from error
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as error:
        raise ScenarioFileError(str(path), [f"not valid YAML: {error}"]) from error


def place(loc: Sequence[int | str]) -> str:
    """``('truth', 'facts', 0, 'text')`` as ``truth.facts[0].text``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top)"


def _fix(error: Mapping[str, Any]) -> str:
    kind, message = error["type"], str(error["msg"])
    name = str(error["loc"][-1]) if error["loc"] else "it"
    if kind == "missing":
        return f"missing; fix: add {name}:"
    if kind == "extra_forbidden":
        return "unknown key; fix: remove it"
    if kind in ("value_error", "assertion_error"):
        return message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return f"expected a mapping (key: value), got {type(error.get('input')).__name__}; fix: write {name}: as a mapping"
    if kind in ("list_type", "tuple_type"):
        return (
            f"expected a list, got {type(error.get('input')).__name__}; fix: write each item on a '- ' line"
        )
    if kind == "too_short":
        return f"needs at least {error['ctx']['min_length']}; fix: add one"
    if kind == "string_pattern_mismatch":
        return f"{error.get('input')!r} does not have the form {error['ctx']['pattern']}; fix: rewrite it in that form"
    return f"{message}; fix: change the value"


def problems_of(error: ValidationError) -> list[str]:
    """One ``PLACE: what; fix: ...`` line per problem, each once."""
    lines: list[str] = []
    for item in error.errors():
        found = _fix(item).splitlines() if not item["loc"] else [f"{place(item['loc'])}: {_fix(item)}"]
        lines.extend(line for line in found if line not in lines)
    return lines


def reference_variables(targets: Sequence[str], roots: Mapping[str, str] | None = None) -> dict[str, str]:
    """``${NAME.log_dir}`` and ``${NAME.host_root}`` of each target (``roots``: target -> host root;
    default: placeholders); ``${log_dir}`` / ``${host_root}``: the first target's (the demo's rule)."""
    variables: dict[str, str] = {}
    for target in targets:
        root = (roots or {}).get(target, f"{PLACEHOLDER_ROOT}/{target}")
        variables[f"{target}.host_root"] = root
        variables[f"{target}.log_dir"] = f"{root}/var/log"
    if targets:
        variables["host_root"] = variables[f"{targets[0]}.host_root"]
        variables["log_dir"] = variables[f"{targets[0]}.log_dir"]
    return variables


def reference_agent(
    scenario: EvalScenario, variables: Mapping[str, str] | None = None, source: str = ""
) -> Scenario:
    """The scenario's reference agent as a scripted model, with the hosts' folders filled in."""
    data = {"name": f"{scenario.name}-reference", **scenario.reference}
    where = f"{source or scenario.name}: reference"
    return parse_scenario(data, where, variables or reference_variables(scenario.targets))


def parse_eval_scenario(data: Any, source: str) -> EvalScenario:
    """A scenario from parsed YAML; ``ScenarioFileError`` lists every problem."""
    try:
        scenario = EvalScenario.model_validate(data)
    except ValidationError as error:
        raise ScenarioFileError(source, problems_of(error)) from None
    try:
        reference_agent(scenario, source=source)
    except ScenarioError as error:
        detail = str(error).removeprefix(f"{source}: ")
        raise ScenarioFileError(
            source,
            [f"{detail}; fix: write it in the scripted model's language (emulator/models/scenario.py)"],
        ) from None
    return scenario


def load_eval_scenario(path: Path) -> EvalScenario:
    scenario = parse_eval_scenario(read_yaml(path), str(path))
    if scenario.name != path.stem:
        raise ScenarioFileError(
            str(path),
            [f"name: {scenario.name!r} is not the file's name; fix: name the file {scenario.name}.yaml"],
        )
    return scenario


def shipped_files(directory: Path = SCENARIO_DIR) -> list[Path]:
    return sorted(directory.glob("*.yaml"))


def shipped_scenarios(directory: Path = SCENARIO_DIR) -> list[EvalScenario]:
    """Every scenario the project ships, by name."""
    return [load_eval_scenario(path) for path in shipped_files(directory)]


def find_scenario(name_or_path: str, directory: Path = SCENARIO_DIR) -> EvalScenario:
    """A file (a path that exists, or ends in .yaml), else a shipped scenario by name."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return load_eval_scenario(path)
    shipped = directory / f"{name_or_path}.yaml"
    if not shipped.exists():
        names = ", ".join(p.stem for p in shipped_files(directory))
        raise ScenarioFileError(name_or_path, [f"no such scenario; fix: give a file, or one of: {names}"])
    return load_eval_scenario(shipped)
