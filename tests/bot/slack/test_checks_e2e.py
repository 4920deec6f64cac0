"""An approved restart is checked right after it runs (issue 34), through the web app, the Slack
emulator, a worker and the real ``service_restart`` on a fake ``systemctl``.

The fake keeps its unit's state in files: a restart stamps the time it ran; ``show`` answers from
the mode the test chose: ``up`` (active since the restart), ``crash`` (activating for the
restart's own look, failed after) or ``hang`` (the restart's own look answers, every later one
hangs).
"""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent.scripted import FunctionModel, ScriptItem, tool_call
from agent.types import Request, RunStatus
from agent.verification import PlannedCall, Verification
from bot.observability.audit import AuditKind
from bot.slack.rendering import render
from tests.bot.slack.test_postmortem_e2e import download, drafts
from tests.support.slack_bot import SlackBot
from tests.support.slack_workspace import buttons
from tests.support.waiting import wait_for

SYSTEMCTL = r"""#!/bin/sh
dir="$FAKE_SYSTEMCTL_DIR"
case "$1" in
  restart)
    date +%s > "$dir/started"
    echo 0 > "$dir/looks"
    exit 0;;
  show)
    looks=$(( $(cat "$dir/looks" 2>/dev/null || echo 0) + 1 ))
    echo "$looks" > "$dir/looks"
    unit=$(for last in "$@"; do :; done; echo "$last")
    echo "$unit" >> "$dir/shown"
    mode=$(cat "$dir/mode")
    since=$(date -u -d "@$(cat "$dir/started" 2>/dev/null || echo 0)" '+%a %Y-%m-%d %H:%M:%S UTC')
    state=active; sub=running
    if [ "$mode" = crash ]; then
      if [ "$looks" = 1 ]; then state=activating; sub=start; else state=failed; sub=failed; fi
    fi
    if [ "$mode" = hang ] && [ "$looks" -gt 1 ]; then sleep 30; fi
    printf 'Id=%s.service\nLoadState=loaded\nActiveState=%s\nSubState=%s\nActiveEnterTimestamp=%s\nMainPID=42\n' \
      "$unit" "$state" "$sub" "$since"
    exit 0;;
esac
exit 1
"""


class RestartModel:
    """Asks for one restart of ``api``, then answers with what it read last (the change's result)."""

    def __init__(self) -> None:
        self.read: list[str] = []

    def step(self, request: Request) -> ScriptItem:
        results = [m for m in request.messages if m.role == "tool"]
        if not results:
            return tool_call("service_restart", "call_0", service="api")
        self.read.append(results[-1].content or "")
        return "done"


@pytest.fixture
def fake_systemctl(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "systemctl"
    program.write_text(SYSTEMCTL)
    program.chmod(program.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "mode").write_text("up")
    return tmp_path


def restart_bot(
    make_bot: Callable[..., SlackBot], state: Path, model: RestartModel, seconds: float
) -> SlackBot:
    from tools.builtin.services import make_backend, service_tools

    env = {"PATH": f"{state / 'bin'}:/usr/bin:/bin", "FAKE_SYSTEMCTL_DIR": str(state)}
    return make_bot(
        models=[FunctionModel(model.step, model="restart")],
        tools=service_tools(make_backend("systemd", env)),
        chatops_check_seconds=seconds,
    )


def approve_restart(bot: SlackBot) -> tuple[str, str, dict[str, Any]]:
    ts = bot.mention("restart the api")
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.AWAITING_APPROVAL
    card = wait_for(lambda: next((m for m in bot.bot_replies(ts) if "Approval" in m["text"]), None))
    bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_APPROVE)
    return ts, run_id, card


def thread_text(bot: SlackBot, ts: str) -> str:
    return "\n".join(m.get("text", "") for m in bot.bot_replies(ts))


def test_the_card_shows_the_check_and_a_passing_check_is_verified_and_read_by_the_model(
    make_bot: Callable[..., SlackBot], fake_systemctl: Path
) -> None:
    model = RestartModel()
    bot = restart_bot(make_bot, fake_systemctl, model, 20)
    ts, run_id, card = approve_restart(bot)
    shown = json.dumps(card["blocks"])
    assert "*Then checks*" in shown and 'service_status {\\"service\\":\\"api\\"}' in shown
    assert "*No undo*" in shown and "a restart cannot be taken back" in shown
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    [read] = model.read
    assert "Restarted api" in read
    # The check's result, after the change's, under its own evidence id.
    assert "\n\n[E2] Verified: service_status" in read and "active (running)" in read
    assert ":white_check_mark: *Verified:* `service_status" in wait_for(
        lambda: thread_text(bot, ts) if "Verified" in thread_text(bot, ts) else None
    )
    result = next(m for m in bot.service.history(run_id) if m.role == "tool")
    assert result.meta.get("evidence") == "E1" and result.meta["check"]["evidence"] == "E2"


def test_a_unit_that_comes_back_failed_is_a_failed_check_the_model_is_told(
    make_bot: Callable[..., SlackBot], fake_systemctl: Path
) -> None:
    (fake_systemctl / "mode").write_text("crash")
    model = RestartModel()
    bot = restart_bot(make_bot, fake_systemctl, model, 2)
    ts, run_id, _ = approve_restart(bot)
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    [read] = model.read
    assert "activating (start)" in read  # the restart's own look
    assert "[E2] Check failed: service_status" in read and "failed (failed)" in read
    text = wait_for(lambda: thread_text(bot, ts) if "Check failed" in thread_text(bot, ts) else None)
    assert ":x: *Check failed:*" in text and "failed (failed)" in text
    [check] = [e for e in bot.service.audit.entries(run_id) if e.kind is AuditKind.CHECK_ENDED]
    assert (check.fields["tool"], check.fields["passed"]) == ("service_status", "0")

    # The postmortem draft tells the change, who approved it and its failed check, and asks why.
    def finished_card() -> dict[str, Any] | None:
        card = bot.message(ts, bot.bot_replies(ts)[0]["ts"])
        return card if len(buttons(card)) == 2 else None

    bot.control.click(wait_for(finished_card)["ts"], "U_BOB", action_id=render.ACTION_POSTMORTEM)
    [shared] = wait_for(lambda: drafts(bot, run_id), what="the postmortem draft")
    markdown = download(shared["url_private"])
    assert re.search(r"· U\\_BOB · approved service\\_restart after \S+ s · audit `", markdown)
    assert "· chatops · check service\\_status" in markdown and "failed \\(failed\\)" in markdown
    assert "The check after the change \\(service\\_status\\) failed\\: why?" in markdown
    assert re.search(r"service\\_restart .*approved by U\\_BOB: ok; check failed", markdown)


def test_a_check_that_does_not_finish_says_so_and_the_run_goes_on(
    make_bot: Callable[..., SlackBot], fake_systemctl: Path
) -> None:
    (fake_systemctl / "mode").write_text("hang")
    model = RestartModel()
    bot = restart_bot(make_bot, fake_systemctl, model, 2)
    ts, run_id, _ = approve_restart(bot)
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    [read] = model.read
    assert "[E2] Check did not finish in 2 s: service_status" in read
    assert wait_for(lambda: "Check did not finish in 2 s" in thread_text(bot, ts) or None)


def test_a_check_changed_in_redis_after_the_approval_is_not_run(
    make_bot: Callable[..., SlackBot], fake_systemctl: Path
) -> None:
    """A hostile Redis writer swaps the approved check for another unit's (``postgres``) between the
    click and the execution: the worker derives the check again from the approved call, finds it
    is not the approved one, runs neither and says so."""
    model = RestartModel()
    bot = restart_bot(make_bot, fake_systemctl, model, 5)
    ts, run_id, _ = approve_restart(bot)
    (approval,) = bot.service.approvals.for_run(run_id)
    forged = Verification(check=PlannedCall("service_status", '{"service":"postgres"}'))
    bot.redis.hset(bot.keys.approval(approval.id), "verify", forged.to_json())
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    [read] = model.read
    assert "Restarted api" in read and "[E2] Check not run:" in read
    assert "postgres" not in (fake_systemctl / "shown").read_text()  # nothing read another unit
    assert wait_for(lambda: "Check not run" in thread_text(bot, ts) or None)
