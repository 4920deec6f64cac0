"""The emulated install has exactly the manifest's bot scopes; a method without its scope fails
as Slack fails it: ``missing_scope`` with ``needed`` and ``provided``."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from emulator.slack import SlackEmulator
from emulator.slack.config import DEFAULT_SCOPES
from emulator.slack.core import METHOD_MODULES, web_api
from emulator.slack.scopes import METHOD_SCOPES, missing_scope
from emulator.slack.state import Workspace
from tests.emulator.slack.receiver import Receiver
from tests.support.emulator_workspace import TOKEN, make_config

ROOT = Path(__file__).resolve().parents[3]


def manifest_scopes() -> list[str]:
    manifest = json.loads((ROOT / "manifest.json").read_text())
    return sorted(manifest["oauth_config"]["scopes"]["bot"])


def test_the_default_install_grants_exactly_the_manifests_bot_scopes() -> None:
    assert sorted(DEFAULT_SCOPES) == manifest_scopes()


def test_auth_test_reports_the_granted_scopes_in_x_oauth_scopes(web: WebClient) -> None:
    response = web.auth_test()
    assert sorted(response.headers["x-oauth-scopes"].split(",")) == manifest_scopes()


def narrow(receiver: Receiver, *scopes: str) -> SlackEmulator:
    return SlackEmulator(make_config(events_url=receiver.url, scopes=scopes))


def error_of(call: object) -> dict[str, object]:
    assert callable(call)
    with pytest.raises(SlackApiError) as info:
        call()
    data = info.value.response.data
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize(
    ("method", "kwargs", "needed"),
    [
        ("chat_postMessage", {"channel": "C_INCIDENT", "text": "hi"}, "chat:write"),
        ("reactions_add", {"channel": "C_INCIDENT", "timestamp": "1.1", "name": "eyes"}, "reactions:write"),
        ("users_info", {"user": "U_ALICE"}, "users:read"),
        ("usergroups_list", {}, "usergroups:read"),
        ("files_getUploadURLExternal", {"filename": "a.txt", "length": 3}, "files:write"),
        (
            "assistant_threads_setStatus",
            {"channel_id": "C_INCIDENT", "thread_ts": "1.1", "status": "x"},
            "chat:write,assistant:write",
        ),
    ],
)
def test_a_method_without_its_scope_answers_missing_scope_naming_needed_and_provided(
    receiver: Receiver, method: str, kwargs: dict[str, object], needed: str
) -> None:
    with narrow(receiver, "channels:read") as slack:
        web = WebClient(token=TOKEN, base_url=slack.api_url)
        error = error_of(lambda: getattr(web, method)(**kwargs))
        assert error == {"ok": False, "error": "missing_scope", "needed": needed, "provided": "channels:read"}
        assert slack.core.ws.messages["C_INCIDENT"] == {}  # nothing was done


def test_set_status_accepts_the_older_assistant_write_scope_too(receiver: Receiver) -> None:
    with narrow(receiver, "assistant:write") as slack:
        web = WebClient(token=TOKEN, base_url=slack.api_url)
        error = error_of(
            lambda: web.assistant_threads_setStatus(channel_id="C_INCIDENT", thread_ts="1.1", status="x")
        )
        assert error["error"] == "invalid_thread_ts"  # past the scope check: the thread is unknown


def test_methods_that_need_no_scope_work_with_none(receiver: Receiver) -> None:
    with narrow(receiver) as slack:
        web = WebClient(token=TOKEN, base_url=slack.api_url)
        assert web.auth_test()["ok"]
        assert web.api_test()["ok"]


def test_every_emulated_method_has_a_scope_entry_and_an_unlisted_module_is_refused() -> None:
    ws = Workspace(make_config())
    api = web_api(ws)  # raises for a handled method without a scope entry
    assert set(api.handlers) <= set(api.scopes)
    rogue = ModuleType("methods_rogue")
    rogue.HANDLERS = {"rogue.method": lambda _ws, _p: None}  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match=r"rogue\.method"):
        web_api(ws, (*METHOD_MODULES, rogue))
    rogue.SCOPES = {"rogue.method": ("chat:write",)}  # type: ignore[attr-defined]
    assert "rogue.method" in web_api(ws, (*METHOD_MODULES, rogue)).handlers


def test_a_method_missing_from_the_table_is_refused_not_waved_through() -> None:
    assert missing_scope("admin.users.remove", DEFAULT_SCOPES, METHOD_SCOPES) == {
        "needed": "unknown",
        "provided": ",".join(DEFAULT_SCOPES),
    }


def test_a_forged_token_never_reaches_the_scope_check(emulator: SlackEmulator) -> None:
    web = WebClient(token="xoxb-forged", base_url=emulator.api_url)
    assert error_of(lambda: web.chat_postMessage(channel="C_INCIDENT", text="x"))["error"] == "invalid_auth"
