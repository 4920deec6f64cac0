"""``chatops eval capture``: a real run (a shipped scenario through the real processes) captured
before its teardown, then run again from the captured file. The replay's calls read back the
outputs the original run saw; the confirmed capture passes, the unconfirmed one is refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import redis

from agent.types import Message
from bot.keys import Keys
from bot.ops.cli import build_parser
from bot.ops.eval_cli import capture_command
from bot.runs.service import RunOptions, RunService
from bot.settings import Settings
from emulator.eval.__main__ import main as harness
from emulator.eval.capture import capture
from emulator.eval.errors import ScenarioFileError
from emulator.eval.loading import find_scenario
from emulator.eval.runner import run_scenario
from emulator.eval.session import EvalSession

FROZEN_HEADER = re.compile(
    r"^`scenario-frozen [^\n]*` succeeded(?: in [0-9.]+ s)?\n"
)  # no time: CHATOPS_TOOL_ELAPSED=false


def settings_of(session: EvalSession) -> Settings:
    """The bot's settings as the session's processes have them (its Redis, its key prefix)."""
    assert session.redis is not None
    return Settings(_env_file=None, redis_url=session.redis.url, chatops_redis_prefix=session.key_prefix)  # type: ignore[call-arg]


def history(session: EvalSession, run_id: str) -> list[Message]:
    assert session.redis is not None
    client = redis.Redis.from_url(session.redis.url)
    try:
        return RunService(client, Keys(session.key_prefix), RunOptions()).history(run_id)
    finally:
        client.close()


def read_outputs(messages: list[Message]) -> list[tuple[str, str]]:
    """(tool, output) of every read-only call on a target, in order."""
    return [
        (str(m.meta.get("tool")), m.content or "")
        for m in messages
        if m.role == "tool" and m.meta.get("category") == "read_only" and m.meta.get("target")
    ]


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory, redis_server: object) -> dict[str, object]:
    """disk-full-rotations run once through the real processes and captured before its teardown."""
    url = redis_server.url  # type: ignore[attr-defined]
    folder = tmp_path_factory.mktemp("capture")
    seen: dict[str, object] = {}

    def take(session: EvalSession, run_id: str) -> None:
        seen["history"] = history(session, run_id)
        seen["confirmed"] = capture(settings_of(session), run_id[:8], folder / "captured.yaml", True)
        # the harness's own command, with the bot's settings from an env file as the CLI hands it
        env_file = folder / "bot.env"
        assert session.redis is not None
        env_file.write_text(f"REDIS_URL={session.redis.url}\nCHATOPS_REDIS_PREFIX={session.key_prefix}\n")
        draft = folder / "draft.yaml"
        assert harness(["capture", run_id, "--out", str(draft), "--env-file", str(env_file)]) == 0
        seen["unconfirmed"] = draft

    outcome = run_scenario(
        find_scenario("disk-full-rotations"), folder / "original", redis_url=url, before_teardown=take
    )
    assert outcome.score.passed
    return seen


def test_a_confirmed_capture_replays_the_outputs_the_run_saw_and_passes(
    captured: dict[str, object], redis_url: str, tmp_path: Path
) -> None:
    path = captured["confirmed"]
    assert isinstance(path, Path)
    scenario = find_scenario(str(path))
    assert scenario.tags == ("single-cause", "needs-approval")
    # tail_log's output became the file it read; the other read-only outputs are frozen
    web = scenario.fleet.targets["web-03"]
    assert [f.path for f in web.files] == ["/var/log/api/api.log"] and "tail_log" not in web.frozen
    assert set(web.frozen) == {"disk_usage", "largest_files", "logrotate_config"}
    turns = scenario.reference["turns"]
    [tail] = [c for t in turns for c in t.get("tool_calls", []) if c["name"] == "tail_log"]
    assert tail["arguments"]["path"] == "${web-03.log_dir}/api/api.log"
    # tail_log's output became the file it read; the other read-only outputs are frozen
    web = scenario.fleet.targets["web-03"]
    assert [f.path for f in web.files] == ["/var/log/api/api.log"] and "tail_log" not in web.frozen
    assert set(web.frozen) == {"disk_usage", "largest_files", "logrotate_config"}
    [tail] = [
        c for t in scenario.reference["turns"] for c in t.get("tool_calls", []) if c["name"] == "tail_log"
    ]
    assert tail["arguments"]["path"] == "${web-03.log_dir}/api/api.log"
    replayed: list[Message] = []

    def take(session: EvalSession, run_id: str) -> None:
        replayed.extend(history(session, run_id))

    outcome = run_scenario(scenario, tmp_path / "replay", redis_url=redis_url, before_teardown=take)
    assert outcome.score.scores() == {"rca": 1.0, "grounding": 1.0, "safety": 1.0}, outcome.score
    original = read_outputs(captured["history"])  # type: ignore[arg-type]
    again = read_outputs(replayed)
    assert [tool for tool, _ in again] == [tool for tool, _ in original]
    assert len(original) >= 5  # df twice (before and after the clean-up), largest-files, tail_log, a command
    for (tool, before), (_, after) in zip(original, again, strict=True):
        target_prefix = "[web-03] "
        assert after.startswith(target_prefix)
        if tool == "tail_log":  # the same lines; the heading names the new host's file, size and time
            assert after.split("\n")[1:] == before.split("\n")[1:]
            assert after.split("\n")[0].endswith(", last 5 lines:")
        else:  # the frozen output verbatim, after the one line the catalog adds
            unframed = FROZEN_HEADER.sub("", after.removeprefix(target_prefix))
            assert unframed == before.removeprefix(target_prefix), tool


def test_an_unconfirmed_capture_is_refused_with_the_file_and_what_to_fill_in(
    captured: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = captured["unconfirmed"]
    assert isinstance(path, Path)
    text = path.read_text()
    assert "UNCONFIRMED" in text and "unconfirmed:" in text
    with pytest.raises(ScenarioFileError) as refused:
        find_scenario(str(path))
    message = str(refused.value)
    assert (
        str(path) in message and "truth.unconfirmed" in message and "remove the unconfirmed: line" in message
    )
    assert harness(["run", "--scenario", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "truth.unconfirmed" in capsys.readouterr().err


def test_chatops_eval_capture_hands_its_options_and_settings_file_to_the_harness() -> None:
    args = build_parser().parse_args(
        ["--env-file", "/etc/chatops.env", "eval", "capture", "abc123", "--out", "x.yaml", "--confirm"]
    )
    command = capture_command(args)
    assert command[1:] == [
        "-m",
        "emulator.eval",
        "capture",
        "abc123",
        "--out",
        "x.yaml",
        "--confirm",
        "--env-file",
        "/etc/chatops.env",
    ]


def test_an_alert_started_run_is_captured_as_its_alert_and_replays(redis_url: str, tmp_path: Path) -> None:
    captured: list[Path] = []

    def take(session: EvalSession, run_id: str) -> None:
        captured.append(capture(settings_of(session), run_id, tmp_path / "from-alert.yaml", True))

    original = find_scenario("api-oom-alert-restart")
    assert original.start.alert is not None
    outcome = run_scenario(original, tmp_path / "original", redis_url=redis_url, before_teardown=take)
    assert outcome.score.passed
    scenario = find_scenario(str(captured[0]))
    assert scenario.start.mention is None and scenario.start.alert is not None
    assert "alert" in scenario.tags
    wanted = original.start.alert.labels
    assert {k: scenario.start.alert.labels.get(k) for k in wanted} == wanted  # as the root showed them
    replayed = run_scenario(scenario, tmp_path / "replay", redis_url=redis_url)
    assert replayed.score.scores()["rca"] == 1.0 and replayed.score.scores()["safety"] == 1.0, replayed.score
