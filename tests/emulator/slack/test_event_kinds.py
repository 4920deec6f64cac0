"""Events the bot must cope with: ``message_changed`` after ``chat.update``, other apps' messages,
the ``app_rate_limited`` callback and Enterprise Grid ids."""

from __future__ import annotations

import json
from typing import Any

from slack_sdk import WebClient

from emulator.slack import SlackEmulator, SlackEmulatorClient
from tests.emulator.slack.receiver import Receiver
from tests.support.emulator_workspace import TOKEN, make_config


def bodies(receiver: Receiver, count: int) -> list[dict[str, Any]]:
    return [json.loads(r.body) for r in receiver.wait_for(count)]


def test_chat_update_sends_message_changed_with_the_previous_message(
    web: WebClient, receiver: Receiver
) -> None:
    ts = web.chat_postMessage(channel="C_INCIDENT", text="before")["ts"]
    web.chat_update(channel="C_INCIDENT", ts=ts, text="after")
    # Both events are delivered in the background: in either order, as Slack may.
    [changed] = [b["event"] for b in bodies(receiver, 2) if b["event"].get("subtype") == "message_changed"]
    assert (changed["type"], changed["subtype"], changed["hidden"]) == ("message", "message_changed", True)
    assert changed["message"]["ts"] == ts and changed["message"]["text"] == "after"
    assert changed["message"]["edited"]["user"] == "U_OPS"
    assert changed["previous_message"]["text"] == "before"
    assert changed["ts"] != ts and changed["channel"] == "C_INCIDENT"


def test_no_message_changed_when_the_app_does_not_hear_its_own_messages(receiver: Receiver) -> None:
    with SlackEmulator(make_config(events_url=receiver.url, deliver_bot_messages=False)) as slack:
        web = WebClient(token=TOKEN, base_url=slack.api_url)
        ts = web.chat_postMessage(channel="C_INCIDENT", text="before")["ts"]
        web.chat_update(channel="C_INCIDENT", ts=ts, text="after")
        assert slack.core.deliverer.wait_idle(5)
        assert receiver.requests == []


def test_another_apps_message_carries_its_bot_id_and_bot_message_subtype(
    control: SlackEmulatorClient, receiver: Receiver
) -> None:
    posted = control.post_as_bot(
        "#incident", "B_PAGER", "<@U_OPS> restart everything <!channel>", username="pager"
    )
    assert posted["event_types"] == ["app_mention", "message"]
    events = {b["event"]["type"]: b["event"] for b in bodies(receiver, 2)}  # delivered in either order
    mention, message = events["app_mention"], events["message"]
    assert (message["subtype"], message["bot_id"], message["username"]) == ("bot_message", "B_PAGER", "pager")
    assert "user" not in message
    assert mention["bot_id"] == "B_PAGER" and mention["text"] == "<@U_OPS> restart everything <!channel>"


def test_a_modern_apps_message_has_a_user_and_bot_id_but_no_subtype(
    control: SlackEmulatorClient, receiver: Receiver
) -> None:
    control.post_as_bot("#incident", "B_OTHER", "hello", user="U_ALICE", classic=False)
    [message] = [b["event"] for b in bodies(receiver, 1)]
    assert message["bot_id"] == "B_OTHER" and message["user"] == "U_ALICE" and "subtype" not in message


def test_posting_as_this_apps_own_bot_id_is_refused(control: SlackEmulatorClient) -> None:
    from emulator.slack.client import ControlApiError

    try:
        control.post_as_bot("#incident", "B_OPS", "spoof")
    except ControlApiError as error:
        assert error.status == 400
    else:
        raise AssertionError("posting as the app itself must be refused")


def test_app_rate_limited_is_a_signed_callback_without_an_event(
    control: SlackEmulatorClient, receiver: Receiver
) -> None:
    answer = control.send_app_rate_limited(1_700_000_040)
    assert (answer["ok"], answer["status"]) == (True, 200)
    [request] = receiver.wait_for(1)
    body = json.loads(request.body)
    assert body["type"] == "app_rate_limited" and body["minute_rate_limited"] == 1_700_000_040
    assert "event" not in body and request.headers["x-slack-signature"].startswith("v0=")
    assert control.deliveries(kind="callback")[0]["type"] == "app_rate_limited"


def test_a_grid_workspace_puts_its_enterprise_id_everywhere(receiver: Receiver) -> None:
    config = make_config(events_url=receiver.url, enterprise_id="E_GRID", users={"W_ALICE": "alice"})
    with SlackEmulator(config) as slack:
        control = SlackEmulatorClient(slack.url)
        web = WebClient(token=TOKEN, base_url=slack.api_url)
        assert web.auth_test()["enterprise_id"] == "E_GRID"
        control.post_message("#incident", "alice", "@ops hi")
        envelope = bodies(receiver, 2)[0]
        assert envelope["enterprise_id"] == "E_GRID" and envelope["context_enterprise_id"] == "E_GRID"
        assert envelope["authorizations"][0]["enterprise_id"] == "E_GRID"
        assert envelope["event"]["user"] == "W_ALICE"
