"""The App Home tab: ``views.publish`` (Web API), ``app_home_opened`` (Events API) and its control routes.

A person opening the app's Home tab makes Slack send ``app_home_opened`` (``tab: home``, the
person's ``user``, the app's DM ``channel``, and the view published before, if any); the app
answers with ``views.publish(user_id, view)``, which replaces that person's Home view. Each person
has their own Home view: one published for U_BOB is never shown to U_ALICE.

Control routes (the page and tests): ``POST /control/home/{user}`` opens the tab as that person
(delivers the signed event), ``GET /control/home/{user}`` reads what is published for them.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from emulator.slack.blocks import block_errors
from emulator.slack.events import envelope
from emulator.slack.model import View
from emulator.slack.state import Workspace
from emulator.slack.webapi import ApiResult, Handler, Params, SlackError

if TYPE_CHECKING:
    from emulator.slack.control import Control

MAX_HOME_BLOCKS = 100


def home_views(ws: Workspace) -> dict[str, View]:
    """user ID -> that person's published Home view (kept on the workspace, emptied by a reset)."""
    return ws.home_views


def _person(ws: Workspace, user_id: str) -> str:
    user = ws.users.get(user_id)
    if user is None or user.is_bot:
        raise SlackError("user_not_found")
    return user.id


def views_publish(ws: Workspace, p: Params) -> ApiResult:
    """``views.publish``: ``user_id``'s Home tab becomes ``view`` (``type: home``); a stale ``hash`` is refused."""
    user = _person(ws, p.required("user_id"))
    view = p.json("view")
    if not isinstance(view, dict) or view.get("type") != "home":
        raise SlackError(
            "invalid_arguments", response_metadata={"messages": ["[ERROR] view.type must be home"]}
        )
    reasons = block_errors(view.get("blocks") or [], limit=MAX_HOME_BLOCKS, root="/view/blocks")
    if reasons:
        raise SlackError(
            "invalid_arguments", response_metadata={"messages": [f"[ERROR] {r}" for r in reasons]}
        )
    views = home_views(ws)
    current = views.get(user)
    if current is not None and p.text("hash") and p.text("hash") != current.hash:
        raise SlackError("hash_conflict")
    published = ws.new_view(user, view, current.id if current is not None else "", modal=False)
    views[user] = published
    ws.publish({"type": "home", "user": user})
    return ApiResult({"ok": True, "view": published.to_slack()})


HANDLERS: dict[str, Handler] = {"views.publish": views_publish}


def home_opened_event(ws: Workspace, user: str) -> dict[str, Any]:
    """The ``app_home_opened`` event Slack sends when ``user`` opens the Home tab."""
    event: dict[str, Any] = {
        "type": "app_home_opened",
        "user": user,
        "channel": "D" + user.lstrip("UW")[:10].ljust(8, "0"),
        "tab": "home",
        "event_ts": f"{time.time():.6f}",
    }
    current = home_views(ws).get(user)
    if current is not None:
        event["view"] = current.to_slack()
    return envelope(ws, event)


def open_home(control: Control, params: dict[str, str], _body: dict[str, Any], _a: dict[str, str]) -> Any:
    """A person opens the Home tab: the signed event goes to the bot (in the background)."""
    from emulator.slack.core import ControlError

    ws = control.ws
    with ws.lock:
        user = ws.user_ref(params["user"])
        if user is None or user.is_bot:
            raise ControlError(404, "user_not_found")
        item = home_opened_event(ws, user.id)
    control.core.deliverer.deliver_event(item)
    return {"ok": True, "event_id": item["event_id"]}


def read_home(control: Control, params: dict[str, str], _body: dict[str, Any], _a: dict[str, str]) -> Any:
    """What ``user``'s Home tab shows (``view: null`` before the app published one)."""
    ws = control.ws
    with ws.lock:
        user = ws.user_ref(params["user"])
        if user is None:
            from emulator.slack.core import ControlError

            raise ControlError(404, "user_not_found")
        view = home_views(ws).get(user.id)
        return {"ok": True, "user": user.id, "view": view.to_slack() if view is not None else None}
