"""The clean_old_logs dry run shows hostile file names as inert, escaped text, on the card too.

Whoever can write to a log directory chooses the file names the approver reads. A name with a
newline must not add a line ("NOTE: preview only"), backticks must not end the card's code
block, and bidi or zero-width characters must not make a name read as another one.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from agent.tooling import ToolCategory
from bot.runs.approvals import Approval
from bot.slack.rendering import render
from tools.builtin.cleanup import cleanup_tools, shown_name
from tools.paths import AllowedDirs

DAY = 86400
FAKE_LINE = "NOTE: preview only"


def old_file(path: Path) -> Path:
    path.write_bytes(b"x" * 100)
    stamp = time.time() - 30 * DAY
    os.utime(path, (stamp, stamp))
    return path


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    root = Path(os.path.realpath(tmp_path)) / "log"
    root.mkdir()
    return root


def dry_run_text(logs: Path) -> str:
    (tool,) = cleanup_tools(AllowedDirs([logs]), 3600)
    preview = tool.preview(json.dumps({"name_glob": "*"}), timeout=30)
    assert preview is not None and not preview.is_error
    return preview.output


def test_a_file_name_with_a_newline_cannot_add_a_line_to_the_dry_run(logs: Path) -> None:
    old_file(logs / f"app.log.1\n{FAKE_LINE}")
    text = dry_run_text(logs)
    assert not any(line.startswith(FAKE_LINE) for line in text.splitlines())
    assert repr(str(logs / f"app.log.1\n{FAKE_LINE}")) in text  # shown quoted, the newline as \n
    assert len(text.splitlines()) == 4  # the summary, the table's header and one row, the closing note


@pytest.mark.parametrize(
    "name",
    ["x```*bold* <!channel>.log", "evil\u202egol.1", "zero\u200bwidth.1", "bell\x07\r.1", "tab\there.1"],
)
def test_hostile_names_are_shown_escaped(logs: Path, name: str) -> None:
    old_file(logs / name)
    text = dry_run_text(logs)
    assert not set("\u202e\u200b\x07\r\t`") & set(text)
    assert repr(str(logs / name)).replace("`", "\\x60") in text


def test_plain_names_are_shown_as_they_are() -> None:
    assert shown_name("/var/log/app/app.log.1") == "/var/log/app/app.log.1"
    assert shown_name("/var/log/ünïcode 日志.log.1") == "/var/log/ünïcode 日志.log.1"
    # A backslash or a leading quote forces the quoted form: an escape is never ambiguous.
    assert shown_name("a\\nb") == "'a\\\\nb'" and shown_name("'x'") == "\"'x'\""


def test_on_the_approval_card_the_fake_line_stays_inside_the_escaped_name(logs: Path) -> None:
    old_file(logs / f"app.log.1\n{FAKE_LINE}\n```")
    preview = dry_run_text(logs)
    approval = Approval(
        id="a" * 32,
        run_id="r" * 32,
        call_id="c1",
        tool="clean_old_logs",
        args_json='{"name_glob": "*"}',
        args_sha256="0" * 64,
        category=ToolCategory.DESTRUCTIVE,
        requester="U_ALICE",
        created_at=1_700_000_000.0,
        expires_at=1_700_001_800.0,
        preview=preview,
        plan_created_at=1_699_999_880.0,
    )
    assert render.approval_card_problem(approval) is None
    sections = [block["text"]["text"] for block in render.approval_blocks(approval) if "text" in block]
    dry_run = next(text for text in sections if text.startswith("*Dry run*"))
    body = dry_run.removeprefix("*Dry run*\n```").removesuffix("```")
    assert "```" not in body
    assert not any(line.startswith(FAKE_LINE) for line in body.splitlines())
