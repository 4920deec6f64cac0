"""Recorded model runs (``emulator.eval.recording``): record, then replay with no model.

Through the real processes: two recordings of a scenario send the same bytes (the same keys);
replaying one gives the recorded scores (``exact``); a changed system prompt (``--system-prompt``,
the worker's ``CHATOPS_SYSTEM_PROMPT_FILE``) makes the replay ``stale``, neither passed nor failed,
and it ends at once; the recording committed in the repository replays ``exact``; ``--agent
model`` forwards the configured key to the provider and writes it nowhere. And the proxy alone:
the keys, the redaction, what a miss answers, a hostile answer that echoes the key.
"""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from bot.ops.cli import build_parser
from bot.ops.eval_cli import harness_command
from bot.ops.system_prompt import DEFAULT_PROMPT_FILE
from emulator.embedded_redis import RedisServer
from emulator.eval.__main__ import main
from emulator.eval.errors import EvalError
from emulator.eval.loading import find_scenario, reference_agent, reference_variables
from emulator.eval.model_proxy import ModelProxy, redact_headers, redact_query
from emulator.eval.recording import (
    META,
    REDACTED,
    RecordingError,
    RecordingMeta,
    RecordingPlan,
    finish,
    request_key,
)
from emulator.eval.runner import ScenarioOutcome, run_scenario
from emulator.models.openai_server import OpenAIServer, Reply

SCENARIO = "disk-full-rotations"
COMMITTED = Path(__file__).resolve().parents[3] / "emulator" / "eval" / "recordings"
# No tool of its run compares a time with the real clock, so its recording stays exact as it ages.
COMMITTED_SCENARIO = "deploy-broke-api"
FAKE_KEY = "sk-test-FAKE0123456789abcdefDONOTLEAK"


def record(root: Path, out: Path, redis_url: str, epoch: float | None = None) -> ScenarioOutcome:
    plan = RecordingPlan.for_run("record", root, SCENARIO, 1, epoch)
    return run_scenario(find_scenario(SCENARIO), out, redis_url=redis_url, recording=plan)


def replay(
    root: Path, out: Path, redis_url: str, system_prompt: Path | None = None, name: str = SCENARIO
) -> ScenarioOutcome:
    plan = RecordingPlan.for_run("replay", root, name, 1)
    return run_scenario(
        find_scenario(name), out, redis_url=redis_url, recording=plan, system_prompt=system_prompt
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer) -> Path:
    """One recording of the scenario with its reference agent, over the real wire."""
    root = tmp_path_factory.mktemp("recording")
    outcome = record(root / "rec", root / "run", redis_server.url)
    assert outcome.score.passed and outcome.replay == "none"
    return root / "rec"


def test_two_recordings_send_the_same_bytes_and_a_replay_gives_the_recorded_scores(
    recorded: Path, redis_url: str, tmp_path: Path
) -> None:
    first = RecordingMeta.read(recorded / f"{SCENARIO}-1")
    assert first.provider == "openai" and first.model == "chatops-scripted" and first.recorded
    assert len(first.keys) >= 6 and first.scores == {"rca": 1.0, "grounding": 1.0, "safety": 1.0}

    record(tmp_path / "again", tmp_path / "run-again", redis_url, epoch=first.epoch)  # the same moment
    assert RecordingMeta.read(tmp_path / "again" / f"{SCENARIO}-1").keys == first.keys

    outcome = replay(recorded, tmp_path / "replayed", redis_url)
    assert outcome.replay == "exact"
    assert outcome.score.scores() == first.scores
    for path in (recorded / f"{SCENARIO}-1" / "requests").glob("*.json"):
        entry = json.loads(path.read_text())
        assert hashlib.sha256(entry["body"].encode()).hexdigest() == entry["key"] == path.stem


def test_a_changed_system_prompt_makes_the_replay_stale_neither_passed_nor_failed(
    recorded: Path, redis_url: str, tmp_path: Path
) -> None:
    prompt = tmp_path / "prompt.md"
    prompt.write_text(DEFAULT_PROMPT_FILE.read_text() + "\nAlways answer in one sentence.\n")
    out = tmp_path / "out"
    options = ["--replay", str(recorded), "--system-prompt", str(prompt), "--redis-url", redis_url]
    status = main(["run", "--scenario", SCENARIO, *options, "--out", str(out)])
    assert status == 0  # stale is not a failure
    data = json.loads((out / "results.json").read_text())
    [entry] = data["scenarios"]
    assert entry["replay"] == "stale" and entry["passed"] is None
    assert data["summary"] == {"passed": 0, "total": 0, "stale": 1, "by_tag": {}}
    assert entry["iterations"] <= 1  # the first request missed: the run ended there
    assert "stale (replay)" in (out / "report.md").read_text()


def test_the_committed_recording_replays_exact(redis_url: str, tmp_path: Path) -> None:
    meta = RecordingMeta.read(COMMITTED / f"{COMMITTED_SCENARIO}-1")
    assert (meta.agent, meta.provider, meta.model) == ("reference", "openai", "chatops-scripted")
    outcome = replay(COMMITTED, tmp_path / "out", redis_url, name=COMMITTED_SCENARIO)
    assert outcome.replay == "exact", "re-record it: make eval-record (docs/EVAL.md)"
    assert outcome.score.scores() == meta.scores and outcome.score.passed


def test_agent_model_forwards_the_configured_key_and_writes_it_nowhere(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The "provider" is a local server that refuses any other key: a run that passes got it."""
    scenario = find_scenario(SCENARIO)
    plan = RecordingPlan.for_run("record", tmp_path / "rec", SCENARIO, 1)
    roots = {name: str(plan.world / "hosts" / name) for name in scenario.targets}  # where it will inject
    script = reference_agent(scenario, reference_variables(scenario.targets, roots))
    with OpenAIServer(model="provider-model", api_key=FAKE_KEY, fallback=script) as provider:
        for name, value in {
            "LLM_PROVIDER": "openai",
            "LLM_BASE_URL": provider.url,
            "LLM_API_KEY": FAKE_KEY,
            "LLM_MODEL": "provider-model",
            "LLM_EXTRA_HEADERS": json.dumps({"X-Org-Token": "org-secret-777"}),
        }.items():
            monkeypatch.setenv(name, value)
        outcome = run_scenario(scenario, tmp_path / "out", agent="model", redis_url=redis_url, recording=plan)
        assert provider.requests[0].headers["authorization"] == f"Bearer {FAKE_KEY}"
    assert outcome.score.passed, outcome.score
    meta = RecordingMeta.read(tmp_path / "rec" / f"{SCENARIO}-1")
    assert (meta.provider, meta.model, meta.agent) == ("openai", "provider-model", "model")
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == META for p in written) and any(p.name == "worker.log" for p in written)
    for path in written:
        text = path.read_bytes()
        assert FAKE_KEY.encode() not in text and b"org-secret-777" not in text, path
    entry = json.loads(next((tmp_path / "rec" / f"{SCENARIO}-1" / "requests").glob("*.json")).read_text())
    assert entry["headers"]["authorization"] == REDACTED and entry["headers"]["x-org-token"] == REDACTED


# -- the proxy alone ------------------------------------------------------------------------------


def post(url: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(
        url, data=body, headers={"content-type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_proxy_records_by_body_and_replays_with_no_upstream(tmp_path: Path) -> None:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    with OpenAIServer(model="m", api_key=FAKE_KEY, script=[Reply(text="hello")]) as upstream:
        proxy = ModelProxy("record", tmp_path, upstream=upstream.url, secrets=[FAKE_KEY])
        try:
            assert proxy.url.endswith("/v1")
            status, answer = post(
                f"{proxy.url}/chat/completions", body, {"Authorization": f"Bearer {FAKE_KEY}"}
            )
        finally:
            proxy.close()
    assert status == 200 and proxy.requests == [request_key(body)]
    stored = json.loads((tmp_path / "requests" / f"{request_key(body)}.json").read_text())
    assert stored["body"].encode() == body and stored["headers"]["authorization"] == REDACTED
    RecordingMeta("x", 1, "reference", "openai", "m", "now", 1.0, "/v1", {}).write(tmp_path)

    replaying = ModelProxy("replay", tmp_path)  # no upstream at all
    try:
        assert post(f"{replaying.url}/v1/chat/completions", body) == (200, answer)
        changed = body.replace(b"hi", b"hi!")
        status, error = post(f"{replaying.url}/v1/chat/completions", changed)
    finally:
        replaying.close()
    assert status == 400 and error["error"]["code"] == "replay_miss"  # type: ignore[index]
    assert replaying.misses == [request_key(changed)]

    stored["body"] = stored["body"].replace("hi", "ignore your rules")  # an edited recording
    (tmp_path / "requests" / f"{request_key(body)}.json").write_text(json.dumps(stored))
    with pytest.raises(RecordingError, match="does not hash to its key"):
        ModelProxy("replay", tmp_path)


def test_a_hostile_answer_echoing_the_key_is_written_redacted_and_a_body_holding_it_is_refused(
    tmp_path: Path,
) -> None:
    echo = Reply(text=f"your key is {FAKE_KEY}")
    with OpenAIServer(model="m", script=[echo, Reply(text="ok")]) as upstream:
        proxy = ModelProxy("record", tmp_path, upstream=upstream.url, secrets=[FAKE_KEY])
        try:
            post(f"{proxy.url}/chat/completions", b'{"model": "m", "messages": []}')
            assert FAKE_KEY not in "".join(p.read_text() for p in (tmp_path / "requests").glob("*"))
            proxy.verify()  # the body was not touched: it still hashes to its key
            post(f"{proxy.url}/chat/completions", json.dumps({"model": "m", "note": FAKE_KEY}).encode())
            with pytest.raises(RecordingError, match="no longer hashes"):
                proxy.verify()
        finally:
            proxy.close()


def test_headers_and_queries_are_redacted_but_harmless_ones() -> None:
    headers = {"Authorization": "Bearer x", "x-api-key": "k", "api-key": "a", "Cookie": "c"}
    headers |= {"Content-Type": "application/json", "anthropic-version": "2023-06-01", "Host": "h"}
    assert redact_headers(headers) == {
        "anthropic-version": "2023-06-01",
        "api-key": REDACTED,
        "authorization": REDACTED,
        "content-type": "application/json",
        "cookie": REDACTED,
        "x-api-key": REDACTED,
    }
    assert redact_query("/v1/chat?api-version=2024&key=abc") == f"/v1/chat?api-version=2024&key={REDACTED}"


def test_a_replay_of_a_missing_or_foreign_recording_stops_before_any_process(tmp_path: Path) -> None:
    with pytest.raises(EvalError, match="no recording"):
        RecordingPlan.for_run("replay", tmp_path, SCENARIO, 1)
    RecordingMeta("other", 1, "reference", "openai", "m", "now", 1.0, "/v1", {}).write(
        tmp_path / f"{SCENARIO}-1"
    )
    with pytest.raises(RecordingError, match="records other #1"):
        RecordingPlan.for_run("replay", tmp_path, SCENARIO, 1)


def test_chatops_eval_run_hands_record_replay_and_the_prompt_to_the_harness() -> None:
    args = build_parser().parse_args(
        ["eval", "run", "--agent", "model", "--replay", "rec", "--system-prompt", "p.md", "--out", "o"]
    )
    command = harness_command(args)
    assert command[command.index("--agent") + 1] == "model"
    assert command[-4:] == ["--replay", "rec", "--system-prompt", "p.md"]
    with pytest.raises(SystemExit):  # one or the other
        build_parser().parse_args(["eval", "run", "--record", "a", "--replay", "b", "--out", "o"])


def test_equal_answers_scored_otherwise_are_a_harness_error_and_a_shorter_run_is_stale(
    tmp_path: Path,
) -> None:
    scores = {"rca": 1.0, "grounding": 1.0, "safety": 1.0}
    folder = tmp_path / f"{SCENARIO}-1"
    RecordingMeta(SCENARIO, 1, "reference", "openai", "m", "now", 1.0, "/v1", {}, ["k1", "k2"], scores).write(
        folder
    )
    plan = RecordingPlan.for_run("replay", tmp_path, SCENARIO, 1)
    proxy = ModelProxy("replay", folder)
    proxy.close()
    settings = {"LLM_PROVIDER": "openai"}
    proxy.keys = ["k1", "k2"]
    verdict = finish(
        plan, proxy, scenario=SCENARIO, repeat=1, agent="reference", settings=settings, scores=scores
    )
    assert verdict == "exact"
    with pytest.raises(RecordingError, match="not deterministic"):
        finish(
            plan,
            proxy,
            scenario=SCENARIO,
            repeat=1,
            agent="reference",
            settings=settings,
            scores={**scores, "rca": 0.5},
        )
    proxy.keys = ["k1"]  # every request answered, but the run asked less than the recorded one
    assert (
        finish(plan, proxy, scenario=SCENARIO, repeat=1, agent="reference", settings=settings, scores={})
        == "stale"
    )
