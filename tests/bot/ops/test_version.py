"""``chatops --version``: pyproject.toml's version, the one place it is written, through the real
console script (the installed entry point, as an operator runs it), before any setting is read."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def project_version() -> str:
    version: str = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    return version


def test_chatops_version_is_pyprojects_and_needs_no_settings(tmp_path: Path) -> None:
    # A settings file that stops every command (an unknown name, a malformed URL): --version
    # answers anyway, from a directory that is not the source tree.
    (tmp_path / ".env").write_text("CHATOPS_APROVERS=U1\nREDIS_URL=not a url\n")
    script = Path(sys.executable).parent / "chatops"
    done = subprocess.run(
        [str(script), "--version"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    # A stale editable install (pyproject.toml bumped since) shows here: `make` installs it again.
    assert done.stdout.strip() == f"chatops {project_version()}", done.stdout
    assert done.stderr == ""
