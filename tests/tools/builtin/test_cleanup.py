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
from tools.builtin.cleanup import cleanup_tools
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
    (tool,) = cleanup_tools(AllowedDirs([logs]), ttl)
    return tool


def dry_run(tool: FunctionTool[Any], arguments: dict[str, Any]) -> str:
    """The plan of a dry run, as the loop hands it back with the approval."""
    preview = tool.preview(json.dumps(arguments), timeout=30)
    assert preview is not None and not preview.is_error and preview.plan
    return preview.plan


def approved(arguments: dict[str, Any], plan: str | None) -> str:
    return json.dumps({**arguments, **APPROVED, "approved_plan": plan})


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
    plan = dry_run(tool, {"older_than_days": 7})
    result = tool.execute(approved({"older_than_days": 7}, plan), timeout=30)
    assert not result.is_error
    assert result.output.startswith("Deleted 3 of 3 planned files, freeing 7.0 KiB.")
    assert remaining(logs) == ["app/app.log", "app/app.log.0"]


def test_a_file_that_starts_matching_after_the_dry_run_is_not_deleted(logs: Path, tmp_path: Path) -> None:
    tool = clean_tool(logs, tmp_path)
    plan = dry_run(tool, {"older_than_days": 7})
    make(logs / "app" / "app.log.9.gz", 999, 50)  # appears between the dry run and the approval
    result = tool.execute(approved({"older_than_days": 7}, plan), timeout=30)
    assert result.output.startswith("Deleted 3 of 3 planned files")
    assert "app/app.log.9.gz" in remaining(logs)


def test_a_file_that_changed_after_the_dry_run_is_skipped_and_reported(logs: Path, tmp_path: Path) -> None:
    tool = clean_tool(logs, tmp_path)
    plan = dry_run(tool, {"older_than_days": 7})
    with open(logs / "app" / "app.log.1", "ab") as handle:
        handle.write(b"late write")
    # Same name, size and age, but another file (made first, so it cannot reuse the inode).
    os.replace(make(logs / "new.tmp", 4096, 40), logs / "syslog-20250101.gz")
    result = tool.execute(approved({"older_than_days": 7}, plan), timeout=30)
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
    plan = dry_run(tool, {"older_than_days": 7, "path": "app"})
    (logs / "app").rename(logs / "app-moved")
    (logs / "app").symlink_to(elsewhere)
    result = tool.execute(approved({"older_than_days": 7, "path": "app"}, plan), timeout=30)
    assert result.is_error and "outside the log directories" in result.output  # the call's own path
    assert precious.exists()
    # Without a path in the call, each planned file's directory is checked by inode.
    plan = dry_run(tool, {"older_than_days": 7})
    (logs / "app").unlink()
    (logs / "app-moved").rename(logs / "app")
    wide = dry_run(tool, {"older_than_days": 7})
    (logs / "app").rename(logs / "app-moved")
    (logs / "app").symlink_to(elsewhere)
    result = tool.execute(approved({"older_than_days": 7}, wide), timeout=30)
    assert "its directory is no longer a plain directory" in result.output
    assert precious.exists() and plan


def test_without_an_approved_plan_nothing_is_deleted(logs: Path, tmp_path: Path) -> None:
    tool = clean_tool(logs, tmp_path)
    dry_run(tool, {"older_than_days": 7})  # a dry run alone authorises nothing
    for plan in (None, "", "not json", json.dumps({"version": 99})):
        result = tool.execute(approved({"older_than_days": 7}, plan), timeout=30)
        assert result.is_error and "no approved dry run came with this call" in result.output
    assert len(remaining(logs)) == 5


def test_a_tampered_plan_deletes_only_what_the_call_itself_would_have_chosen(
    logs: Path, tmp_path: Path
) -> None:
    """Someone who can write the plan (in Redis) adds files: a young one, an active log, one outside."""
    outside = make(tmp_path / "data" / "db.1.gz", 100, 30)
    tool = clean_tool(logs, tmp_path)
    plan = json.loads(dry_run(tool, {"older_than_days": 7}))
    for path in (logs / "app" / "app.log.0", logs / "app" / "app.log", outside):
        info, parent = os.stat(path), os.stat(path.parent)
        plan["files"].append(
            {
                "path": str(path),
                "size": info.st_size,
                "mtime_ns": info.st_mtime_ns,
                "dev": info.st_dev,
                "ino": info.st_ino,
                "parent_dev": parent.st_dev,
                "parent_ino": parent.st_ino,
            }
        )
    plan["cutoff"] = time.time() + DAY  # a forged cutoff does not make young files old
    result = tool.execute(approved({"older_than_days": 7}, json.dumps(plan)), timeout=30)
    assert result.output.startswith("Deleted 3 of 6 planned files")
    assert "not older than 7 days" in result.output and "its name does not match" in result.output
    assert "not under the approved path" in result.output
    assert remaining(logs) == ["app/app.log", "app/app.log.0"] and outside.exists()


def test_another_calls_plan_cannot_widen_a_narrower_call(logs: Path, tmp_path: Path) -> None:
    tool = clean_tool(logs, tmp_path)
    wide = dry_run(tool, {"older_than_days": 7})
    result = tool.execute(approved({"older_than_days": 7, "path": "app"}, wide), timeout=30)
    assert result.output.startswith("Deleted 2 of 3 planned files")
    assert "syslog-20250101.gz" in remaining(logs)


def test_an_expired_plan_is_refused(logs: Path, tmp_path: Path) -> None:
    tool = clean_tool(logs, tmp_path, ttl=0.0)
    plan = dry_run(tool, {"older_than_days": 7})
    result = tool.execute(approved({"older_than_days": 7}, plan), timeout=30)
    assert result.is_error and "older than" in result.output and len(remaining(logs)) == 5


def test_a_name_glob_selects_other_files(logs: Path, tmp_path: Path) -> None:
    preview = clean_tool(logs, tmp_path).preview('{"older_than_days": 7, "name_glob": "*.log"}', timeout=30)
    assert preview is not None
    assert (
        "would delete 1 files (4.9 KiB)" in preview.output and str(logs / "app" / "app.log") in preview.output
    )


def test_nothing_to_delete_is_said_plainly_and_marked_as_nothing_to_do(logs: Path, tmp_path: Path) -> None:
    preview = clean_tool(logs, tmp_path).preview('{"older_than_days": 365}', timeout=30)
    assert preview is not None and preview.nothing_to_do
    assert preview.output.startswith("Dry run: nothing to delete: no file last modified")


def test_files_outside_the_log_dirs_cannot_be_targeted(logs: Path, tmp_path: Path) -> None:
    outside = make(tmp_path / "data" / "db.1", 100, 30)
    (logs / "data-link").symlink_to(outside.parent)
    tool = clean_tool(logs, tmp_path)
    refused = tool.preview(json.dumps({"path": str(outside.parent)}), timeout=30)
    assert refused is not None and refused.is_error and "outside the log directories" in refused.output
    preview = tool.preview("{}", timeout=30)
    assert preview is not None and "db.1" not in preview.output  # symlinks are not followed
