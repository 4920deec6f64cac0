"""Interactivity: block_actions and view_submission payloads, trigger IDs, modals, response URLs."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier

from emulator.slack import ControlApiError, SlackEmulator, SlackEmulatorClient
from tests.emulator.slack.receiver import Answer, Received, Receiver
from tests.support.emulator_workspace import SECRET, TOKEN, make_config

APPROVAL: list[dict[str, Any]] = [
    {"type": "section", "block_id": "summary", "text": {"type": "mrkdwn", "text": "*restart* `api`?"}},
    {
        "type": "actions",
        "block_id": "approval_controls",
        "elements": [
            {
                "type": "button",
                "action_id": "approve",
                "style": "primary",
                "value": "call-1",
                "text": {"type": "plain_text", "text": "Approve"},
                "confirm": {
                    "title": {"type": "plain_text", "text": "Sure?"},
                    "text": {"type": "plain_text", "text": "Restarts api."},
                    "confirm": {"type": "plain_text", "text": "Yes"},
                    "deny": {"type": "plain_text", "text": "No"},
                },
            },
            {
                "type": "button",
                "action_id": "decline",
                "style": "danger",
                "value": "call-1",
                "text": {"type": "plain_text", "text": "Decline"},
            },
        ],
    },
]

REASON_VIEW = {
    "type": "modal",
    "callback_id": "decline_reason",
    "private_metadata": "call-1",
    "title": {"type": "plain_text", "text": "Decline"},
    "submit": {"type": "plain_text", "text": "Send"},
    "blocks": [
        {
            "type": "input",
            "block_id": "reason",
            "label": {"type": "plain_text", "text": "Why?"},
            "element": {"type": "plain_text_input", "action_id": "text", "multiline": True},
        }
    ],
}


def payloads(requests: list[Received]) -> list[dict[str, Any]]:
    return [
        json.loads(r.form_payload)
        for r in requests
        if r.headers["content-type"].startswith("application/x-www")
    ]


def approval_card(web: WebClient, **kwargs: Any) -> str:
    ts: str = web.chat_postMessage(channel="C_INCIDENT", text="approval needed", blocks=APPROVAL, **kwargs)[
        "ts"
    ]
    return ts


def test_clicking_sends_a_signed_form_encoded_block_actions_payload(
    receiver: Receiver, web: WebClient, control: SlackEmulatorClient
) -> None:
    ts = approval_card(web)
    result = control.click(ts, "alice", action_id="approve")
    assert (result["ok"], result["status"]) == (True, 200)
    [request] = [
        r for r in receiver.wait_for(2) if r.headers["content-type"] == "application/x-www-form-urlencoded"
    ]
    assert SignatureVerifier(SECRET).is_valid_request(request.body, request.headers)
    assert list(urllib.parse.parse_qs(request.body.decode())) == ["payload"]
    payload = json.loads(request.form_payload)
    assert payload["type"] == "block_actions"
    assert payload["user"] == {"id": "U_ALICE", "username": "alice", "name": "alice", "team_id": "T_EMULATOR"}
    assert (payload["api_app_id"], payload["team"]["id"], payload["channel"]) == (
        "A_OPS",
        "T_EMULATOR",
        {"id": "C_INCIDENT", "name": "incident"},
    )
    assert payload["container"] == {
        "type": "message",
        "message_ts": ts,
        "channel_id": "C_INCIDENT",
        "is_ephemeral": False,
    }
    assert payload["message"]["blocks"] == APPROVAL and payload["message"]["ts"] == ts
    assert payload["trigger_id"] == result["trigger_id"]
    assert payload["response_url"] == result["response_url"]
    assert payload["state"] == {"values": {}}
    [action] = payload["actions"]
    assert {k: action[k] for k in ("action_id", "block_id", "value", "type", "style")} == {
        "action_id": "approve",
        "block_id": "approval_controls",
        "value": "call-1",
        "type": "button",
        "style": "primary",
    }
    assert action["text"] == {"type": "plain_text", "text": "Approve"}
    assert len(action["action_ts"].split(".")) == 2


def test_buttons_can_be_found_by_value_and_threads_show_in_the_container(
    receiver: Receiver, web: WebClient, control: SlackEmulatorClient
) -> None:
    parent = control.post_message("incident", "alice", "@ops restart api")["ts"]
    card = approval_card(web, thread_ts=parent)
    control.click(card, "bob", value="call-1")  # the first button with that value: approve
    [payload] = payloads(receiver.wait_for(4))
    assert payload["actions"][0]["action_id"] == "approve"
    assert payload["container"]["thread_ts"] == parent


def test_clicking_a_missing_button_is_a_404(web: WebClient, control: SlackEmulatorClient) -> None:
    ts = approval_card(web)
    with pytest.raises(ControlApiError) as info:
        control.click(ts, "alice", action_id="launch_missiles")
    assert info.value.status == 404


def test_ephemeral_clicks_leave_the_message_out(
    receiver: Receiver, web: WebClient, control: SlackEmulatorClient
) -> None:
    ts = web.chat_postEphemeral(channel="C_INCIDENT", user="U_ALICE", text="only you", blocks=APPROVAL)[
        "message_ts"
    ]
    with pytest.raises(ControlApiError):
        control.click(ts, "bob", action_id="approve")  # bob cannot see it
    control.click(ts, "alice", action_id="approve")
    [payload] = payloads(receiver.wait_for(1))
    assert payload["container"]["is_ephemeral"] is True
    assert "message" not in payload


def test_a_trigger_id_opens_one_modal_once(web: WebClient, control: SlackEmulatorClient) -> None:
    trigger = control.click(approval_card(web), "alice", action_id="decline")["trigger_id"]
    view = web.views_open(trigger_id=trigger, view=REASON_VIEW)["view"]
    assert view["id"].startswith("V") and view["callback_id"] == "decline_reason"
    assert view["private_metadata"] == "call-1" and view["state"] == {"values": {}}
    [open_view] = control.views("U_ALICE")
    assert open_view["id"] == view["id"] and open_view["user"] == "U_ALICE"
    with pytest.raises(SlackApiError) as again:
        web.views_open(trigger_id=trigger, view=REASON_VIEW)
    assert again.value.response["error"] == "exchanged_trigger_id"


def test_old_unknown_and_malformed_triggers_are_refused(receiver: Receiver) -> None:
    with SlackEmulator(make_config(events_url=receiver.url, trigger_ttl=0.2)) as slack:
        web = WebClient(token=TOKEN, base_url=slack.api_url)
        trigger = SlackEmulatorClient(slack.url).click(approval_card(web), "alice", action_id="decline")[
            "trigger_id"
        ]
        time.sleep(0.3)
        for trigger_id, error in [
            (trigger, "expired_trigger_id"),
            ("12345.98765.abcd2358fdea", "expired_trigger_id"),
            ("not-a-trigger", "invalid_trigger_id"),
        ]:
            with pytest.raises(SlackApiError) as info:
                web.views_open(trigger_id=trigger_id, view=REASON_VIEW)
            assert info.value.response["error"] == error


def submit_answers(*answers: dict[str, Any] | None) -> Receiver:
    """A receiver answering each view_submission with the next answer (None: empty 200)."""
    queue = list(answers)

    def behaviour(request: Received, _index: int) -> Answer:
        if (
            request.headers["content-type"].startswith("application/x-www")
            and "view_submission" in request.form_payload
        ):
            answer = queue.pop(0)
            return Answer(body=json.dumps(answer).encode() if answer else b"")
        return Answer()

    return Receiver(behaviour)


def test_view_submission_carries_state_values_and_obeys_response_action() -> None:
    bot = submit_answers({"response_action": "errors", "errors": {"reason": "Say more"}}, None)
    try:
        with SlackEmulator(make_config(events_url=bot.url)) as slack:
            web, control = WebClient(token=TOKEN, base_url=slack.api_url), SlackEmulatorClient(slack.url)
            trigger = control.click(approval_card(web), "alice", action_id="decline")["trigger_id"]
            view_id = web.views_open(trigger_id=trigger, view=REASON_VIEW)["view"]["id"]

            rejected = control.submit_view(view_id, {"reason": {"text": "no"}})
            assert (rejected["ok"], rejected["response_action"], rejected["view_open"]) == (
                True,
                "errors",
                True,
            )
            assert control.views("U_ALICE")[0]["errors"] == {"reason": "Say more"}

            accepted = control.submit_view(view_id, {"text": "it is Friday"}, user="alice")
            assert (accepted["ok"], accepted["view_open"]) == (True, False)
            assert control.views() == []
            submissions = [p for p in payloads(bot.requests) if p["type"] == "view_submission"]
            assert submissions[1]["view"]["state"]["values"] == {
                "reason": {"text": {"type": "plain_text_input", "value": "it is Friday"}}
            }
            assert (submissions[1]["view"]["id"], submissions[1]["view"]["private_metadata"]) == (
                view_id,
                "call-1",
            )
            assert submissions[1]["user"]["id"] == "U_ALICE" and submissions[1]["trigger_id"]
    finally:
        bot.close()


def test_required_inputs_are_checked_before_anything_is_sent(
    receiver: Receiver, web: WebClient, control: SlackEmulatorClient
) -> None:
    trigger = control.click(approval_card(web), "alice", action_id="decline")["trigger_id"]
    view_id = web.views_open(trigger_id=trigger, view=REASON_VIEW)["view"]["id"]
    result = control.submit_view(view_id, {})
    assert (result["ok"], result["errors"]) == (False, {"reason": "This field is required."})
    assert not [p for p in payloads(receiver.requests) if p["type"] == "view_submission"]


def test_response_url_replaces_or_adds_messages(
    web: WebClient, control: SlackEmulatorClient, emulator: SlackEmulator
) -> None:
    ts = approval_card(web)
    url = control.click(ts, "alice", action_id="approve")["response_url"]
    assert url.startswith(emulator.url + "/actions/")

    def respond(body: dict[str, Any]) -> int:
        request = urllib.request.Request(
            url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status)

    assert respond({"replace_original": True, "text": "Approved by <@U_ALICE>"}) == 200
    [card] = control.messages("incident")
    assert (card["ts"], card["text"], card.get("blocks")) == (ts, "Approved by <@U_ALICE>", None)
    assert respond({"text": "just for you"}) == 200
    assert [m["text"] for m in control.messages("incident", viewer="U_ALICE")][-1] == "just for you"
    assert [m["text"] for m in control.messages("incident", viewer="U_BOB")] == ["Approved by <@U_ALICE>"]


MENU = [
    {
        "type": "section",
        "block_id": "findings_H2",
        "text": {"type": "mrkdwn", "text": "*H2* nginx cache"},
        "accessory": {
            "type": "overflow",
            "action_id": "menu",
            "options": [
                {"text": {"type": "plain_text", "text": "Refute"}, "value": "refute:H2"},
                {"text": {"type": "plain_text", "text": "Focus on this"}, "value": "focus:H2"},
            ],
        },
    }
]


def test_choosing_from_an_overflow_menu_sends_the_option_as_slack_does(
    receiver: Receiver, web: WebClient, control: SlackEmulatorClient
) -> None:
    ts = web.chat_postMessage(channel="C_INCIDENT", text="findings", blocks=MENU)["ts"]
    control.click(ts, "alice", action_id="menu", value="focus:H2")
    [payload] = payloads(receiver.wait_for(2))
    [action] = payload["actions"]
    assert (action["type"], action["action_id"], action["block_id"]) == ("overflow", "menu", "findings_H2")
    assert action["selected_option"] == {
        "text": {"type": "plain_text", "text": "Focus on this"},
        "value": "focus:H2",
    }
    assert "value" not in action and "text" not in action
    with pytest.raises(ControlApiError) as info:  # a person picks an option: there is no bare click
        control.click(ts, "alice", action_id="menu")
    assert info.value.status == 404
    with pytest.raises(ControlApiError):
        control.click(ts, "alice", action_id="menu", value="delete:H2")  # no such option
