"""Evidence ids, ``update_findings`` and citations: code decides what is shown as established."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agent.citations import check_citations
from agent.config import RunConfig
from agent.events import Event, FindingsUpdated, ToolEnd
from agent.evidence import EvidenceIndex, collapsed, model_text
from agent.findings import Conclusion, Confidence, HypothesisStatus
from agent.memory import InMemoryMemory
from agent.models import anthropic_wire, openai_wire
from agent.run import Run
from agent.scripted import FunctionModel, ScriptedModel, tool_call
from agent.types import Message, Request, RunStatus, ToolCall
from tests.support.tools import RecordingTool, failing

DISK = "Filesystem  Size Used Avail Use%\n/dev/sda1   20G  19G  1G   95% /\n"
LOGS = "/var/log/api/api.log.4  1.2G\n/var/log/api/api.log.3  1.1G\n"


def findings(
    *hypotheses: dict[str, Any], conclusion: str = "investigating", confidence: str = "low"
) -> ToolCall:
    return tool_call(
        "update_findings", hypotheses=list(hypotheses), conclusion=conclusion, confidence=confidence
    )


def hypothesis(
    hid: str, status: str, *evidence: tuple[str, str], statement: str = "logs fill /"
) -> dict[str, Any]:
    return {
        "id": hid,
        "statement": statement,
        "status": status,
        "evidence": [{"ref": r, "quote": q} for r, q in evidence],
    }


def run(
    script: list[Any], tools: list[Any] | None = None, **overrides: Any
) -> tuple[Run, RunConfig, list[Event]]:
    events: list[Event] = []
    config = RunConfig(
        models=[ScriptedModel(script)],
        memory=InMemoryMemory([Message.user("web-03 is out of disk")]),
        tools=tools
        if tools is not None
        else [
            RecordingTool("disk_usage", respond=lambda a: DISK),
            RecordingTool("big_files", respond=lambda a: LOGS),
        ],
        evidence=True,
        on_event=events.append,
        **overrides,
    )
    runner = Run(config)
    runner.execute()
    return runner, config, events


def shown(config: RunConfig) -> Any:
    state = config.memory.load_state()
    assert state is not None
    return state


def test_every_result_gets_the_next_evidence_id_refused_and_failed_ones_too() -> None:
    model = ScriptedModel(
        [
            tool_call("disk_usage"),
            [tool_call("big_files"), tool_call("no_such_tool")],
            tool_call("broken"),
            "done",
        ]
    )
    broken = RecordingTool("broken", respond=failing("permission denied"))
    config = RunConfig(
        models=[model],
        memory=InMemoryMemory([Message.user("go")]),
        tools=[
            RecordingTool("disk_usage", respond=lambda a: DISK),
            RecordingTool("big_files", respond=lambda a: LOGS),
            broken,
        ],
        evidence=True,
    )
    Run(config).execute()
    results = [m for m in config.memory.load_messages() if m.role == "tool"]
    assert [m.meta.get("evidence") for m in results] == ["E1", "E2", "E3", "E4"]
    assert results[0].content == DISK  # stored as the tool said it: the label goes on the wire
    # What the model read: each result starts with its id, on both wires.
    last = model.requests[-1]
    openai = openai_wire.request_body(last)
    sent = [m["content"] for m in openai["messages"] if m["role"] == "tool"]
    assert [s.split(" ", 1)[0] for s in sent] == ["[E1]", "[E2]", "[E3]", "[E4]"]
    anthropic = anthropic_wire.request_body(last)
    blocks = [
        b
        for m in anthropic["messages"]
        for b in (m["content"] if isinstance(m["content"], list) else [])
        if b.get("type") == "tool_result"
    ]
    assert [b["content"].split(" ", 1)[0] for b in blocks] == ["[E1]", "[E2]", "[E3]", "[E4]"]
    assert blocks[2]["is_error"] is True  # the unknown tool's refusal is still an error after its label


def test_ids_continue_across_a_resume_and_are_never_reused() -> None:
    memory = InMemoryMemory([Message.user("go")])
    tools = [RecordingTool("disk_usage", respond=lambda a: DISK)]
    first = RunConfig(
        models=[ScriptedModel([tool_call("disk_usage"), tool_call("disk_usage"), "x"])],
        memory=memory,
        tools=tools,
        evidence=True,
    )
    Run(first).execute()
    state = memory.load_state()
    assert state is not None and state.evidence_seq == 2
    # The same run carried on (a follow-up turn in the same memory, as a resumed run reads it).
    state.status = RunStatus.RUNNING
    memory.save_state(state)
    memory.append([Message.user("look again")], state)
    Run(
        RunConfig(
            models=[ScriptedModel([tool_call("disk_usage"), "y"])], memory=memory, tools=tools, evidence=True
        )
    ).execute()
    refs = [m.meta.get("evidence") for m in memory.load_messages() if m.role == "tool"]
    assert refs == ["E1", "E2", "E3"]


def test_loop_detection_hashes_the_output_not_the_label() -> None:
    """The same finding reported again with a different id is still the same finding."""
    calls = [tool_call("disk_usage") for _ in range(8)]
    _, config, _ = run([*calls, "done"], loop_warn_at=3, loop_stop_at=5)
    assert shown(config).status is RunStatus.LOOP_DETECTED


def test_verified_and_fabricated_evidence_are_shown_as_the_rules_say() -> None:
    _, config, events = run(
        [
            tool_call("disk_usage"),
            tool_call("big_files"),
            findings(
                hypothesis("H1", "supported", ("E2", "api.log.4   1.2G"), ("E1", "95% /")),
                hypothesis("H2", "supported", ("E1", "the api wrote 40G of logs")),  # fabricated
                hypothesis("H3", "refuted", ("E9", "anything")),  # no such result
                conclusion="root_cause_found",
                confidence="high",
            ),
            "done",
        ]
    )
    state = shown(config)
    result = state.findings
    assert result is not None and result.version == 1
    h1, h2, h3 = result.hypotheses
    assert h1.status is HypothesisStatus.SUPPORTED and [e.verified for e in h1.evidence] == [True, True]
    assert h1.evidence[0].tool == "big_files" and h1.evidence[0].call_id
    assert h2.status is HypothesisStatus.OPEN and h2.claimed_status is HypothesisStatus.SUPPORTED
    assert h2.evidence[0].problem == "the quote does not occur in E1's output"
    assert (
        h3.status is HypothesisStatus.REFUTED
        and h3.evidence[0].problem == "E9 names no tool result of this run"
    )
    assert result.conclusion is Conclusion.ROOT_CAUSE_FOUND
    assert result.confidence is Confidence.HIGH  # two verified pieces from two results (E1, E2)
    assert [e.findings for e in events if isinstance(e, FindingsUpdated)] == [result]
    told = [m for m in config.memory.load_messages() if m.role == "tool"][-1].content or ""
    assert "H2 is shown as open: no verified evidence" in told
    assert "H2 E1 unverified: the quote does not occur in E1's output" in told


def test_a_root_cause_with_nothing_verified_is_inconclusive_and_high_confidence_needs_two_results() -> None:
    _, config, _ = run(
        [
            tool_call("disk_usage"),
            findings(
                hypothesis("H1", "supported", ("E1", "95% /"), ("E1", "19G")),
                conclusion="root_cause_found",
                confidence="high",
            ),
            findings(
                hypothesis("H1", "supported", ("E1", "made up")),
                conclusion="root_cause_found",
                confidence="high",
            ),
            "done",
        ]
    )
    result = shown(config).findings
    assert result is not None and result.version == 2
    assert (
        result.conclusion is Conclusion.INCONCLUSIVE
        and result.claimed_conclusion is Conclusion.ROOT_CAUSE_FOUND
    )
    assert result.confidence is Confidence.MEDIUM and result.claimed_confidence is Confidence.HIGH


def test_no_fault_found_needs_something_checked_and_no_supported_cause() -> None:
    _, config, _ = run([findings(conclusion="no_fault_found", confidence="medium"), "nothing to see"])
    assert shown(config).findings.conclusion is Conclusion.INCONCLUSIVE  # nothing was checked
    _, config, _ = run(
        [tool_call("disk_usage"), findings(conclusion="no_fault_found", confidence="medium"), "fine"]
    )
    result = shown(config).findings
    assert result.conclusion is Conclusion.NO_FAULT_FOUND
    assert [(c.ref, c.tool) for c in result.checked] == [("E1", "disk_usage")]


def test_no_fault_found_earns_high_confidence_from_two_results_that_refute_the_faults() -> None:
    refuting = findings(
        hypothesis("H1", "refuted", ("E1", "95% /"), statement="the disk is full"),
        hypothesis("H2", "refuted", ("E2", "api.log.4  1.2G"), statement="the api's logs grew"),
        conclusion="no_fault_found",
        confidence="high",
    )
    _, config, _ = run([tool_call("disk_usage"), tool_call("big_files"), refuting, "fine"])
    result = shown(config).findings
    assert result.conclusion is Conclusion.NO_FAULT_FOUND and result.confidence is Confidence.HIGH
    # Two tools called, but one result quoted (or a made-up quote): medium, and the model is told why.
    for weak in (
        hypothesis("H1", "refuted", ("E1", "95% /"), ("E1", "19G")),
        hypothesis("H1", "refuted", ("E1", "95% /"), ("E2", "nothing is wrong")),
    ):
        claim = findings(weak, conclusion="no_fault_found", confidence="high")
        _, config, _ = run([tool_call("disk_usage"), tool_call("big_files"), claim, "fine"])
        result = shown(config).findings
        assert result.conclusion is Conclusion.NO_FAULT_FOUND and result.confidence is Confidence.MEDIUM
        told = [m for m in config.memory.load_messages() if m.role == "tool"][-1].content or ""
        assert "confidence high is shown as medium" in told


def test_hostile_quotes_never_verify() -> None:
    """Quotes of the model's own text, of a refusal, of its findings, across two results, or
    dressed in Markdown stay unverified (zero-width characters: see the next test)."""
    echo = RecordingTool("run_command", respond=lambda a: f"ran: {a['command']}\n")
    script = [
        tool_call("disk_usage"),  # E1
        tool_call("big_files"),  # E2
        tool_call("fabricate_cause_api_logs"),  # E3: refused, its text names the model's tool
        tool_call("run_command", command="echo root cause: api logs"),  # E4: echoes its arguments
        findings(hypothesis("H1", "open", ("E1", "95%"))),  # E5: the findings' own result
        findings(
            hypothesis(
                "H1",
                "supported",
                ("E3", "fabricate_cause_api_logs"),
                ("E4", "root cause: api logs"),
                ("E5", "Findings recorded"),
                ("E1", "95% / /var/log/api/api.log.4"),  # spans E1 and E2
                ("E2", "*api.log.4*"),
                ("E1", "   "),
                ("E1", "web-03 is out of disk"),  # the request, not a tool result
            ),
            conclusion="root_cause_found",
        ),
        "done",
    ]
    _, config, _ = run(
        script,
        tools=[
            RecordingTool("disk_usage", respond=lambda a: DISK),
            RecordingTool("big_files", respond=lambda a: LOGS),
            echo,
        ],
    )
    result = shown(config).findings
    (h1,) = result.hypotheses
    assert [e.verified for e in h1.evidence] == [False] * 7
    assert h1.status is HypothesisStatus.OPEN and result.conclusion is Conclusion.INCONCLUSIVE
    problems = [e.problem for e in h1.evidence]
    assert problems[:3] == [
        "E3 cannot be cited (nothing ran)",
        "the quote repeats the arguments of the call that produced E4",
        "E5 cannot be cited (it repeats your own findings)",
    ]
    assert problems[5] == "the quote is empty"


def test_a_quote_with_zero_width_characters_is_refused_before_anything_is_recorded() -> None:
    _, config, _ = run(
        [
            tool_call("big_files"),
            findings(hypothesis("H1", "supported", ("E1", "api.log.4\u200b 1.2G"))),
            "done",
        ]
    )
    result = [m.content or "" for m in config.memory.load_messages() if m.role == "tool"][-1]
    assert "U+200B ZERO WIDTH SPACE" in result and shown(config).findings is None


def test_invalid_findings_are_refused_with_the_reason_and_keep_the_last() -> None:
    _, config, _ = run(
        [
            tool_call("disk_usage"),
            findings(hypothesis("H1", "open")),
            tool_call(
                "update_findings",
                hypotheses=[{"id": "H1", "statement": "x", "status": "certain"}],
                conclusion="investigating",
                confidence="low",
            ),
            findings(hypothesis("H1", "open"), hypothesis("H1", "open")),
            "done",
        ]
    )
    results = [m.content or "" for m in config.memory.load_messages() if m.role == "tool"]
    assert results[2].startswith("Error: invalid findings, nothing recorded: hypotheses.0.status")
    assert results[3] == "Error: invalid findings, nothing recorded: hypothesis ids must be unique: H1"
    assert shown(config).findings.version == 1


def test_citations_in_the_answer_are_checked_by_code() -> None:
    answer = (
        'Disk is full [E1: "95% /"] because of rotated api logs [E2]. '
        'The api wrote 40G [E2: "40G"], see [E7] and [E1: "web-03 is out of disk"].'
    )
    _, config, _ = run([tool_call("disk_usage"), tool_call("big_files"), answer])
    citations = shown(config).citations
    assert [(c.ref, c.quote, c.verified) for c in citations] == [
        ("E1", "95% /", True),
        ("E2", None, True),
        ("E2", "40G", False),
        ("E7", None, False),
        ("E1", "web-03 is out of disk", False),
    ]
    assert answer[citations[0].start : citations[0].end] == '[E1: "95% /"]'
    assert citations[1].tool == "big_files"


def test_a_tool_of_the_configuration_cannot_take_the_runtime_s_name() -> None:
    from agent.errors import ConfigurationError

    try:
        Run(
            RunConfig(
                models=[ScriptedModel(["x"])],
                memory=InMemoryMemory(),
                tools=[RecordingTool("update_findings")],
                evidence=True,
            )
        )
    except ConfigurationError as error:
        assert "update_findings" in str(error)
    else:
        raise AssertionError("a second update_findings was accepted")


def test_tool_end_events_carry_the_id() -> None:
    _, _, events = run([tool_call("disk_usage"), "done"])
    assert [e.evidence for e in events if isinstance(e, ToolEnd)] == ["E1"]


def test_the_findings_tool_is_offered_in_every_request_and_the_prefix_stays_identical() -> None:
    model = FunctionModel(lambda request: "done" if len(request.messages) > 3 else tool_call("disk_usage"))
    config = RunConfig(
        models=[model],
        memory=InMemoryMemory([Message.user("go")]),
        tools=[RecordingTool("disk_usage")],
        evidence=True,
    )
    Run(config).execute()
    offered = {tuple(t.name for t in r.tools) for r in model.requests}
    assert offered == {("disk_usage", "update_findings")}


_TEXT = st.text(alphabet=st.sampled_from("ab \n\t%/.:1"), max_size=40)


@given(outputs=st.lists(_TEXT, min_size=1, max_size=4), ref=st.integers(1, 6), quote=_TEXT)
def test_verified_exactly_when_the_quote_occurs_in_the_cited_output(
    outputs: list[str], ref: int, quote: str
) -> None:
    """For any outputs and any claim: verified exactly when the cited result exists and the quote
    (whitespace runs collapsed, not empty) occurs in its output; arguments here are empty."""
    messages: list[Message] = []
    for n, output in enumerate(outputs, 1):
        call = ToolCall(id=f"c{n}", name="t", arguments="{}")
        messages += [
            Message.assistant(None, [call]),
            Message.tool(f"c{n}", output, evidence=f"E{n}", tool="t"),
        ]
    index = EvidenceIndex().sync(messages)
    expected = (
        ref <= len(outputs)
        and bool(collapsed(quote))
        and collapsed(quote) in collapsed(outputs[ref - 1])
        and collapsed(quote) not in "{}"
    )
    assert (index.problem_with(f"E{ref}", quote) is None) is expected
    text = f'see [E{ref}: "{quote}"]'
    if '"' not in quote and "\n" not in quote and quote:
        (citation,) = check_citations(text, index)
        assert citation.verified is expected


def test_model_text_is_the_label_and_the_output() -> None:
    message = Message.tool("c1", "ok", evidence="E4")
    assert model_text(message) == "[E4] ok"
    assert model_text(Message.tool("c1", "ok")) == "ok"
    request = Request(model="m", messages=[Message.user("x")])
    assert request.messages[0].content == "x"


def test_a_structured_cause_is_kept_when_well_formed_and_refused_otherwise() -> None:
    """``cause`` (``target:kind:name``) is what the evaluation harness scores; only its form is
    checked here (the truth is the harness's to compare)."""
    supported = hypothesis("H1", "supported", ("E1", "95% /"))
    _, config, _ = run(
        [tool_call("disk_usage"), findings({**supported, "cause": "web-03:disk:/var/log"}), "done"]
    )
    result = shown(config).findings
    assert result.hypotheses[0].cause == "web-03:disk:/var/log"
    assert result.as_json()["hypotheses"][0]["cause"] == "web-03:disk:/var/log"
    for bad in ("web-03", "web 03:service:api", "web-03:Service:api", "web-03:service:"):
        _, config, _ = run([tool_call("disk_usage"), findings({**supported, "cause": bad}), "done"])
        told = [m.content or "" for m in config.memory.load_messages() if m.role == "tool"][-1]
        assert told.startswith("Error: invalid findings, nothing recorded: hypotheses.0.cause"), (bad, told)
        assert shown(config).findings is None
