"""The App Home tab in the emulator: ``views.publish`` per person, ``app_home_opened`` when they open it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from emulator.slack import SlackEmulatorClient
from tests.emulator.slack.receiver import Receiver

HOME: dict[str, Any] = {
    "type": "home",
    "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "hi"}}],
}


def test_a_view_is_published_for_one_person_only(web: WebClient, control: SlackEmulatorClient) -> None:
    published = web.views_publish(user_id="U_ALICE", view=HOME)["view"]
    assert published["type"] == "home" and published["blocks"] == HOME["blocks"]
    home = control.home("U_ALICE")
    assert home is not None and home["id"] == published["id"]
    assert control.home("U_BOB") is None  # bob's Home tab is his own


def test_publish_refuses_what_slack_refuses(web: WebClient) -> None:
    refusals: list[tuple[dict[str, Any], str]] = [
        ({"user_id": "U_NOBODY", "view": HOME}, "user_not_found"),
        ({"user_id": "U_OPS", "view": HOME}, "user_not_found"),  # a bot has no Home tab to publish to
        ({"user_id": "U_ALICE", "view": {**HOME, "type": "modal"}}, "invalid_arguments"),
        ({"user_id": "U_ALICE", "view": {"type": "home", "blocks": [{"type": "nope"}]}}, "invalid_arguments"),
    ]
    for arguments, error in refusals:
        with pytest.raises(SlackApiError) as refused:
            web.views_publish(**arguments)
        assert refused.value.response["error"] == error
    first = web.views_publish(user_id="U_ALICE", view=HOME)["view"]
    with pytest.raises(SlackApiError) as stale:
        web.views_publish(user_id="U_ALICE", view=HOME, hash="1.stale")
    assert stale.value.response["error"] == "hash_conflict"
    assert web.views_publish(user_id="U_ALICE", view=HOME, hash=first["hash"])["ok"]


def test_opening_the_tab_sends_a_signed_app_home_opened_with_the_view(
    web: WebClient, control: SlackEmulatorClient, receiver: Receiver
) -> None:
    control.open_home("U_BOB")
    (first,) = receiver.wait_for(1)
    event = json.loads(first.body)["event"]
    assert (event["type"], event["user"], event["tab"]) == ("app_home_opened", "U_BOB", "home")
    assert "view" not in event  # nothing published yet
    assert first.headers["x-slack-signature"].startswith("v0=")
    web.views_publish(user_id="U_BOB", view=HOME)
    control.open_home("U_BOB")
    second = receiver.wait_for(2)[1]
    assert json.loads(second.body)["event"]["view"]["blocks"] == HOME["blocks"]


def test_a_reset_forgets_the_home_views(web: WebClient, control: SlackEmulatorClient) -> None:
    web.views_publish(user_id="U_ALICE", view=HOME)
    control.reset()
    assert control.home("U_ALICE") is None
