"""The README's example embeds the agent with the public API only, and it runs."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import agent
import bot
import tools

README = Path(__file__).resolve().parents[1] / "README.md"
PUBLIC = {"agent": agent, "tools": tools, "bot": bot}


def python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", README.read_text(), flags=re.S | re.M)


def test_the_readme_example_imports_only_the_public_api() -> None:
    (example,) = python_blocks()
    imports = [node for node in ast.walk(ast.parse(example)) if isinstance(node, ast.Import | ast.ImportFrom)]
    assert imports
    for node in imports:
        assert isinstance(node, ast.ImportFrom) and node.module is not None, ast.unparse(node)
        if node.module == "pydantic":
            continue
        assert node.module in PUBLIC, f"{ast.unparse(node)}: import from a package's root"
        exported = set(PUBLIC[node.module].__all__)
        assert {alias.name for alias in node.names} <= exported, ast.unparse(node)


def test_the_readme_example_runs() -> None:
    (example,) = python_blocks()
    # Its own asserts check the run's result and the tool's output in the history.
    exec(compile(example, str(README), "exec"), {"__name__": "readme_example"})


def test_every_exported_name_exists() -> None:
    for module in PUBLIC.values():
        assert len(set(module.__all__)) == len(module.__all__)
        for name in module.__all__:
            assert getattr(module, name) is not None, f"{module.__name__}.{name}"


def test_the_bot_api_loads_nothing_until_asked() -> None:
    """``bot``'s names are imported on first use: the run engine never loads the Slack transport."""
    code = (
        "import sys, bot.runs.jobs, bot.runs.run_job\n"
        "loaded = [m for m in sys.modules if m.startswith(('bot.slack', 'bot.ops', 'slack_sdk', 'slack_bolt'))]\n"
        "assert not loaded, loaded\n"
        "from bot import Settings, create_app\n"
        "assert 'bot.web.server' in sys.modules and Settings.__module__ == 'bot.settings'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=README.parent)


def test_an_unknown_bot_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        _ = bot.NoSuchThing  # type: ignore[attr-defined]
