"""slack_bolt itself, driven by the emulator: proof that the wire formats are the ones Bolt expects.

The app verifies every signature, answers on ``/slack/events`` and talks back through the Web API,
exactly as the bot will.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from slack_bolt import App, BoltRequest
from slack_sdk import WebClient

from emulator.slack import SlackEmulator, SlackEmulatorClient
from tests.emulator.slack.receiver import Answer, Received, Receiver
from tests.support.emulator_workspace import SECRET, TOKEN


@pytest.fixture
def bolt(emulator: SlackEmulator) -> Iterator[tuple[App, dict[str, list[Any]]]]:
    """A Bolt app served on a local port and registered as the emulator's Request URL."""
    app = App(client=WebClient(token=TOKEN, base_url=emulator.api_url), signing_secret=SECRET)
    heard: dict[str, list[Any]] = {"mentions": [], "messages": [], "submissions": []}
    lock = threading.Lock()

    @app.event("app_mention")
    def on_mention(event: dict[str, Any], say: Any) -> None:
        with lock:
            heard["mentions"].append(event)
        say(
            text="approval needed",
            thread_ts=event["ts"],
            blocks=[
                {
                    "type": "actions",
                    "elements": [
                        {
                            "type": "button",
                            "action_id": "approve",
                            "text": {"type": "plain_text", "text": "Approve"},
                        },
                        {
                            "type": "button",
                            "action_id": "reason",
                            "text": {"type": "plain_text", "text": "Why?"},
                        },
                    ],
                }
            ],
        )

    @app.event("message")
    def on_message(event: dict[str, Any]) -> None:
        with lock:
            heard["messages"].append(event)

    @app.action("approve")
    def on_approve(ack: Any, body: dict[str, Any], respond: Any) -> None:
        ack()
        respond(replace_original=True, text=f"Approved by <@{body['user']['id']}>")

    @app.action("reason")
    def on_reason(ack: Any, body: dict[str, Any], client: WebClient) -> None:
        ack()
        view = {
            "type": "modal",
            "callback_id": "why",
            "title": {"type": "plain_text", "text": "Why?"},
            "submit": {"type": "plain_text", "text": "Send"},
            "blocks": [
                {
                    "type": "input",
                    "block_id": "why",
                    "label": {"type": "plain_text", "text": "Reason"},
                    "element": {"type": "plain_text_input", "action_id": "text"},
                }
            ],
        }
        client.views_open(trigger_id=body["trigger_id"], view=view)

    @app.view("why")
    def on_submit(ack: Any, view: dict[str, Any]) -> None:
        text = view["state"]["values"]["why"]["text"]["value"]
        if len(text) < 3:
            ack(response_action="errors", errors={"why": "Too short"})
            return
        ack()
        with lock:
            heard["submissions"].append(text)

    def dispatch(request: Received, _index: int) -> Answer:
        headers: dict[str, str | Sequence[str]] = dict(request.headers)
        response = app.dispatch(BoltRequest(body=request.body.decode(), headers=headers))
        return Answer(
            status=response.status, body=response.body.encode(), headers={"Content-Type": "application/json"}
        )

    server = Receiver(dispatch)
    emulator.set_events_url(server.url)
    yield app, heard
    server.close()


def test_bolt_hears_a_mention_replies_in_thread_and_ignores_itself(
    bolt: tuple[App, dict[str, list[Any]]], emulator: SlackEmulator, control: SlackEmulatorClient
) -> None:
    _, heard = bolt
    ts = control.post_message("incident", "alice", "@ops restart api")["ts"]
    card = control.wait_for_reply("incident", ts, lambda m: m["text"] == "approval needed")
    assert card["bot_id"] == "B_OPS"
    assert emulator.core.deliverer.wait_idle(5)
    assert [m["ts"] for m in heard["mentions"]] == [ts]
    # The bot's own reply was delivered too, and Bolt's self-event filter dropped it.
    assert [m["ts"] for m in heard["messages"]] == [ts]
    assert {d["status"] for d in control.deliveries(kind="event")} == {200}


def test_bolt_handles_clicks_modals_and_response_urls(
    bolt: tuple[App, dict[str, list[Any]]], control: SlackEmulatorClient
) -> None:
    _, heard = bolt
    ts = control.post_message("incident", "alice", "@ops restart api")["ts"]
    card = control.wait_for_reply("incident", ts, lambda m: m["text"] == "approval needed")

    assert control.click(card["ts"], "bob", action_id="reason")["status"] == 200
    view = control.wait_for(lambda: next(iter(control.views("U_BOB")), None))
    assert control.submit_view(view["id"], {"why": {"text": "no"}})["errors"] == {"why": "Too short"}
    assert control.submit_view(view["id"], {"why": {"text": "it is Friday"}})["view_open"] is False
    assert heard["submissions"] == ["it is Friday"]

    assert control.click(card["ts"], "bob", action_id="approve")["status"] == 200
    approved = control.wait_for_reply("incident", ts, lambda m: m["text"].startswith("Approved"))
    assert (approved["ts"], approved["text"]) == (card["ts"], "Approved by <@U_BOB>")


def test_bolt_answers_the_url_verification_challenge(
    bolt: tuple[App, dict[str, list[Any]]], control: SlackEmulatorClient
) -> None:
    assert control.verify_url()["verified"] is True


def test_a_receiver_that_does_not_echo_fails_url_verification(control: SlackEmulatorClient) -> None:
    result = control.verify_url()  # the default receiver answers an empty 200
    assert (result["status"], result["verified"], result["ok"]) == (200, False, False)
