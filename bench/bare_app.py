"""The comparison of the ingress benchmark: a bare Bolt app whose handler does nothing, on chatops's server.

``python -m bench.bare_app`` serves it with ``bot.web.server.serve_http`` (the same server as
``chatops web``: ``WEB_WORKERS`` processes x ``WEB_THREADS`` threads, keep-alive, access log)
and the same Bolt options (signature verification, ``process_before_response``, an
``authorize`` function instead of ``auth.test``). Its ``app_mention`` listener only acks.
"""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, App
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_bolt.authorization import AuthorizeResult

from bot.settings import Settings
from bot.web.paths import EVENTS_PATH
from bot.web.server import serve_http


def build_bare_app(settings: Settings) -> SlackRequestHandler:
    def authorize(**kwargs: Any) -> AuthorizeResult:
        return AuthorizeResult(
            enterprise_id=None,
            team_id=kwargs.get("team_id"),
            bot_user_id="U_OPS",
            bot_id="B_OPS",
            bot_token=settings.slack_bot_token,
        )

    app = App(
        name="bare",
        signing_secret=settings.slack_signing_secret,
        authorize=authorize,
        process_before_response=True,
        token_verification_enabled=False,
    )

    @app.event("app_mention")
    def mention(ack: Ack) -> None:
        ack()

    return SlackRequestHandler(app, path=EVENTS_PATH)


def main() -> int:
    return serve_http(Settings(), build_bare_app)


if __name__ == "__main__":
    raise SystemExit(main())
