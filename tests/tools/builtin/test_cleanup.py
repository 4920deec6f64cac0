"""clean_old_logs: the dry run lists files and bytes; the approved run deletes exactly those."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from agent.tooling import ToolCategory
from tools.base import FunctionTool
from tools.builtin.cleanup import PlanStore, cleanup_tools
from tools.paths import AllowedDirs

DAY = 86400
APPROVED = {"confirmed_by": "U024BE7LH"}


def make(path: Path, size: int, age_days: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    stamp = time.time() - age_days * DAY
    os.utime(path, (stamp, stamp))
    return path


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    root = Path(os.path.realpath(tmp_path)) / "log"
    make(root / "app" / "app.log", 5000, 30)  # active name: kept by default even if old
    make(root / "app" / "app.log.1", 2048, 10)
    make(root / "app" / "app.log.2.gz", 1024, 20)
    make(root / "syslog-20250101.gz", 4096, 40)
    make(root / "app" / "app.log.0", 512, 1)  # too young
    return root


def clean_tool(logs: Path, tmp_path: Path, ttl: float = 3600) -> FunctionTool[Any]:
    store = PlanStore(tmp_path / "state", ttl_seconds=ttl)
    (tool,) = cleanup_tools(AllowedDirs([logs]), store)
    return tool


def remaining(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*") if path.is_file())


def test_it_is_destructive_with_a_preview(logs: Path, tmp_path: Path) -> None:
    tool = clean_tool(logs, tmp_path)
    assert tool.category is ToolCategory.DESTRUCTIVE
    assert "confirmed_by" not in json.dumps(tool.definition.parameters)


def test_the_dry_run_lists_the_files_and_bytes_and_deletes_nothing(logs: Path, tmp_path: Path) -> None:
    preview = clean_tool(logs, tmp_path).preview('{"older_than_days": 7}', timeout=30)
    assert preview is not None and not preview.is_error
    lines = preview.output.splitlines()
    assert lines[0].startswith(
        "Dry run: clean_old_logs would delete 3 files (7.0 KiB), last modified before "
    )
    listed = [line.split()[-1] for line in lines[2:5]]
    assert listed == [  # oldest first
        str(logs / "syslog-20250101.gz"),
        str(logs / "app" / "app.log.2.gz"),
        str(logs / "app" / "app.log.1"),
    ]
    assert "4.0 KiB" in lines[2] and "2.0 KiB" in lines[4]
    assert lines[-1] == "Approving deletes only these files; any that changes before then is skipped."
    assert len(remaining(logs)) == 5


def test_the_approved_run_deletes_exactly_the_listed_files(logs: Path, tmp_path: Path) -> None:
    tool = clean_tool(logs, tmp_path)
    tool.preview('{"older_than_days": 7}', timeout=30)
    result = tool.execute(json.dumps({"older_than_days": 7, **APPROVED}), timeout=30)
    assert not result.is_error
    assert result.output == "Deleted 3 of 3 planned files, freeing 7.0 KiB.\n(approved by U024BE7LH)"
    assert remaining(logs) == ["app/app.log", "app/app.log.0"]


def test_a_file_that_starts_matching_after_the_dry_run_is_not_deleted(logs: Path, tmp_path: Path) -> None:
    tool = clean_tool(logs, tmp_path)
    tool.preview('{"older_than_days": 7}', timeout=30)
    make(logs / "app" / "app.log.9.gz", 999, 50)  # appears between the dry run and the approval
    result = tool.execute(json.dumps({"older_than_days": 7, **APPROVED}), timeout=30)
    assert result.output.startswith("Deleted 3 of 3 planned files")
    assert "app/app.log.9.gz" in remaining(logs)


def test_a_file_that_changed_after_the_dry_run_is_skipped_and_reported(logs: Path, tmp_path: Path) -> None:
    tool = clean_tool(logs, tmp_path)
    tool.preview('{"older_than_days": 7}', timeout=30)
    with open(logs / "app" / "app.log.1", "ab") as handle:
        handle.write(b"late write")
    # Same name, size and age, but another file (made first, so it cannot reuse the inode).
    os.replace(make(logs / "new.tmp", 4096, 40), logs / "syslog-20250101.gz")
    result = tool.execute(json.dumps({"older_than_days": 7, **APPROVED}), timeout=30)
    lines = result.output.splitlines()
    assert lines[0] == "Deleted 1 of 3 planned files, freeing 1.0 KiB."
    assert lines[1] == "Skipped 2, changed since the dry run:"
    assert f"  {logs / 'syslog-20250101.gz'} (replaced by another file)" in lines
    assert f"  {logs / 'app' / 'app.log.1'} (modified)" in lines
    assert "syslog-20250101.gz" in remaining(logs) and "app/app.log.1" in remaining(logs)


def test_a_directory_swapped_for_a_symlink_after_the_dry_run_is_not_followed(
    logs: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    precious = make(elsewhere / "app.log.2.gz", 1024, 20)
    tool = clean_tool(logs, tmp_path)
    tool.preview('{"older_than_days": 7, "path": "app"}', timeout=30)
    (logs / "app").rename(logs / "app-moved")
    (logs / "app").symlink_to(elsewhere)
    result = tool.execute(json.dumps({"older_than_days": 7, "path": "app", **APPROVED}), timeout=30)
    assert result.output.startswith("Deleted 0 of 2 planned files")
    assert "its directory is no longer a plain directory" in result.output
    assert precious.exists()


def test_without_a_dry_run_on_record_nothing_is_deleted(logs: Path, tmp_path: Path) -> None:
    result = clean_tool(logs, tmp_path).execute(json.dumps({"older_than_days": 7, **APPROVED}), timeout=30)
    assert result.is_error
    assert "no dry run is on record for these arguments" in result.output
    assert len(remaining(logs)) == 5


def test_a_plan_is_used_once_and_other_arguments_need_their_own_dry_run(logs: Path, tmp_path: Path) -> None:
    tool = clean_tool(logs, tmp_path)
    tool.preview('{"older_than_days": 7}', timeout=30)
    other = tool.execute(json.dumps({"older_than_days": 8, **APPROVED}), timeout=30)
    assert other.is_error
    assert not tool.execute(json.dumps({"older_than_days": 7, **APPROVED}), timeout=30).is_error
    again = tool.execute(json.dumps({"older_than_days": 7, **APPROVED}), timeout=30)
    assert again.is_error and "no dry run is on record" in again.output


def test_a_repeated_dry_run_shows_the_plan_the_approver_saw(logs: Path, tmp_path: Path) -> None:
    tool = clean_tool(logs, tmp_path)
    first = tool.preview('{"older_than_days": 7}', timeout=30)
    make(logs / "late.log.3", 100, 30)
    second = tool.preview('{"older_than_days": 7}', timeout=30)
    assert first is not None and second is not None
    assert "late.log.3" not in second.output
    assert "(this is the dry run made at " in second.output


def test_an_expired_plan_is_refused(logs: Path, tmp_path: Path) -> None:
    tool = clean_tool(logs, tmp_path, ttl=0.0)
    tool.preview('{"older_than_days": 7}', timeout=30)
    time.sleep(0.01)
    result = tool.execute(json.dumps({"older_than_days": 7, **APPROVED}), timeout=30)
    assert result.is_error and len(remaining(logs)) == 5


def test_a_name_glob_selects_other_files(logs: Path, tmp_path: Path) -> None:
    preview = clean_tool(logs, tmp_path).preview('{"older_than_days": 7, "name_glob": "*.log"}', timeout=30)
    assert preview is not None
    assert (
        "would delete 1 files (4.9 KiB)" in preview.output and str(logs / "app" / "app.log") in preview.output
    )


def test_nothing_to_delete_is_said_plainly(logs: Path, tmp_path: Path) -> None:
    preview = clean_tool(logs, tmp_path).preview('{"older_than_days": 365}', timeout=30)
    assert preview is not None and preview.output.startswith(
        "Dry run: nothing to delete: no file last modified"
    )


def test_files_outside_the_log_dirs_cannot_be_targeted(logs: Path, tmp_path: Path) -> None:
    outside = make(tmp_path / "data" / "db.1", 100, 30)
    (logs / "data-link").symlink_to(outside.parent)
    tool = clean_tool(logs, tmp_path)
    refused = tool.preview(json.dumps({"path": str(outside.parent)}), timeout=30)
    assert refused is not None and refused.is_error and "outside the log directories" in refused.output
    preview = tool.preview("{}", timeout=30)
    assert preview is not None and "db.1" not in preview.output  # symlinks are not followed


def test_a_state_directory_others_can_write_is_refused(logs: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o777)
    state.chmod(0o777)
    preview = clean_tool(logs, tmp_path).preview("{}", timeout=30)
    assert preview is not None and preview.is_error and "is not private to this user" in preview.output
