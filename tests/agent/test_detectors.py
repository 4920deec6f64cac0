from __future__ import annotations

import hashlib

import pytest

from agent.errors import ConfigurationError
from agent.history import close_unanswered_calls, unanswered_calls
from agent.loop_detection import LoopDetector, LoopVerdict, call_signature
from agent.repetition import RepetitionDetector
from agent.scripted import tool_call
from agent.toolcall_recovery import recover_tool_calls
from agent.types import Message


def test_signature_ignores_argument_key_order_but_not_output() -> None:
    assert call_signature("t", '{"a":1,"b":2}', "x") == call_signature("t", '{"b": 2, "a": 1}', "x")
    assert call_signature("t", "{}", "x") != call_signature("t", "{}", "y")
    assert call_signature("ab", "{}", "c") != call_signature("a", "{}", "bc")


def test_a_signature_is_the_one_a_stored_window_holds() -> None:
    # A run resumed from a window an earlier version stored must recognise the same call.
    stored = hashlib.sha256(b'disk_check\x00{"target":"web-03"}\x00/dev/sda1 97%\x00').hexdigest()
    assert (
        call_signature("disk_check", '{"target": "web-03", "confirmed_by": "U1"}', "/dev/sda1 97%") == stored
    )


def test_window_slides_and_survives_a_resume() -> None:
    detector = LoopDetector(window=10)
    verdicts = [detector.record("t", "{}", "same")[0] for _ in range(3)]
    assert verdicts == [LoopVerdict.OK, LoopVerdict.OK, LoopVerdict.WARN]
    resumed = LoopDetector(window=10, history=detector.window)
    assert [resumed.record("t", "{}", "same")[0] for _ in range(3)] == [LoopVerdict.WARN] * 2 + [
        LoopVerdict.STOP
    ]
    spaced = LoopDetector(window=10)
    for n in range(40):  # the same call every fifth step: at most 2 in any window of 10
        assert spaced.record("t", "{}", "same" if n % 5 == 0 else str(n))[0] is LoopVerdict.OK


def test_bad_thresholds_are_misuse() -> None:
    with pytest.raises(ConfigurationError):
        LoopDetector(window=5, warn_at=3, stop_at=6)


@pytest.mark.parametrize("pattern", ["a", "ab", "abc ", "0123456789abcdefghij", "é"])
def test_repetition_detector_catches_short_patterns_over_the_whole_window(pattern: str) -> None:
    detector = RepetitionDetector()
    fired = [detector.feed(pattern) for _ in range(300)]
    assert fired[-1] and not fired[0]


def test_repetition_detector_ignores_normal_text_and_long_periods() -> None:
    detector = RepetitionDetector()
    text = "Checked disk usage on web-03: / is 97% full, /var/log holds 41 GB of rotated logs. " * 10
    assert not any(detector.feed(text[i : i + 7]) for i in range(0, len(text), 7))
    period_21 = RepetitionDetector()
    assert not any(period_21.feed("abcdefghijklmnopqrstu") for _ in range(30))


def test_recovery_shapes() -> None:
    allowed = {"disk_usage"}
    for text in (
        '{"name": "disk_usage", "arguments": {"path": "/"}}',
        '<tool_call>{"name": "disk_usage", "arguments": "{\\"path\\": \\"/\\"}"}</tool_call>',
        'Sure:\n```json\n{"tool": "disk_usage", "parameters": {"path": "/"}}\n```',
    ):
        recovered = recover_tool_calls(Message.assistant(text), allowed)
        assert recovered is not None
        (call,) = recovered.tool_calls
        assert call.name == "disk_usage" and call.parsed_arguments() == {"path": "/"}
    assert recover_tool_calls(Message.assistant('{"name": "rm", "arguments": {}}'), allowed) is None
    assert recover_tool_calls(Message.assistant("The disk is 97% full."), allowed) is None


def test_unanswered_calls_and_closing_them() -> None:
    calls = [tool_call("a", "1"), tool_call("b", "2")]
    history = [Message.user("x"), Message.assistant(None, calls), Message.tool("1", "ok")]
    assert [c.id for c in unanswered_calls(history)] == ["2"]
    closed = close_unanswered_calls(history, "the run was cancelled")
    assert unanswered_calls(closed) == [] and closed[-1].content == "Error: not run: the run was cancelled"
    assert unanswered_calls([*history[:2], Message.tool("1", "ok"), Message.tool("2", "ok")]) == []
