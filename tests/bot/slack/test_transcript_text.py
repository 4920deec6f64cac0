"""The transcript as Slack reads it: summary and numbered steps, people as mentions, nothing hostile live."""

from __future__ import annotations

from bot.observability.transcript import ApprovalView, CallView, Step, Transcript
from bot.slack.rendering.transcript_text import MESSAGE_CHARS, transcript_messages, transcript_text

HOSTILE = "<!channel> <@U_CEO> *URGENT* <https://evil.example|runbook> @here ```x```"


def transcript(steps: list[Step]) -> Transcript:
    return Transcript(
        run_id="r" * 32,
        channel="C_INCIDENT",
        thread_ts="1.0",
        requester="U_ALICE",
        status="completed",
        created_at=1000.0,
        started_at=1000.0,
        finished_at=1010.0,
        iterations=2,
        steps=steps,
    )


def test_people_are_mentions_and_there_is_no_markdown_table() -> None:
    approval = ApprovalView(
        id="a1",
        call_id="c1",
        tool="service_restart",
        category="mutating",
        status="approved",
        requested_at=1001.0,
        decided_at=1002.0,
        decided_by="U_BOB",
    )
    call = CallView(
        id="c1",
        tool="service_restart",
        arguments='{"service": "api"}',
        category="mutating",
        outcome="ok",
        output="restarted",
        duration_seconds=1.5,
        finished_at=1003.0,
        approval=approval,
    )
    text = transcript_text(
        transcript(
            [
                Step(kind="request", text="restart the api", author="U_ALICE", at=1000.0),
                Step(kind="assistant", text="Restarting.", calls=[call]),
            ]
        )
    )
    assert "*Requested by* <@U_ALICE>" in text and "<#" not in text  # no channel link: it is its thread
    assert "· approved by <@U_BOB> → *ok*, 1.5s" in text
    assert "```restarted```" in text
    assert "|---|" not in text and "\n#" not in text


def test_a_thread_members_hostile_reply_and_tool_output_stay_inert() -> None:
    call = CallView(id="c1", tool="tail_log", arguments="{}", outcome="ok", output=HOSTILE)
    text = transcript_text(
        transcript(
            [
                Step(kind="reply", text=HOSTILE, author="U_MALLORY", at=1001.0),
                Step(kind="assistant", text=HOSTILE, calls=[call]),
            ]
        )
    )
    for live in ("<!channel>", "<@U_CEO>", "<https://evil"):
        assert live not in text
    assert "&lt;!channel&gt;" in text and "&lt;@U_CEO&gt;" in text
    assert "@here" not in text  # broken by a word joiner
    assert text.count("```") % 2 == 0  # the output's fences cannot close the code block early
    assert "<@U_MALLORY>" in text  # the author, named by the bot from Slack's event


def test_a_long_transcript_is_cut_into_messages_slack_takes() -> None:
    steps = [Step(kind="reply", text=f"line {n} " + "x" * 300, author="U_ALICE") for n in range(200)]
    messages = transcript_messages(transcript(steps), max_messages=3)
    assert len(messages) == 3
    assert all(len(m) <= MESSAGE_CHARS for m in messages)
    assert messages[-1].endswith(f"`chatops runs show {'r' * 32} --format markdown`._")
