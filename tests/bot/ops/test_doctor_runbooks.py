"""``chatops doctor`` names each runbook the index skips, and what is wrong with it."""

from __future__ import annotations

from pathlib import Path

from bot.ops.doctor_check import Outcome
from bot.ops.doctor_runbooks import check_runbooks
from bot.settings import Settings


def settings(folder: Path) -> Settings:
    return Settings(_env_file=None, chatops_runbooks_dir=folder)  # type: ignore[call-arg]


def test_a_malformed_runbook_is_a_warning_naming_the_file_and_the_problem(tmp_path: Path) -> None:
    (tmp_path / "good.md").write_text("---\nalerts: [DiskFull]\n---\n# Disk\n")
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "bad.md").write_text("---\nlabels: {service: '=~\"(\"'}\n---\n# Bad\n")
    check = check_runbooks(settings(tmp_path))
    assert check.outcome is Outcome.WARN
    text = "\n".join(check.lines())
    assert "1 runbooks in" in text and "ops/bad.md: front matter: labels: bad regex" in text
    (tmp_path / "ops" / "bad.md").unlink()
    assert check_runbooks(settings(tmp_path)).outcome is Outcome.PASS
    assert check_runbooks(settings(tmp_path / "missing")).outcome is Outcome.FAIL
