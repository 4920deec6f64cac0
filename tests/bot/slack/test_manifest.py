"""``manifest.json`` asks for exactly the scopes and events the code uses, and the Procfile runs both processes."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# Web API method (as slack_sdk spells it) -> the bot scope(s) it needs (None: no scope).
SCOPES: dict[str, str | tuple[str, ...] | None] = {
    "chat_postMessage": "chat:write",
    "chat_update": "chat:write",
    "chat_postEphemeral": "chat:write",
    "reactions_add": "reactions:write",
    "usergroups_users_list": "usergroups:read",
    "users_info": "users:read",
    "assistant_threads_setStatus": "chat:write",  # Slack accepts chat:write (assistant:write is being retired)
    # The lost-run check reads threads of public and private channels (bot/slack/delivery/lost_cards.py).
    "conversations_replies": ("channels:history", "groups:history"),
    "conversations_history": ("channels:history", "groups:history"),
    # ... of the channels the bot is in, when CHATOPS_CHANNELS does not name them.
    "users_conversations": ("channels:read", "groups:read"),
    # Whether an incident's channel is private, for the memory's boundary (bot/slack/delivery/
    # channel_facts.py); a DM or group DM it cannot read is treated as private (fails closed).
    "conversations_info": ("channels:read", "groups:read"),
    "views_open": None,
    "views_publish": None,  # the App Home tab (bot/slack/handlers/home.py)
    "auth_test": None,
    # Answers streamed into the thread (bot/slack/delivery/streaming.py).
    "chat_startStream": "chat:write",
    "chat_appendStream": "chat:write",
    "chat_stopStream": "chat:write",
    # An answer too long for a few messages is attached as a file (bot/slack/delivery/answers.py).
    "files_upload_v2": "files:write",
    # A step's link is the run card's permalink; a second Findings message (two jobs posted one
    # each) is deleted (bot/slack/delivery/permalinks.py, findings_message.py).
    "chat_getPermalink": None,
    "chat_delete": "chat:write",
}
# Bolt listener -> the event subscriptions (and their scopes) it needs.
EVENTS: dict[str, dict[str, str | None]] = {
    "app_mention": {"app_mention": "app_mentions:read"},
    "message": {"message.channels": "channels:history", "message.groups": "groups:history"},
    "app_home_opened": {"app_home_opened": None},  # no scope (docs.slack.dev events/app_home_opened)
}


def methods_called() -> set[str]:
    source = "\n".join(p.read_text() for p in (ROOT / "bot" / "slack").rglob("*.py"))
    return set(
        re.findall(
            r"\.(chat_\w+|reactions_\w+|usergroups_\w+|assistant_\w+|views_\w+|auth_test|"
            r"conversations_\w+|users_\w+|files_\w+|team_\w+)\(",
            source,
        )
    )


def listeners() -> set[str]:
    source = (ROOT / "bot" / "slack" / "handlers" / "app.py").read_text()
    return set(re.findall(r'app\.event\("(\w+)"\)', source))


def test_the_manifest_has_exactly_the_scopes_the_code_needs() -> None:
    manifest = json.loads((ROOT / "manifest.json").read_text())
    called = methods_called()
    unknown = called - SCOPES.keys()
    assert not unknown, f"add {unknown} to SCOPES (and its scope to manifest.json)"
    needed: set[str] = set()
    for method in called:
        scope = SCOPES[method]
        needed |= {scope} if isinstance(scope, str) else set(scope or ())
    for listener in listeners():
        needed |= {scope for scope in EVENTS[listener].values() if scope}
    if "register_ops_command(app" in (ROOT / "bot" / "slack" / "handlers" / "app.py").read_text():
        needed.add(
            "commands"
        )  # the /ops slash command (bot/slack/handlers/break_glass.py: break-glass, postmortem)
        assert [c["command"] for c in manifest["features"]["slash_commands"]] == ["/ops"]
    assert sorted(manifest["oauth_config"]["scopes"]["bot"]) == sorted(needed)


def test_the_manifest_subscribes_to_exactly_the_events_the_app_listens_to() -> None:
    manifest = json.loads((ROOT / "manifest.json").read_text())
    expected = {event for listener in listeners() for event in EVENTS[listener]}
    assert set(manifest["settings"]["event_subscriptions"]["bot_events"]) == expected
    assert manifest["settings"]["interactivity"]["is_enabled"] is True
    urls = {
        manifest["settings"]["event_subscriptions"]["request_url"],
        manifest["settings"]["interactivity"]["request_url"],
    }
    assert len(urls) == 1 and urls.pop().endswith("/slack/events")  # Bolt serves both on one path


def test_the_home_tab_is_enabled_and_suggested_prompts_are_not_asked_for() -> None:
    manifest = json.loads((ROOT / "manifest.json").read_text())
    assert manifest["features"]["app_home"]["home_tab_enabled"] is True
    # assistant.threads.setSuggestedPrompts works in assistant threads only (assistant:write and an
    # assistant view); the bot works in channel threads, so neither is requested.
    assert "assistant:write" not in manifest["oauth_config"]["scopes"]["bot"]
    assert "assistant_view" not in manifest["features"]


def test_the_procfile_runs_the_web_process_and_a_worker() -> None:
    lines = (ROOT / "Procfile").read_text().splitlines()
    assert lines == ["web: chatops web", "worker: chatops worker"]
