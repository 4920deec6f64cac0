"""Slack's message limits and injected faults (429 with Retry-After, 5xx, error strings)."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler, ServerErrorRetryHandler

from emulator.slack import SlackEmulator, SlackEmulatorClient
from tests.support.emulator_workspace import TOKEN


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def button(value: str) -> dict[str, Any]:
    return {
        "type": "button",
        "action_id": "approve",
        "text": {"type": "plain_text", "text": "Approve"},
        "value": value,
    }


def post_error(web: WebClient, **kwargs: Any) -> dict[str, Any]:
    with pytest.raises(SlackApiError) as info:
        web.chat_postMessage(channel="C_INCIDENT", text=kwargs.pop("text", "fallback"), **kwargs)
    data = info.value.response.data
    assert isinstance(data, dict)
    return data


def test_text_up_to_40000_characters_is_accepted_and_longer_is_msg_too_long(web: WebClient) -> None:
    assert web.chat_postMessage(channel="C_INCIDENT", text="x" * 40_000)["ok"]
    assert post_error(web, text="x" * 40_001)["error"] == "msg_too_long"


def test_more_than_50_blocks_is_invalid_blocks(web: WebClient) -> None:
    assert web.chat_postMessage(channel="C_INCIDENT", text="t", blocks=[section("b")] * 50)["ok"]
    error = post_error(web, blocks=[section("b")] * 51)
    assert error["error"] == "invalid_blocks"
    assert error["errors"] == ["no more than 50 items allowed [json-pointer:/blocks]"]
    assert error["response_metadata"]["messages"] == [
        "[ERROR] no more than 50 items allowed [json-pointer:/blocks]"
    ]


def test_section_text_over_3000_characters_points_at_the_field(web: WebClient) -> None:
    assert web.chat_postMessage(channel="C_INCIDENT", text="t", blocks=[section("y" * 3000)])["ok"]
    error = post_error(web, blocks=[{"type": "divider"}, section("y" * 3001)])
    assert error["errors"] == ["must be less than 3001 characters [json-pointer:/blocks/1/text/text]"]


def test_button_value_over_2000_characters(web: WebClient) -> None:
    ok = [{"type": "actions", "elements": [button("v" * 2000)]}]
    assert web.chat_postMessage(channel="C_INCIDENT", text="t", blocks=ok)["ok"]
    error = post_error(web, blocks=[{"type": "actions", "elements": [button("v" * 2001)]}])
    assert error["errors"] == ["must be less than 2001 characters [json-pointer:/blocks/0/elements/0/value]"]


@pytest.mark.parametrize(
    ("blocks", "reason"),
    [
        ([{"type": "carousel"}], "unsupported type: carousel [json-pointer:/blocks/0/type]"),
        (
            [{"text": {"type": "mrkdwn", "text": "no type"}}],
            "missing required field: type [json-pointer:/blocks/0]",
        ),
        (["section"], "must be an object [json-pointer:/blocks/0]"),
        ([{"type": "section"}], "must provide either text or fields [json-pointer:/blocks/0]"),
        ([{"type": "section", "text": "bare"}], "must be an object [json-pointer:/blocks/0/text]"),
    ],
)
def test_malformed_blocks_are_invalid_blocks(web: WebClient, blocks: list[Any], reason: str) -> None:
    error = post_error(web, blocks=blocks)
    assert error["error"] == "invalid_blocks"
    assert reason in error["errors"]


def test_blocks_that_are_not_json_are_invalid_blocks_format(emulator: SlackEmulator) -> None:
    form = urllib.parse.urlencode({"channel": "C_INCIDENT", "text": "t", "blocks": "[{not json"}).encode()
    request = urllib.request.Request(
        emulator.api_url + "chat.postMessage",
        data=form,
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/x-www-form-urlencoded"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        assert (response.status, json.loads(response.read())) == (
            200,
            {"ok": False, "error": "invalid_blocks_format"},
        )


def test_update_checks_the_same_limits(web: WebClient) -> None:
    ts = web.chat_postMessage(channel="C_INCIDENT", text="t")["ts"]
    with pytest.raises(SlackApiError) as info:
        web.chat_update(channel="C_INCIDENT", ts=ts, text="t", blocks=[section("z" * 3001)])
    assert info.value.response["error"] == "invalid_blocks"


def test_injected_ratelimit_answers_429_with_retry_after(
    web: WebClient, control: SlackEmulatorClient
) -> None:
    control.inject_fault("chat.postMessage", kind="ratelimited", count=1, retry_after=7)
    with pytest.raises(SlackApiError) as info:
        web.chat_postMessage(channel="C_INCIDENT", text="x")
    response = info.value.response
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "7"
    assert response["error"] == "ratelimited"
    assert web.chat_postMessage(channel="C_INCIDENT", text="x")["ok"]  # the fault was for one call only


def test_slack_sdks_rate_limit_handler_waits_retry_after_then_succeeds(
    emulator: SlackEmulator, control: SlackEmulatorClient
) -> None:
    control.inject_fault("chat.postMessage", kind="ratelimited", count=1, retry_after=1)
    web = WebClient(
        token=TOKEN, base_url=emulator.api_url, retry_handlers=[RateLimitErrorRetryHandler(max_retry_count=2)]
    )
    started = time.monotonic()
    assert web.chat_postMessage(channel="C_INCIDENT", text="after the limit")["ok"]
    assert time.monotonic() - started >= 1.0
    assert [c["status"] for c in control.calls("chat.postMessage")] == [429, 200]
    assert [m["text"] for m in control.messages("incident")] == ["after the limit"]


def test_injected_server_error_and_sdk_retry(emulator: SlackEmulator, control: SlackEmulatorClient) -> None:
    control.inject_fault("chat.update", kind="http_error", status=503, count=1)
    control.inject_fault("chat.postMessage", kind="http_error", status=500, count=2)
    plain = WebClient(token=TOKEN, base_url=emulator.api_url)
    with pytest.raises(SlackApiError) as info:
        plain.chat_update(channel="C_INCIDENT", ts="1700000000.000001", text="x")
    assert info.value.response.status_code == 503
    retrying = WebClient(
        token=TOKEN, base_url=emulator.api_url, retry_handlers=[ServerErrorRetryHandler(max_retry_count=3)]
    )
    assert retrying.chat_postMessage(channel="C_INCIDENT", text="eventually")["ok"]
    assert [c["status"] for c in control.calls("chat.postMessage")] == [500, 500, 200]


def test_injected_slack_error_string_and_wildcard(web: WebClient, control: SlackEmulatorClient) -> None:
    control.inject_fault("reactions.add", kind="error", error="too_many_reactions")
    control.inject_fault("*", kind="error", error="fatal_error", count=1)
    with pytest.raises(SlackApiError) as first:
        web.auth_test()
    assert first.value.response["error"] == "fatal_error"
    with pytest.raises(SlackApiError) as second:
        web.reactions_add(channel="C_INCIDENT", timestamp="1.000000", name="eyes")
    assert (second.value.response.status_code, second.value.response["error"]) == (200, "too_many_reactions")
    assert control.calls("auth.test")[0]["error"] == "fatal_error"


def test_faults_can_be_listed_and_cleared(web: WebClient, control: SlackEmulatorClient) -> None:
    control.inject_fault("chat.postMessage", kind="ratelimited", count=3)
    [armed] = control.faults()
    assert (armed["method"], armed["kind"], armed["remaining"]) == ("chat.postMessage", "ratelimited", 3)
    control.clear_faults()
    assert control.faults() == []
    assert web.chat_postMessage(channel="C_INCIDENT", text="x")["ok"]


def test_reset_forgets_everything(web: WebClient, control: SlackEmulatorClient) -> None:
    web.chat_postMessage(channel="C_INCIDENT", text="x")
    control.inject_fault("auth.test", count=5)
    control.reset()
    assert control.messages("incident") == []
    assert control.calls() == []
    assert web.auth_test()["ok"]


def test_blocks_holding_more_than_12000_characters_in_all_are_msg_blocks_too_long(web: WebClient) -> None:
    # Each section is within its 3,000 limit; together they pass what Slack takes (bolt-js#2509).
    assert web.chat_postMessage(channel="C_INCIDENT", text="t", blocks=[section("a" * 3000)] * 4)["ok"]
    error = post_error(web, blocks=[section("a" * 3000)] * 4 + [section("b")])
    assert error["error"] == "msg_blocks_too_long"
    ts = web.chat_postMessage(channel="C_INCIDENT", text="t")["ts"]
    with pytest.raises(SlackApiError) as info:
        web.chat_update(channel="C_INCIDENT", ts=ts, text="t", blocks=[section("c" * 2500)] * 5)
    assert info.value.response["error"] == "msg_blocks_too_long"


def test_a_confirm_dialogs_text_must_be_plain_text(web: WebClient) -> None:
    confirm = {
        "title": {"type": "plain_text", "text": "Sure?"},
        "text": {"type": "mrkdwn", "text": "Deletes *everything*"},
        "confirm": {"type": "plain_text", "text": "Yes"},
        "deny": {"type": "plain_text", "text": "No"},
    }
    error = post_error(web, blocks=[{"type": "actions", "elements": [{**button("v"), "confirm": confirm}]}])
    assert error["errors"] == [
        "must be one of plain_text [json-pointer:/blocks/0/elements/0/confirm/text/type]"
    ]
    confirm["text"] = {"type": "plain_text", "text": "Deletes everything"}
    blocks = [{"type": "actions", "elements": [{**button("v"), "confirm": confirm}]}]
    assert web.chat_postMessage(channel="C_INCIDENT", text="t", blocks=blocks)["ok"]


def overflow(options: list[Any]) -> list[dict[str, Any]]:
    return [
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": "x"},
            "accessory": {"type": "overflow", "options": options},
        }
    ]


def option(text: str, value: str) -> dict[str, Any]:
    return {"text": {"type": "plain_text", "text": text}, "value": value}


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ([option("a", "1")], "must provide 2 to 5 options [json-pointer:/blocks/0/accessory/options]"),
        ([option(str(i), str(i)) for i in range(6)], "must provide 2 to 5 options"),
        (
            [option("a", "1"), option("b" * 76, "2")],
            "must be less than 76 characters [json-pointer:/blocks/0/accessory/options/1/text/text]",
        ),
        (
            [option("a", "1"), option("b", "v" * 151)],
            "must be less than 151 characters [json-pointer:/blocks/0/accessory/options/1/value]",
        ),
        (
            [option("a", "1"), {"text": {"type": "mrkdwn", "text": "*b*"}, "value": "2"}],
            "must be one of plain_text [json-pointer:/blocks/0/accessory/options/1/text/type]",
        ),
    ],
)
def test_an_overflow_menu_is_checked_as_slack_checks_it(
    web: WebClient, options: list[Any], reason: str
) -> None:
    error = post_error(web, blocks=overflow(options))
    assert error["error"] == "invalid_blocks"
    assert any(reason in found for found in error["errors"]), error["errors"]
    assert web.chat_postMessage(
        channel="C_INCIDENT", text="t", blocks=overflow([option("a", "1"), option("b", "2")])
    )["ok"]
