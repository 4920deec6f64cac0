"""The pre-commit hooks run exactly what ``make check`` runs, with the project's own virtualenv.

``make check`` is the edit loop (CONTRIBUTING.md); ``.pre-commit-config.yaml`` runs the same
commands as local hooks. A command added to one and not the other, or a hook that would fetch a
tool of its own instead of using ``.venv``, fails here.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def make_check_commands() -> list[list[str]]:
    """The Makefile's ``check`` recipe, one argv per line, ``$(BIN)`` spelled ``.venv/bin`` and a
    leading ``NAME=value`` written as ``env NAME=value ...`` (how a hook without a shell says it)."""
    recipe = re.search(r"^check:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), flags=re.M)
    assert recipe is not None, "the Makefile has no check target"
    commands = []
    for line in recipe.group(1).splitlines():
        argv = shlex.split(line.strip().replace("$(BIN)", ".venv/bin"))
        if "=" in argv[0]:
            argv = ["env", *argv]
        commands.append(argv)
    return commands


def hooks() -> list[dict[str, Any]]:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    assert [repo["repo"] for repo in config["repos"]] == ["local"]  # nothing downloaded
    found: list[dict[str, Any]] = config["repos"][0]["hooks"]
    return found


def test_the_hooks_are_make_checks_commands_in_order() -> None:
    assert [shlex.split(hook["entry"]) for hook in hooks()] == make_check_commands()


def test_every_hook_uses_the_projects_virtualenv_on_the_whole_tree() -> None:
    for hook in hooks():
        assert hook["language"] == "system", hook["id"]
        assert hook["pass_filenames"] is False, hook["id"]  # as make check: the whole tree, not a diff
        tool = next(word for word in shlex.split(hook["entry"]) if "/" in word)
        assert tool.startswith(".venv/bin/"), hook["id"]
        assert (ROOT / ".venv").exists() is False or (ROOT / tool).exists(), f"{tool} is not installed"


def test_only_the_tests_wait_for_a_push() -> None:
    stages = {hook["id"]: hook.get("stages") for hook in hooks()}
    assert stages.pop("fast-tests") == ["pre-push", "manual"]
    assert set(stages.values()) == {None}  # the default: before each commit
