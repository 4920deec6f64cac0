"""``SlackEmulatorClient``: the control API from Python, for tests and demo scripts."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ControlApiError(RuntimeError):
    """The control API refused a request; ``status`` and ``body`` say why."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"control API answered {status}: {body}")
        self.status = status
        self.body = body


def settled(message: dict[str, Any]) -> bool:
    """Whether ``message`` (as the control API shows it) is as it will stay: posted, or a stream no
    longer added to (``chat.stopStream`` completed it, or Slack closed it idle). A message still
    ``streaming`` shows what came so far: more text, tasks and its final blocks may follow."""
    stream = message.get("stream")
    return not stream or stream.get("state") != "streaming"


class SlackEmulatorClient:
    """Talks to a running emulator's ``/control`` API (in this process or another)."""

    def __init__(self, base_url: str, timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    def _request(self, verb: str, path: str, body: dict[str, Any] | None = None, **query: Any) -> Any:
        args = {k: v for k, v in query.items() if v is not None}
        url = f"{self.base_url}/control{path}" + (f"?{urllib.parse.urlencode(args)}" if args else "")
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            url, data=data, method=verb, headers={"Content-Type": "application/json"}
        )
        try:
            with _OPENER.open(request, timeout=self.timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            raise ControlApiError(exc.code, json.loads(raw) if raw else None) from None

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /control{path}`` with a JSON ``body``; the JSON object answered."""
        result: dict[str, Any] = self._request("POST", path, body)
        return result

    # --- acting --------------------------------------------------------------------------------

    def post_message(
        self, channel: str, user: str, text: str, thread_ts: str | None = None, reply_broadcast: bool = False
    ) -> dict[str, Any]:
        """Post as ``user``; returns ``ts``, ``text`` (with mentions encoded) and ``event_ids``."""
        body = {
            "channel": channel,
            "user": user,
            "text": text,
            "thread_ts": thread_ts,
            "reply_broadcast": reply_broadcast,
        }
        return self._post("/messages", body)

    def click(
        self,
        message_ts: str,
        user: str,
        action_id: str | None = None,
        value: str | None = None,
        channel: str | None = None,
    ) -> dict[str, Any]:
        """Click a button (found by ``action_id`` and/or ``value``); returns the bot's HTTP outcome."""
        body = {
            "message_ts": message_ts,
            "user": user,
            "action_id": action_id,
            "value": value,
            "channel": channel,
        }
        return self._post("/actions", body)

    def command(self, user: str, channel: str, command: str, text: str = "") -> dict[str, Any]:
        """Run a slash command as ``user`` in ``channel``; returns the bot's answer (``answer``)."""
        return self._post("/commands", {"user": user, "channel": channel, "command": command, "text": text})

    def submit_view(self, view_id: str, values: dict[str, Any], user: str | None = None) -> dict[str, Any]:
        """Submit a modal with ``{block_id: {action_id: value}}`` (or ``{action_id: value}``)."""
        return self._post(f"/views/{view_id}/submit", {"values": values, "user": user})

    def close_view(self, view_id: str, user: str | None = None) -> dict[str, Any]:
        """Cancel a modal."""
        return self._post(f"/views/{view_id}/close", {"user": user})

    def inject_fault(
        self,
        method: str,
        kind: str = "ratelimited",
        count: int = 1,
        retry_after: int = 1,
        status: int = 500,
        error: str | None = None,
        delay: float = 0.0,
    ) -> dict[str, Any]:
        """Make the next ``count`` calls of ``method`` fail: ``ratelimited`` (429), ``http_error``,
        ``error``, or ``slow`` (done, but answered ``delay`` seconds late: a client's read timeout)."""
        body: dict[str, Any] = {"method": method, "kind": kind, "count": count, "retry_after": retry_after}
        body.update(status=status, delay=delay)
        if error is not None:
            body["error"] = error
        return self._post("/faults", body)

    def set_usergroup_members(self, group: str, users: list[str]) -> dict[str, Any]:
        """Replace the members of a user group (``usergroups.users.list`` answers them from now on)."""
        return self._post(f"/usergroups/{group}", {"users": users})

    def faults(self) -> list[dict[str, Any]]:
        """Faults still armed, with the calls ``remaining`` for each."""
        result: list[dict[str, Any]] = self._request("GET", "/faults")["faults"]
        return result

    def clear_faults(self) -> None:
        """Disarm every fault."""
        self._request("DELETE", "/faults")

    def verify_url(self) -> dict[str, Any]:
        """Send Slack's ``url_verification`` challenge to the events URL; ``verified`` if it was echoed."""
        return self._post("/url_verification", {})

    def reset(self) -> None:
        """Forget messages, modals, calls, deliveries and faults."""
        self._request("POST", "/reset", {})

    def set_events_url(self, events_url: str | None, interactivity_url: str | None = None) -> None:
        """Point event (and interactivity) delivery at the bot."""
        self._request("POST", "/config", {"events_url": events_url, "interactivity_url": interactivity_url})

    def set_rate_limits(self, enabled: bool) -> None:
        """Turn Slack's rate limits on or off (on by default; off only for a test that posts in
        bulk on purpose and measures something else). Either way the budgets start full."""
        self._request("POST", "/config", {"rate_limits": enabled})

    def post_as_bot(
        self,
        channel: str,
        bot_id: str,
        text: str,
        *,
        thread_ts: str | None = None,
        classic: bool = True,
        **extra: str,
    ) -> dict[str, Any]:
        """Another app posts (``bot_id``, ``subtype: bot_message`` when ``classic``): ts and event IDs."""
        body = {
            "channel": channel,
            "bot_id": bot_id,
            "text": text,
            "thread_ts": thread_ts,
            "classic": classic,
        }
        return self._post("/bot_messages", {**body, **extra})

    def send_app_rate_limited(self, minute_rate_limited: int | None = None) -> dict[str, Any]:
        """Send the signed ``app_rate_limited`` callback; ``status`` is what the app answered."""
        return self._post("/app_rate_limited", {"minute_rate_limited": minute_rate_limited})

    def files(self) -> list[dict[str, Any]]:
        """Files shared through ``files.completeUploadExternal``."""
        found: list[dict[str, Any]] = self._request("GET", "/files")["files"]
        return found

    # --- reading -------------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """Team, bot, users, channels, user groups and delivery URLs."""
        result: dict[str, Any] = self._request("GET", "/state")
        return result

    def messages(self, channel: str, viewer: str | None = None) -> list[dict[str, Any]]:
        """Channel-level messages, oldest first, each with ``replies``, ``history`` and ``status``."""
        path = f"/channels/{urllib.parse.quote(channel, safe='')}/messages"
        result: list[dict[str, Any]] = self._request("GET", path, viewer=viewer)["messages"]
        return result

    def thread(self, channel: str, ts: str, viewer: str | None = None) -> list[dict[str, Any]]:
        """A thread: parent first, then replies."""
        path = f"/channels/{urllib.parse.quote(channel, safe='')}/threads/{ts}"
        result: list[dict[str, Any]] = self._request("GET", path, viewer=viewer)["messages"]
        return result

    def views(self, user: str | None = None) -> list[dict[str, Any]]:
        """Open modals (each with ``user`` and ``errors``)."""
        result: list[dict[str, Any]] = self._request("GET", "/views", user=user)["views"]
        return result

    def open_home(self, user: str) -> dict[str, Any]:
        """``user`` opens the app's Home tab: Slack sends ``app_home_opened`` to the bot."""
        return self._post(f"/home/{user}", {})

    def home(self, user: str) -> dict[str, Any] | None:
        """The Home view published for ``user`` (``None`` before the app published one)."""
        view: dict[str, Any] | None = self._request("GET", f"/home/{user}")["view"]
        return view

    def calls(self, method: str | None = None) -> list[dict[str, Any]]:
        """Recorded Web API calls: ``method``, ``params``, ``time``, ``status``, ``ok``, ``error``."""
        result: list[dict[str, Any]] = self._request("GET", "/calls", method=method)["calls"]
        return result

    def deliveries(self, event_id: str | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        """Delivery attempts: ``event_id``, ``retry_num``, ``retry_reason``, ``status``, ``outcome``."""
        result: list[dict[str, Any]] = self._request("GET", "/deliveries", event_id=event_id, kind=kind)[
            "deliveries"
        ]
        return result

    def press(self, button: str, user: str) -> str:
        """Press a page button (``emulator.slack.page_buttons``) as ``user``; what it says."""
        return str(self._post(f"/page_buttons/{button}", {"user": user})["text"])

    def statuses(self) -> list[dict[str, Any]]:
        """Assistant statuses shown now."""
        result: list[dict[str, Any]] = self._request("GET", "/statuses")["statuses"]
        return result

    # --- waiting -------------------------------------------------------------------------------

    def wait_for(self, probe: Callable[[], T | None], timeout: float = 5.0, interval: float = 0.05) -> T:
        """Poll ``probe`` until it returns something truthy; TimeoutError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            value = probe()
            if value:
                return value
            if time.monotonic() >= deadline:
                raise TimeoutError(f"nothing after {timeout}s")
            time.sleep(interval)

    def wait_for_reply(
        self, channel: str, thread_ts: str, predicate: Callable[[dict[str, Any]], bool], timeout: float = 5.0
    ) -> dict[str, Any]:
        """The first reply in a thread matching ``predicate``, waiting for it to appear and to be
        ``settled``: a reply the bot still streams is what came so far, not its answer yet."""

        def probe() -> dict[str, Any] | None:
            return next((m for m in self.thread(channel, thread_ts)[1:] if settled(m) and predicate(m)), None)

        return self.wait_for(probe, timeout)
