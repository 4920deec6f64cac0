"""Who is in the emulated workspace: guests, bots, deactivated and external accounts, groups that change.

The emulator is stricter than Slack, never kinder: a deactivated account can neither post nor
click, nobody posts or clicks in a channel they are not in, and ``users.info`` answers
``user_not_found`` for an ID the workspace does not know.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from emulator.slack import ControlApiError, SlackEmulator, SlackEmulatorClient, UserSpec
from emulator.slack.config import WorkspaceConfig
from tests.emulator.slack.receiver import Receiver
from tests.support.emulator_workspace import TOKEN, make_config

PEOPLE: dict[str, str | UserSpec] = {
    "U_ALICE": "alice",
    "U_GUEST": UserSpec("gail", guest="multi_channel", channels=("C_INCIDENT", "C_RANDOM")),
    "U_SINGLE": UserSpec("sam", guest="single_channel", channels=("C_INCIDENT",)),
    "U_DEPLOY": UserSpec("deploybot", is_bot=True),
    "U_WORKFLOW": UserSpec("workflow", is_app_user=True),
    "U_GONE": UserSpec("gone", deleted=True),
    "U_EXT": UserSpec("erin", team_id="T_PARTNER", channels=("C_INCIDENT",)),
}


@pytest.fixture
def emulator(receiver: Receiver) -> Iterator[SlackEmulator]:
    with SlackEmulator(make_config(events_url=receiver.url, users=PEOPLE)) as slack:
        yield slack


@pytest.fixture
def web(emulator: SlackEmulator) -> WebClient:
    return WebClient(token=TOKEN, base_url=emulator.api_url, timeout=5)


def error_of(web: WebClient, method: str, **params: str) -> str:
    with pytest.raises(SlackApiError) as info:
        web.api_call(method, params=params)
    return str(info.value.response["error"])


def test_users_info_tells_guests_bots_deactivated_and_external_accounts_apart(web: WebClient) -> None:
    def flags(user: str) -> tuple[object, ...]:
        u = web.users_info(user=user)["user"]
        keys = ("is_restricted", "is_ultra_restricted", "is_bot", "is_app_user", "deleted", "team_id")
        return tuple(u[k] for k in keys)

    assert flags("U_ALICE") == (False, False, False, False, False, "T_EMULATOR")
    assert flags("U_GUEST") == (True, False, False, False, False, "T_EMULATOR")
    assert flags("U_SINGLE") == (True, True, False, False, False, "T_EMULATOR")
    assert flags("U_DEPLOY") == (False, False, True, False, False, "T_EMULATOR")
    assert flags("U_WORKFLOW") == (False, False, False, True, False, "T_EMULATOR")
    assert flags("U_GONE") == (False, False, False, False, True, "T_EMULATOR")
    assert flags("U_EXT") == (False, False, False, False, False, "T_PARTNER")
    assert web.users_info(user="U_DEPLOY")["user"]["profile"]["bot_id"].startswith("B")
    for unknown in ("U_NOBODY", "B_OPS", "", "USLACKBOT"):
        assert error_of(web, "users.info", user=unknown) == "user_not_found"


def test_a_single_channel_guest_is_in_exactly_one_channel() -> None:
    with pytest.raises(ValueError, match="exactly one channel"):
        UserSpec("sam", guest="single_channel")
    with pytest.raises(ValueError, match="exactly one channel"):
        UserSpec("sam", guest="single_channel", channels=("C_A", "C_B"))


def test_people_post_and_click_only_where_they_are_and_never_when_deactivated(
    web: WebClient, control: SlackEmulatorClient
) -> None:
    members = {u["id"] for u in control.state()["users"]}
    assert {"U_GUEST", "U_SINGLE", "U_GONE", "U_EXT"} <= members
    control.post_message("#incident", "sam", "hello from the one channel I am in")
    for user, channel, error in (
        ("sam", "#random", "not_in_channel"),
        ("erin", "#random", "not_in_channel"),
        ("gone", "#incident", "account_inactive"),
        ("deploybot", "#incident", "user_not_found"),
    ):
        with pytest.raises(ControlApiError) as info:
            control.post_message(channel, user, "hi")
        assert info.value.body["error"] == error
    button = {"type": "button", "action_id": "go", "text": {"type": "plain_text", "text": "Go"}}
    card = web.chat_postMessage(
        channel="C_INCIDENT", text="card", blocks=[{"type": "actions", "elements": [button]}]
    )
    assert control.click(str(card["ts"]), "erin", action_id="go")["payload"]["user"]["team_id"] == "T_PARTNER"
    with pytest.raises(ControlApiError) as refused:
        control.click(str(card["ts"]), "gone", action_id="go")
    assert refused.value.body["error"] == "account_inactive"


def test_an_external_users_message_names_their_team(web: WebClient, control: SlackEmulatorClient) -> None:
    ts = control.post_message("#incident", "erin", "from the partner org")["ts"]
    [message] = [m for m in control.messages("incident") if m["ts"] == ts]
    assert (message["team"], message["user_team"], message["source_team"]) == (
        "T_PARTNER",
        "T_PARTNER",
        "T_EMULATOR",
    )


def test_a_user_group_can_change_and_its_lookup_can_fail(
    web: WebClient, control: SlackEmulatorClient
) -> None:
    assert web.usergroups_users_list(usergroup="S_ONCALL")["users"] == ["U_ALICE"]
    control.set_usergroup_members("S_ONCALL", ["U_GUEST"])
    assert web.usergroups_users_list(usergroup="S_ONCALL")["users"] == ["U_GUEST"]
    control.inject_fault("usergroups.users.list", kind="error", error="fatal_error", count=2)
    assert error_of(web, "usergroups.users.list", usergroup="S_ONCALL") == "fatal_error"
    assert error_of(web, "usergroups.users.list", usergroup="S_ONCALL") == "fatal_error"
    assert web.usergroups_users_list(usergroup="S_ONCALL")["users"] == ["U_GUEST"]
    for group, users, error in (
        ("S_NOPE", ["U_ALICE"], "no_such_subteam"),
        ("S_ONCALL", ["U_X"], "user_not_found"),
    ):
        with pytest.raises(ControlApiError) as info:
            control.set_usergroup_members(group, users)
        assert error in info.value.body["error"]


def test_lookups_need_their_scopes(receiver: Receiver) -> None:
    config = make_config(events_url=receiver.url, scopes=("chat:write",))
    with SlackEmulator(config) as slack:
        web = WebClient(token=TOKEN, base_url=slack.api_url, timeout=5)
        assert error_of(web, "users.info", user="U_ALICE") == "missing_scope"
        assert error_of(web, "usergroups.users.list", usergroup="S_ONCALL") == "missing_scope"
        assert error_of(web, "conversations.history", channel="C_INCIDENT") == "missing_scope"
        assert error_of(web, "conversations.replies", channel="C_INCIDENT", ts="1.000001") == "missing_scope"
        assert error_of(web, "users.conversations") == "missing_scope"


def test_users_conversations_lists_the_bots_channels_with_the_scope_of_each_type(receiver: Receiver) -> None:
    public_only = make_config(events_url=receiver.url, scopes=("channels:read",))
    with SlackEmulator(public_only) as slack:
        web = WebClient(token=TOKEN, base_url=slack.api_url, timeout=5)
        listed = web.users_conversations(types="public_channel", limit=1)
        assert [c["id"] for c in listed["channels"]] == ["C_INCIDENT"]  # the bot is in #incident only
        assert listed["response_metadata"]["next_cursor"] == ""
        assert error_of(web, "users.conversations", types="public_channel,private_channel") == "missing_scope"
        assert error_of(web, "users.conversations", types="rooms") == "invalid_types"


def test_private_channels_are_seen_only_where_the_bot_is_a_member_too(receiver: Receiver) -> None:
    config = make_config(
        events_url=receiver.url,
        channels={"C_INCIDENT": "incident", "C_SECRET": "secret", "C_HIDDEN": "hidden"},
        bot_channels=("C_INCIDENT", "C_SECRET"),
        private_channels={"C_SECRET": ("U_ALICE",), "C_HIDDEN": ("U_ALICE", "U_BOB")},
    )
    with SlackEmulator(config) as slack:
        web = WebClient(token=TOKEN, base_url=slack.api_url, timeout=5)
        mine = web.users_conversations(types="public_channel,private_channel")["channels"]
        assert [(c["id"], c["is_private"]) for c in mine] == [("C_INCIDENT", False), ("C_SECRET", True)]
        assert all("is_member" not in c for c in mine)  # Slack omits it in this method
        # Another person's private channels: only those the bot shares (not C_HIDDEN).
        alice = web.users_conversations(user="U_ALICE", types="private_channel")["channels"]
        assert [c["id"] for c in alice] == ["C_SECRET"]
        assert web.users_conversations(user="U_BOB", types="private_channel")["channels"] == []
        bob = web.users_conversations(user="U_BOB", types="public_channel")["channels"]
        assert [c["id"] for c in bob] == ["C_INCIDENT"]  # plain members are in public channels only
        assert web.conversations_info(channel="C_SECRET")["channel"]["is_private"] is True
        assert error_of(web, "conversations.info", channel="C_HIDDEN") == "channel_not_found"
        assert error_of(web, "chat.postMessage", channel="C_HIDDEN", text="x") == "channel_not_found"
        with pytest.raises(ControlApiError) as info:  # bob cannot post where he was not invited
            SlackEmulatorClient(slack.url).post_message("C_SECRET", "U_BOB", "hello")
        assert "not_in_channel" in str(info.value.body)
    with pytest.raises(ValueError, match="not in channels"):
        WorkspaceConfig(private_channels={"C_NAMELESS": ("U_ALICE",)})
