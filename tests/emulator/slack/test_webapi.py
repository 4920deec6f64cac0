"""The Web API as slack_sdk's WebClient sees it: shapes, errors, pagination, recording."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from emulator.slack import SlackEmulator, SlackEmulatorClient
from tests.support.emulator_workspace import TOKEN


def raw_post(
    url: str, body: bytes, content_type: str, token: str | None = TOKEN
) -> tuple[int, dict[str, object]]:
    headers = {"Content-Type": content_type}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.status, json.loads(response.read())


def api_error(call: object) -> SlackApiError:
    with pytest.raises(SlackApiError) as info:
        assert callable(call)
        call()
    return info.value


def test_auth_test_names_the_bot_and_lists_scopes_in_a_header(web: WebClient) -> None:
    response = web.auth_test()
    assert response.status_code == 200
    assert {k: response[k] for k in ("ok", "user_id", "bot_id", "team_id", "user")} == {
        "ok": True,
        "user_id": "U_OPS",
        "bot_id": "B_OPS",
        "team_id": "T_EMULATOR",
        "user": "ops",
    }
    assert response["url"].startswith("https://") and response["url"].endswith(".slack.com/")
    assert "chat:write" in response.headers["x-oauth-scopes"].split(",")


def test_a_wrong_token_is_invalid_auth_and_a_missing_one_not_authed(emulator: SlackEmulator) -> None:
    assert api_error(WebClient(token="xoxb-wrong", base_url=emulator.api_url).auth_test).response[
        "error"
    ] == ("invalid_auth")
    status, body = raw_post(
        emulator.api_url + "auth.test", b"", "application/x-www-form-urlencoded", token=None
    )
    assert (status, body) == (200, {"ok": False, "error": "not_authed"})


def test_the_token_may_also_come_as_a_form_field(emulator: SlackEmulator) -> None:
    form = urllib.parse.urlencode({"token": TOKEN}).encode()
    status, body = raw_post(
        emulator.api_url + "auth.test", form, "application/x-www-form-urlencoded", token=None
    )
    assert status == 200 and body["ok"] is True


def test_post_message_answers_channel_ts_and_the_stored_message(web: WebClient) -> None:
    response = web.chat_postMessage(channel="C_INCIDENT", text="checking *api*", mrkdwn=True)
    assert response["channel"] == "C_INCIDENT"
    message = response["message"]
    assert message["ts"] == response["ts"]
    assert (message["type"], message["text"], message["user"], message["bot_id"]) == (
        "message",
        "checking *api*",
        "U_OPS",
        "B_OPS",
    )
    assert "subtype" not in message  # a bot-token post is not a legacy bot_message


def test_channel_names_resolve_like_ids(web: WebClient) -> None:
    assert web.chat_postMessage(channel="#incident", text="x")["channel"] == "C_INCIDENT"


def test_message_ts_values_are_unique_increasing_slack_timestamps(
    web: WebClient, control: SlackEmulatorClient
) -> None:
    control.set_rate_limits(False)  # 30 posts in a row to one channel: about the stamps, not the pace
    stamps = [web.chat_postMessage(channel="C_INCIDENT", text=str(i))["ts"] for i in range(30)]
    assert len(set(stamps)) == 30
    keys = [tuple(int(part) for part in ts.split(".")) for ts in stamps]
    assert keys == sorted(keys)
    assert all(len(ts.split(".")[1]) == 6 for ts in stamps)


def test_form_and_json_bodies_are_both_accepted(emulator: SlackEmulator) -> None:
    blocks = json.dumps([{"type": "section", "text": {"type": "mrkdwn", "text": "form"}}])
    form = urllib.parse.urlencode({"channel": "C_INCIDENT", "text": "form", "blocks": blocks}).encode()
    _, by_form = raw_post(emulator.api_url + "chat.postMessage", form, "application/x-www-form-urlencoded")
    as_json = json.dumps({"channel": "C_INCIDENT", "text": "json", "blocks": json.loads(blocks)}).encode()
    _, by_json = raw_post(emulator.api_url + "chat.postMessage", as_json, "application/json; charset=utf-8")
    assert by_form["ok"] and by_json["ok"]
    assert by_form["message"]["blocks"] == by_json["message"]["blocks"] == json.loads(blocks)  # type: ignore[index]


def test_json_without_a_charset_gets_slacks_warning(emulator: SlackEmulator) -> None:
    body = json.dumps({"channel": "C_INCIDENT", "text": "x"}).encode()
    _, answer = raw_post(emulator.api_url + "chat.postMessage", body, "application/json")
    assert answer["ok"] is True
    assert answer["warning"] == "missing_charset"
    assert answer["response_metadata"] == {"warnings": ["missing_charset"]}


def test_unknown_and_unjoined_channels_are_refused(web: WebClient) -> None:
    assert (
        api_error(lambda: web.chat_postMessage(channel="C_NOPE", text="x")).response["error"]
        == "channel_not_found"
    )
    assert (
        api_error(lambda: web.chat_postMessage(channel="C_RANDOM", text="x")).response["error"]
        == "not_in_channel"
    )


def test_a_message_needs_text_or_blocks(web: WebClient) -> None:
    with pytest.warns(UserWarning):  # slack_sdk warns client-side too; Slack still answers
        error = api_error(lambda: web.chat_postMessage(channel="C_INCIDENT", text=""))
    assert error.response["error"] == "no_text"


def test_thread_replies_and_broadcasts(web: WebClient, control: SlackEmulatorClient) -> None:
    parent = web.chat_postMessage(channel="C_INCIDENT", text="run card")["ts"]
    reply = web.chat_postMessage(channel="C_INCIDENT", text="step 1", thread_ts=parent)
    broadcast = web.chat_postMessage(
        channel="C_INCIDENT", text="done", thread_ts=parent, reply_broadcast=True
    )
    assert reply["message"]["thread_ts"] == parent and reply["message"]["parent_user_id"] == "U_OPS"
    assert broadcast["message"]["subtype"] == "thread_broadcast"
    assert broadcast["message"]["root"]["ts"] == parent
    thread = web.conversations_replies(channel="C_INCIDENT", ts=parent)["messages"]
    assert [m["text"] for m in thread] == ["run card", "step 1", "done"]
    assert (thread[0]["reply_count"], thread[0]["latest_reply"]) == (2, broadcast["ts"])
    channel_level = [m["text"] for m in control.messages("incident")]
    assert channel_level == ["run card", "done"]  # a broadcast shows in the channel too


def test_replying_to_a_missing_thread_is_thread_not_found(web: WebClient) -> None:
    error = api_error(
        lambda: web.chat_postMessage(channel="C_INCIDENT", text="x", thread_ts="1700000000.000001")
    )
    assert error.response["error"] == "thread_not_found"


def test_update_replaces_content_and_keeps_history(web: WebClient, control: SlackEmulatorClient) -> None:
    ts = web.chat_postMessage(channel="C_INCIDENT", text="pending")["ts"]
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "*approved*"}}]
    response = web.chat_update(channel="C_INCIDENT", ts=ts, text="approved", blocks=blocks)
    assert (response["ts"], response["text"], response["message"]["blocks"]) == (ts, "approved", blocks)
    assert response["message"]["edited"]["user"] == "U_OPS"
    [stored] = control.messages("incident")
    assert stored["text"] == "approved"
    assert [version["text"] for version in stored["history"]] == ["pending"]


def test_update_refuses_missing_and_foreign_messages(web: WebClient, control: SlackEmulatorClient) -> None:
    missing = api_error(lambda: web.chat_update(channel="C_INCIDENT", ts="1700000000.000001", text="x"))
    assert missing.response["error"] == "message_not_found"
    alice = control.post_message("incident", "alice", "hello")["ts"]
    foreign = api_error(lambda: web.chat_update(channel="C_INCIDENT", ts=alice, text="x"))
    assert foreign.response["error"] == "cant_update_message"


def test_ephemeral_messages_are_seen_only_by_their_user(web: WebClient, control: SlackEmulatorClient) -> None:
    response = web.chat_postEphemeral(channel="C_INCIDENT", user="U_ALICE", text="only you")
    assert isinstance(response.data, dict) and set(response.data) == {"ok", "message_ts"}
    assert [m["text"] for m in control.messages("incident", viewer="U_ALICE")] == ["only you"]
    assert control.messages("incident", viewer="U_BOB") == []
    assert control.messages("incident", viewer="U_ALICE")[0]["ephemeral"] is True


def test_ephemeral_to_a_stranger_is_refused(web: WebClient) -> None:
    error = api_error(lambda: web.chat_postEphemeral(channel="C_INCIDENT", user="U_NOBODY", text="x"))
    assert error.response["error"] == "user_not_in_channel"


def test_delete_removes_the_bots_message(web: WebClient, control: SlackEmulatorClient) -> None:
    ts = web.chat_postMessage(channel="C_INCIDENT", text="oops")["ts"]
    assert web.chat_delete(channel="C_INCIDENT", ts=ts)["ts"] == ts
    assert control.messages("incident") == []
    assert (
        api_error(lambda: web.chat_delete(channel="C_INCIDENT", ts=ts)).response["error"]
        == "message_not_found"
    )


def test_reactions_repeat_is_already_reacted(web: WebClient, control: SlackEmulatorClient) -> None:
    ts = control.post_message("incident", "alice", "restart api")["ts"]
    assert web.reactions_add(channel="C_INCIDENT", timestamp=ts, name="eyes")["ok"] is True
    again = api_error(lambda: web.reactions_add(channel="C_INCIDENT", timestamp=ts, name="eyes"))
    assert again.response["error"] == "already_reacted"
    assert control.messages("incident")[0]["reactions"] == [{"name": "eyes", "users": ["U_OPS"], "count": 1}]
    missing = api_error(
        lambda: web.reactions_add(channel="C_INCIDENT", timestamp="1700000000.000001", name="x")
    )
    assert missing.response["error"] == "message_not_found"


def test_conversations_replies_paginates_with_a_cursor(web: WebClient, control: SlackEmulatorClient) -> None:
    control.set_rate_limits(False)  # seven posts in a row to one channel: about the pages
    parent = web.chat_postMessage(channel="C_INCIDENT", text="parent")["ts"]
    for i in range(6):
        web.chat_postMessage(channel="C_INCIDENT", text=f"r{i}", thread_ts=parent)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = web.conversations_replies(channel="C_INCIDENT", ts=parent, limit=3, cursor=cursor)
        pages += 1
        seen += [m["text"] for m in page["messages"]]
        cursor = page["response_metadata"]["next_cursor"]
        assert page["has_more"] is bool(cursor)
        if not cursor:
            break
    assert pages == 3
    assert seen == ["parent", "r0", "r1", "r2", "r3", "r4", "r5"]


def test_conversations_replies_errors(web: WebClient) -> None:
    parent = web.chat_postMessage(channel="C_INCIDENT", text="parent")["ts"]
    bad_cursor = api_error(lambda: web.conversations_replies(channel="C_INCIDENT", ts=parent, cursor="zzz"))
    assert bad_cursor.response["error"] == "invalid_cursor"
    missing = api_error(lambda: web.conversations_replies(channel="C_INCIDENT", ts="1700000000.000001"))
    assert missing.response["error"] == "thread_not_found"


def test_info_methods(web: WebClient) -> None:
    channel = web.conversations_info(channel="C_INCIDENT")["channel"]
    assert (channel["id"], channel["name"], channel["is_member"], channel["is_channel"]) == (
        "C_INCIDENT",
        "incident",
        True,
        True,
    )
    user = web.users_info(user="U_ALICE")["user"]
    assert (user["id"], user["name"], user["is_bot"], user["profile"]["display_name"]) == (
        "U_ALICE",
        "alice",
        False,
        "alice",
    )
    assert web.users_info(user="U_OPS")["user"]["is_bot"] is True
    assert web.usergroups_users_list(usergroup="S_ONCALL")["users"] == ["U_ALICE"]
    assert api_error(lambda: web.users_info(user="U_NOPE")).response["error"] == "user_not_found"
    assert (
        api_error(lambda: web.usergroups_users_list(usergroup="S_NOPE")).response["error"]
        == "no_such_subteam"
    )


def test_assistant_status_shows_until_the_bot_replies(web: WebClient, control: SlackEmulatorClient) -> None:
    ts = control.post_message("incident", "alice", "@ops status?")["ts"]
    assert web.assistant_threads_setStatus(channel_id="C_INCIDENT", thread_ts=ts, status="is thinking...")[
        "ok"
    ]
    assert [(s["thread_ts"], s["status"]) for s in control.statuses()] == [(ts, "is thinking...")]
    assert control.messages("incident")[0]["status"]["status"] == "is thinking..."
    web.chat_postMessage(channel="C_INCIDENT", thread_ts=ts, text="all good")
    assert control.statuses() == []
    error = api_error(lambda: web.assistant_threads_setStatus(channel_id="C_NOPE", thread_ts=ts, status="x"))
    assert error.response["error"] == "channel_not_found"


def test_every_call_is_recorded_with_params_and_time(web: WebClient, control: SlackEmulatorClient) -> None:
    web.chat_postMessage(channel="C_INCIDENT", text="hello")
    api_error(lambda: web.chat_postMessage(channel="C_NOPE", text="x"))
    calls = control.calls("chat.postMessage")
    assert [(c["params"]["channel"], c["ok"], c["error"]) for c in calls] == [
        ("C_INCIDENT", True, None),
        ("C_NOPE", False, "channel_not_found"),
    ]
    assert calls[0]["time"] <= calls[1]["time"]
    assert "token" not in calls[0]["params"]


def test_unknown_methods_are_reported(web: WebClient) -> None:
    assert api_error(lambda: web.api_call("chat.nonsense")).response["error"] == "unknown_method"
