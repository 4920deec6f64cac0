"""Events API delivery: envelopes, signatures, the mention double delivery, retries."""

from __future__ import annotations

import json
import threading
from typing import Any

from slack_sdk import WebClient
from slack_sdk.signature import SignatureVerifier

from emulator.slack import SlackEmulator, SlackEmulatorClient
from tests.emulator.slack.receiver import Answer, Received, Receiver
from tests.support.emulator_workspace import SECRET, make_config

VERIFIER = SignatureVerifier(SECRET)


def events(requests: list[Received]) -> list[dict[str, Any]]:
    return [json.loads(r.body) for r in requests]


def test_a_mention_arrives_as_app_mention_and_message_with_distinct_ids(
    receiver: Receiver, control: SlackEmulatorClient
) -> None:
    posted = control.post_message("#incident", "alice", "@ops restart the api")
    assert posted["text"] == "<@U_OPS> restart the api"
    assert sorted(posted["event_types"]) == ["app_mention", "message"]
    bodies = events(receiver.wait_for(2))
    by_type = {b["event"]["type"]: b for b in bodies}
    assert set(by_type) == {"app_mention", "message"}
    assert len({b["event_id"] for b in bodies}) == 2
    assert {b["event_id"] for b in bodies} == set(posted["event_ids"])
    mention, message = by_type["app_mention"]["event"], by_type["message"]["event"]
    assert mention["ts"] == message["ts"] == posted["ts"]
    assert (mention["user"], mention["channel"], mention["text"]) == ("U_ALICE", "C_INCIDENT", posted["text"])
    assert message["channel_type"] == "channel" and message["event_ts"] == posted["ts"]
    assert message["blocks"][0]["type"] == "rich_text"
    assert {"type": "user", "user_id": "U_OPS"} in message["blocks"][0]["elements"][0]["elements"]


def test_the_envelope_has_slacks_fields(receiver: Receiver, control: SlackEmulatorClient) -> None:
    control.post_message("incident", "bob", "hello")
    [body] = events(receiver.wait_for(1))
    assert set(body) >= {
        "token",
        "team_id",
        "api_app_id",
        "event",
        "type",
        "event_id",
        "event_time",
        "authorizations",
        "is_ext_shared_channel",
        "event_context",
    }
    assert (body["type"], body["team_id"], body["api_app_id"]) == ("event_callback", "T_EMULATOR", "A_OPS")
    assert body["event_id"].startswith("Ev") and isinstance(body["event_time"], int)
    assert body["authorizations"] == [
        {
            "enterprise_id": None,
            "team_id": "T_EMULATOR",
            "user_id": "U_OPS",
            "is_bot": True,
            "is_enterprise_install": False,
        }
    ]


def test_requests_are_signed_so_slack_sdk_verifies_them(
    receiver: Receiver, control: SlackEmulatorClient
) -> None:
    control.post_message("incident", "alice", "@ops hi")
    for request in receiver.wait_for(2):
        assert request.headers["content-type"] == "application/json"
        assert request.headers["x-slack-signature"].startswith("v0=")
        assert VERIFIER.is_valid_request(request.body, request.headers)
        assert not SignatureVerifier("another-secret").is_valid_request(request.body, request.headers)


def test_a_plain_message_is_one_message_event(receiver: Receiver, control: SlackEmulatorClient) -> None:
    posted = control.post_message("incident", "alice", "just chatting")
    assert posted["event_types"] == ["message"]
    assert [b["event"]["type"] for b in events(receiver.wait_for(1))] == ["message"]


def test_channels_without_the_bot_deliver_nothing(receiver: Receiver, control: SlackEmulatorClient) -> None:
    posted = control.post_message("random", "alice", "@ops are you here?")
    assert posted["event_ids"] == []
    control.post_message("incident", "alice", "marker")
    assert [b["event"]["text"] for b in events(receiver.wait_for(1))] == ["marker"]


def test_thread_replies_and_broadcasts_carry_thread_fields(
    receiver: Receiver, control: SlackEmulatorClient
) -> None:
    parent = control.post_message("incident", "alice", "@ops deploy")["ts"]
    control.post_message("incident", "bob", "wait, not yet", thread_ts=parent)
    control.post_message("incident", "bob", "ok go", thread_ts=parent, reply_broadcast=True)
    replies = [b["event"] for b in events(receiver.wait_for(4)) if b["event"].get("thread_ts")]
    plain, broadcast = sorted(replies, key=lambda e: e["ts"])
    assert (plain["thread_ts"], plain["parent_user_id"], plain.get("subtype")) == (parent, "U_ALICE", None)
    assert broadcast["subtype"] == "thread_broadcast"
    assert broadcast["root"]["ts"] == parent


def test_the_bots_own_posts_come_back_with_bot_id(receiver: Receiver, web: WebClient) -> None:
    ts = web.chat_postMessage(channel="C_INCIDENT", text="run card")["ts"]
    [body] = events(receiver.wait_for(1))
    assert (body["event"]["type"], body["event"]["bot_id"], body["event"]["ts"]) == ("message", "B_OPS", ts)


def test_a_slow_bot_gets_retries_with_the_same_event_id() -> None:
    released = threading.Event()  # the first answer is held until the retry has arrived

    def hold_the_first(_request: Received, index: int) -> Answer:
        if index == 0:
            released.wait(60)
        return Answer()

    slow_first = Receiver(hold_the_first)
    try:
        with SlackEmulator(make_config(events_url=slow_first.url, event_timeout=0.3)) as slack:
            SlackEmulatorClient(slack.url).post_message("incident", "alice", "hello")
            # Slack does not wait for the slow answer before retrying: the retry comes while it is held.
            first, retry = slow_first.wait_for(2)
            released.set()
            assert "x-slack-retry-num" not in first.headers
            assert (retry.headers["x-slack-retry-num"], retry.headers["x-slack-retry-reason"]) == (
                "1",
                "http_timeout",
            )
            assert json.loads(first.body)["event_id"] == json.loads(retry.body)["event_id"]
            assert VERIFIER.is_valid_request(retry.body, retry.headers)
    finally:
        released.set()
        slow_first.close()


def test_a_failing_bot_gets_three_retries_then_nothing() -> None:
    failing = Receiver(lambda _request, _index: Answer(status=500))
    try:
        with SlackEmulator(make_config(events_url=failing.url)) as slack:
            client = SlackEmulatorClient(slack.url)
            [event_id] = client.post_message("incident", "alice", "hello")["event_ids"]
            requests = failing.wait_for(4)
            assert slack.core.deliverer.wait_idle(5)
            assert len(failing.requests) == 4
            assert [r.headers.get("x-slack-retry-num") for r in requests] == [None, "1", "2", "3"]
            assert {r.headers.get("x-slack-retry-reason") for r in requests[1:]} == {"http_error"}
            attempts = client.deliveries(event_id=event_id)
            assert [(a["retry_num"], a["status"], a["outcome"]) for a in attempts] == [
                (0, 500, "http_error"),
                (1, 500, "http_error"),
                (2, 500, "http_error"),
                (3, 500, "http_error"),
            ]
    finally:
        failing.close()


def test_x_slack_no_retry_stops_retries() -> None:
    refusing = Receiver(lambda _request, _index: Answer(status=503, headers={"X-Slack-No-Retry": "1"}))
    try:
        with SlackEmulator(make_config(events_url=refusing.url)) as slack:
            SlackEmulatorClient(slack.url).post_message("incident", "alice", "hello")
            refusing.wait_for(1)
            assert slack.core.deliverer.wait_idle(5)
            assert len(refusing.requests) == 1
    finally:
        refusing.close()


def test_an_unreachable_bot_is_recorded_as_connection_failed() -> None:
    gone = Receiver()
    url = gone.url
    gone.close()
    with SlackEmulator(make_config(events_url=url)) as slack:
        client = SlackEmulatorClient(slack.url)
        client.post_message("incident", "alice", "hello")
        assert slack.core.deliverer.wait_idle(5)
        outcomes = [(d["retry_num"], d["outcome"]) for d in client.deliveries()]
        assert outcomes == [
            (0, "connection_failed"),
            (1, "connection_failed"),
            (2, "connection_failed"),
            (3, "connection_failed"),
        ]


def test_the_events_url_can_be_set_after_start(receiver: Receiver) -> None:
    with SlackEmulator(make_config()) as slack:
        client = SlackEmulatorClient(slack.url)
        client.post_message("incident", "alice", "before")
        assert [d["outcome"] for d in client.deliveries()] == ["no_url"]
        client.set_events_url(receiver.url)
        client.post_message("incident", "alice", "after")
        assert [b["event"]["text"] for b in events(receiver.wait_for(1))] == ["after"]
        slack.set_events_url(None)
        assert client.state()["events_url"] is None
