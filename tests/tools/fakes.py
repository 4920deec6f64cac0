"""Fake commands for tests: executables on PATH that record their argv and print canned output."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

_FAKE_PROGRAM = """#!{python}
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
name = os.path.basename(sys.argv[0])
with open(os.path.join(here, "calls.jsonl"), "a") as log:
    log.write(json.dumps({{"argv": sys.argv[1:], "name": name, "env": dict(os.environ)}}) + "\\n")
with open(os.path.join(here, name + ".json")) as spec_file:
    spec = json.load(spec_file)
for word, answer in spec["when"].items():
    if word in sys.argv[1:]:
        spec = answer
        break
sys.stdout.write(spec["stdout"])
sys.stderr.write(spec["stderr"])
sys.exit(spec["exit_code"])
"""


class FakeCommands:
    """Executables in a temporary bin directory that record every call and print canned output."""

    def __init__(self, directory: Path) -> None:
        self.bin = directory
        self.bin.mkdir()

    def add(
        self,
        name: str,
        stdout: str = "",
        stderr: str = "",
        exit_code: int = 0,
        when: dict[str, dict[str, object]] | None = None,
    ) -> None:
        """Install ``name``; ``when`` maps an argument (e.g. ``restart``) to another answer."""
        program = self.bin / name
        program.write_text(_FAKE_PROGRAM.format(python=sys.executable))
        program.chmod(0o755)
        answers = {
            word: {"stdout": "", "stderr": "", "exit_code": 0, **answer}
            for word, answer in (when or {}).items()
        }
        spec = {"stdout": stdout, "stderr": stderr, "exit_code": exit_code, "when": answers}
        (self.bin / f"{name}.json").write_text(json.dumps(spec))

    def calls(self, name: str | None = None) -> list[list[str]]:
        """The argv (without the program) of each call, in order."""
        return [call["argv"] for call in self._records() if name is None or call["name"] == name]

    def envs(self, name: str) -> list[dict[str, str]]:
        return [call["env"] for call in self._records() if call["name"] == name]

    def _records(self) -> list[dict[str, Any]]:
        log = self.bin / "calls.jsonl"
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines()]

    @property
    def env(self) -> dict[str, str]:
        """An environment whose PATH finds the fakes first."""
        return {**os.environ, "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}"}
