"""OAuth scopes: which scope each Web API method needs, and ``missing_scope`` as Slack answers it.

The emulated app is granted exactly the bot scopes of the app manifest (``manifest.json``:
``WorkspaceConfig.scopes`` defaults to them, ``tests/emulator/slack/test_scopes.py`` keeps the two
equal), so a method the manifest does not cover fails here as it would in a real install.
Scopes per method are those on each method's reference page (docs.slack.dev/reference/methods/...).
A method may accept any of several scopes: ``assistant.threads.setStatus`` takes ``chat:write``
or the older ``assistant:write`` (docs.slack.dev changelog 2026-03-05, "Set status method scope
update"). Methods that need no scope (``auth.test``, ``views.*``, ``chat.getPermalink``) map to ().
A method missing from the table is refused (``missing_scope``, needed ``unknown``): a new method
module must say what it needs (its ``SCOPES``), the emulator never waves a call through.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# method -> the scopes any one of which lets the bot token call it.
METHOD_SCOPES: dict[str, tuple[str, ...]] = {
    "api.test": (),
    "auth.test": (),
    "chat.postMessage": ("chat:write",),
    "chat.update": ("chat:write",),
    "chat.postEphemeral": ("chat:write",),
    "chat.delete": ("chat:write",),
    "chat.getPermalink": (),
    "reactions.add": ("reactions:write",),
    "reactions.remove": ("reactions:write",),
    # conversations.history/replies and users.conversations check the scope of the channel type
    # asked for in their handlers (channels:history, groups:read...); the floor is checked here.
    "conversations.history": ("channels:history", "groups:history", "im:history", "mpim:history"),
    "conversations.replies": ("channels:history", "groups:history", "im:history", "mpim:history"),
    "conversations.info": ("channels:read", "groups:read", "im:read", "mpim:read"),
    "users.conversations": ("channels:read", "groups:read", "im:read", "mpim:read"),
    "users.info": ("users:read",),
    "users.list": ("users:read",),
    "usergroups.list": ("usergroups:read",),
    "usergroups.users.list": ("usergroups:read",),
    "assistant.threads.setStatus": ("chat:write", "assistant:write"),
    "views.open": (),
    "views.update": (),
    "views.push": (),
    "views.publish": (),
    "files.getUploadURLExternal": ("files:write",),
    "files.completeUploadExternal": ("files:write",),
}


def method_scopes(extra: Mapping[str, Sequence[str]] = {}) -> dict[str, tuple[str, ...]]:
    """The table above plus what method modules declare (their ``SCOPES``)."""
    return {**METHOD_SCOPES, **{method: tuple(scopes) for method, scopes in extra.items()}}


def missing_scope(
    method: str, granted: Sequence[str], table: Mapping[str, Sequence[str]]
) -> dict[str, Any] | None:
    """Slack's ``missing_scope`` fields when none of the method's scopes is granted, else ``None``.

    Slack's answer names the scope(s) needed (comma-separated when any of several would do) and
    the token's scopes: ``{"ok": false, "error": "missing_scope", "needed": "chat:write",
    "provided": "users:read,..."}``.
    """
    needed = table.get(method)
    if needed is None:
        return {"needed": "unknown", "provided": ",".join(granted)}
    if needed and not any(scope in granted for scope in needed):
        return {"needed": ",".join(needed), "provided": ",".join(granted)}
    return None
