"""Attacker tests for ``chatops eval capture``: tool output, model text and findings written by a
hostile log or model (YAML-breaking text, the scenario language's ``{time:...}`` and ``${...}``,
braces, secrets the bot should have redacted) load back from the captured file as literal text,
and no secret of the bot's settings is ever written."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from agent.findings import Conclusion, Confidence, Evidence, Findings, Hypothesis, HypothesisStatus
from agent.types import Message, ToolCall
from bot.observability.logs import redactor_for
from bot.settings import Settings
from emulator.eval.capture import check_written, render
from emulator.eval.capture_build import CapturedAlert, CapturedRun, CaptureError, scenario_data
from emulator.eval.capture_logs import TailCall, invert_tail_logs
from emulator.eval.errors import ScenarioFileError
from emulator.eval.fixed_output import frozen_main
from emulator.eval.fleet import TargetState
from emulator.eval.injector import frozen_tools, inject, write_file, write_frozen_outputs
from emulator.eval.loading import parse_eval_scenario, reference_agent, reference_variables

RUNNER_SECRET = "rs-9f8e7d6c5b4a39281706"
HOSTILE = "\n".join(
    [
        "key: value",
        "- item: [unclosed",
        "{time:5m} {time:1h:iso} {{time:2m}} ${web-03.log_dir} ${HOME} $$ {0} {quote[x]} }{",
        "'\"\\ # not a comment &anchor *alias !!python/object:os.system ---",
        "%YAML 1.1 ... \t tab",
        f"the runner secret {RUNNER_SECRET} leaked here",
    ]
)


def _call(call_id: str, name: str, arguments: dict[str, object]) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=json.dumps(arguments))


def hostile_run() -> CapturedRun:
    statement = "api is down: ${x} {time:1m} [E1] $1 (.*)"
    history = [
        Message.system("system prompt"),
        Message.user("web-03 {time:5m} ${web-03.log_dir} is broken, 'quote' \"dq\": [x]"),
        Message.assistant(
            "looking {at} ${this} $$",
            [_call("c1", "tail_log", {"target": "web-03", "path": "/var/log/${evil}/{time:1m}", "lines": 5})],
        ),
        Message.tool(
            "c1", f"[web-03] {HOSTILE}", tool="tail_log", target="web-03", category="read_only", evidence="E1"
        ),
        Message.user("a reply {time:2m} ${y}"),
        Message.assistant(
            None,
            [
                _call(
                    "c2",
                    "update_findings",
                    {
                        "conclusion": "root_cause_found",
                        "confidence": "medium",
                        "hypotheses": [
                            {
                                "id": "H1",
                                "statement": statement,
                                "status": "supported",
                                "evidence": [{"ref": "E1", "quote": "{time:5m} {time:1h:iso}"}],
                            }
                        ],
                    },
                )
            ],
        ),
        Message.tool("c2", "Findings recorded.", tool="update_findings", category="read_only", evidence="E2"),
        Message.assistant("done {E1} ${z} }} {{"),
    ]
    evidence = Evidence(
        ref="E1", quote="{time:5m} {time:1h:iso}", verified=True, tool="tail_log", target="web-03"
    )
    findings = Findings(
        conclusion=Conclusion.ROOT_CAUSE_FOUND,
        claimed_conclusion=Conclusion.ROOT_CAUSE_FOUND,
        confidence=Confidence.MEDIUM,
        claimed_confidence=Confidence.MEDIUM,
        hypotheses=(
            Hypothesis(
                id="H1",
                statement=statement,
                status=HypothesisStatus.SUPPORTED,
                claimed_status=HypothesisStatus.SUPPORTED,
                evidence=(evidence,),
            ),
        ),
    )
    return CapturedRun(run_id="f" * 32, history=history, findings=findings)


def settings() -> Settings:
    return Settings(_env_file=None, chatops_runner_secret=RUNNER_SECRET)  # type: ignore[call-arg]


def test_hostile_text_loads_back_literally_and_secrets_stay_out(tmp_path: Path) -> None:
    redact = redactor_for(settings()).redact
    text = render(scenario_data(hostile_run(), "hostile", True, redact))
    check_written(text, "hostile.yaml", [RUNNER_SECRET])
    assert RUNNER_SECRET not in text
    scenario = parse_eval_scenario(yaml.safe_load(text), "hostile.yaml")

    # the frozen output is what the tool printed (redacted), byte for byte, on the injected host
    expected = redact(HOSTILE)
    [frozen] = scenario.fleet.targets["web-03"].frozen["tail_log"]
    assert frozen.output == expected and "{time:5m}" in expected and RUNNER_SECRET not in expected
    hosts = inject(scenario, tmp_path, now=1_800_000_000.0)
    run = frozen_tools(scenario.fleet)["tail_log"]["run"]
    argv = [part.format(path="/var/log/${evil}/{time:1m}", lines="5") for part in run[1:]]
    assert argv == ["tail_log", "path=/var/log/${evil}/{time:1m}", "lines=5"]
    printed = tmp_path / "printed"
    with printed.open("w") as out, pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdout", out)
        assert frozen_main(argv, str(hosts["web-03"].root)) == 0
    assert printed.read_text() == expected + "\n"

    # the reference replays the texts and arguments as the model wrote them, variables not expanded
    agent = reference_agent(scenario, reference_variables(scenario.targets))
    first = agent({"messages": [{"role": "user", "content": "x"}]})
    assert first.text == "looking {at} ${this} $$"
    assert first.tool_calls[0].arguments["path"] == "/var/log/${evil}/{time:1m}"
    assert scenario.start.mention == "web-03 {time:5m} ${web-03.log_dir} is broken, 'quote' \"dq\": [x]"
    assert scenario.replies[0].text == "a reply {time:2m} ${y}"
    assert scenario.reference["turns"][-1]["text"] == "done {{E1}} $${{z}} }}}} {{{{"

    # the truth names the statement literally (regex characters escaped) and quotes the fact as text
    [cause] = scenario.truth.root_causes
    from emulator.eval.truth import pattern

    assert pattern(cause.match[0]).search("api is down: ${x} {time:1m} [E1] $1 (.*)")
    assert not pattern(cause.match[0]).search("api is down: ${x} {time:1m} [E1] $1 (aa)")
    assert scenario.truth.facts[0].text == "{time:5m} {time:1h:iso}"


def test_an_alert_started_run_is_captured_as_the_alert_with_its_text_literal_and_redacted() -> None:
    redact = redactor_for(settings()).redact
    alert = CapturedAlert(
        labels={"instance": "web-03:9100", "severity": "critical", "team": "${x} {time:1m} <!channel>"},
        title="OrdersApiDown",
        summary=f"web-03 down, token={RUNNER_SECRET}",
    )
    run = dataclasses.replace(hostile_run(), alert=alert)
    text = render(scenario_data(run, "from-alert", True, redact))
    check_written(text, "from-alert.yaml", [RUNNER_SECRET])
    scenario = parse_eval_scenario(yaml.safe_load(text), "from-alert.yaml")
    assert scenario.start.mention is None and scenario.start.alert is not None
    labels = scenario.start.alert.labels
    assert labels["alertname"] == "OrdersApiDown"  # the group's title, when its labels had none
    assert labels["team"] == "${x} {time:1m} <!channel>" and labels["instance"] == "web-03:9100"
    summary = scenario.start.alert.annotations["summary"]
    assert summary.startswith("web-03 down") and RUNNER_SECRET not in summary


def test_a_secret_the_redactor_missed_stops_the_write() -> None:
    text = render(scenario_data(hostile_run(), "hostile", True, lambda value: value))
    with pytest.raises(CaptureError, match="secret"):
        check_written(text, "hostile.yaml", [RUNNER_SECRET])


def test_without_confirm_the_truth_is_marked_and_the_loader_refuses_it() -> None:
    text = render(scenario_data(hostile_run(), "hostile", False, redactor_for(settings()).redact))
    with pytest.raises(
        ScenarioFileError, match=r"hostile\.yaml: truth\.unconfirmed: captured from run f+ without --confirm"
    ):
        parse_eval_scenario(yaml.safe_load(text), "hostile.yaml")


def test_a_run_without_findings_has_no_truth_to_capture() -> None:
    run = hostile_run()
    bare = CapturedRun(run_id=run.run_id, history=run.history, findings=None)
    with pytest.raises(CaptureError, match="no findings"):
        scenario_data(bare, "bare", True, lambda value: value)


HEADING = "/var/log/api/api.log (1.2 MiB, modified 2026-12-03 19:21 UTC), last {n} lines:"


def tail(path: str, lines: list[str], asked: int = 5, **more: object) -> TailCall:
    heading = HEADING.replace("/var/log/api/api.log", path).format(n=len(lines))
    return TailCall("web-03", {"path": path, "lines": asked, **more}, "\n".join([heading, *lines]))


def test_tail_log_outputs_become_the_file_with_hostile_lines_literal(tmp_path: Path) -> None:
    lines = ["{time:5m} ERROR x", "{{time:1m}} ${web-03.log_dir} {0}", "plain"]
    logs = invert_tail_logs(
        [
            tail("/tmp/run/hosts/web-03/var/log/api/api.log", lines, asked=3),
            tail("/tmp/run/hosts/web-03/var/log/api/api.log", lines[1:], asked=2),
        ]
    )
    assert logs is not None
    assert logs.paths == {("web-03", "/tmp/run/hosts/web-03/var/log/api/api.log"): "/var/log/api/api.log"}
    written = logs.files["web-03"]["/var/log/api/api.log"]
    root = tmp_path / "host"
    write_file(root, "web-03", "/var/log/api/api.log", None, None, written, 1.0, 1_800_000_000.0)
    assert (root / "var/log/api/api.log").read_text().splitlines() == lines


@pytest.mark.parametrize(
    "calls",
    [
        [tail("/var/log/api/api.log", ["a"], filter="ERROR")],  # a filtered read says little of the file
        [tail("/srv/app/api.log", ["a"])],  # not a log folder the simulated host has
        [tail("/var/log/api/api.log", ["a", "b"]), tail("/var/log/api/api.log", ["a", "c"])],  # it changed
        [tail("/var/log/api/api.log", ["a"], asked=50), tail("/var/log/api/api.log", ["a", "b"])],  # it grew
        [TailCall("web-03", {"path": "/var/log/x.log"}, "/var/log/x.log (1 B, modified ...): no lines")],
    ],
)
def test_tail_log_outputs_that_cannot_be_inverted_stay_frozen(calls: list[TailCall]) -> None:
    assert invert_tail_logs(calls) is None


def test_a_structured_cause_is_the_truth_as_the_scorer_reads_it() -> None:
    run = hostile_run()
    assert run.findings is not None
    [h1] = run.findings.hypotheses
    both = (
        h1.model_copy(update={"cause": "DB-01:service:Postgresql.service"}),
        h1.model_copy(update={"id": "H2", "cause": "db-01:service:postgresql"}),
    )
    findings = run.findings.model_copy(update={"hypotheses": both})
    data = scenario_data(CapturedRun(run.run_id, run.history, findings), "caused", True, lambda value: value)
    assert data["truth"]["root_causes"] == [{"id": "db-01:service:postgresql"}]
    assert set(data["fleet"]["targets"]) == {"web-03", "db-01"}
    parse_eval_scenario(data, "caused.yaml")


def test_the_nth_call_with_the_same_arguments_reads_the_nth_frozen_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = TargetState.model_validate(
        {
            "frozen": {
                "disk_usage": [
                    {"arguments": {"path": "/var/log"}, "output": "94% before"},
                    {"arguments": {"path": "/"}, "output": "root"},
                    {"arguments": {"path": "/var/log"}, "output": "40% after"},
                ]
            }
        }
    )
    write_frozen_outputs(tmp_path, state)
    printed = []
    for argv in (
        ["disk_usage", "path=/var/log"],
        ["disk_usage", "path=/var/log"],
        ["disk_usage", "path=/var/log"],
    ):
        assert frozen_main(argv, str(tmp_path)) == 0
        printed.append(capsys.readouterr().out)
    assert printed == ["94% before\n", "40% after\n", "40% after\n"]
    assert frozen_main(["disk_usage", "path=/etc"], str(tmp_path)) == 127
    assert "no output was frozen for the arguments" in capsys.readouterr().err
    assert frozen_main(["memory"], str(tmp_path)) == 127
