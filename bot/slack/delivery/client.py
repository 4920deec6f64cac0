"""The Slack ``WebClient`` every process uses: the configured base URL and retry handlers.

Slack answers 429 with ``Retry-After`` when a method's rate tier is exceeded, and occasionally
5xx or a reset connection. The worker must not lose an answer to either, so every client
retries them with slack_sdk's own handlers (the 5xx one widened from 500/503 to every 5xx).
A retried ``chat.postMessage`` after a 5xx or a read timeout can, rarely, post twice (Slack may
have stored the first); a duplicated line in a thread is the lesser evil next to a lost answer.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from http.client import RemoteDisconnected
from typing import Any
from urllib.error import URLError

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
    ServerErrorRetryHandler,
)
from slack_sdk.http_retry.handler import RetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web import SlackResponse

from bot.keys import Keys
from bot.observability.run_metrics import slack_error_counter
from bot.redis_connection import RedisTarget
from bot.settings import Settings

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 15  # seconds per HTTP attempt
# slack_sdk's connection handler retries URLError, ConnectionResetError and RemoteDisconnected
# only; a read timeout (Slack accepted the connection and did not answer in time) raises
# TimeoutError (socket.timeout) from the response read, and is worth another try too.
CONNECTION_ERRORS: list[type[Exception]] = [URLError, ConnectionResetError, RemoteDisconnected, TimeoutError]


class AnyServerErrorRetryHandler(ServerErrorRetryHandler):
    """``ServerErrorRetryHandler`` for every 5xx (Slack's edge also answers 502 and 504)."""

    def _can_retry(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        return response is not None and 500 <= response.status_code < 600


def retry_handlers(*, rate_limit_retries: int = 4, error_retries: int = 3) -> list[RetryHandler]:
    """Rate limits (honouring ``Retry-After``), server errors and connection errors.

    slack_sdk shares one attempt counter between handlers, so each ``max_retry_count`` is a cap
    on the total attempts at which that handler may still retry.
    """
    return [
        RateLimitErrorRetryHandler(max_retry_count=rate_limit_retries),
        AnyServerErrorRetryHandler(max_retry_count=error_retries),
        ConnectionErrorRetryHandler(max_retry_count=error_retries, error_types=CONNECTION_ERRORS),
    ]


def without_rate_limit_retries(client: WebClient) -> WebClient:
    """``client`` answering a 429 at once instead of sleeping out its ``Retry-After`` in the call:
    for the background sender (``bot.slack.delivery.sender``), which waits without holding a thread and
    sends only the newest state when the wait is over. Its other retries stay."""
    quick = copy.copy(client)
    quick.retry_handlers = [h for h in client.retry_handlers if not isinstance(h, RateLimitErrorRetryHandler)]
    return quick


def api_base_url(url: str) -> str:
    """``SLACK_API_URL`` with the trailing slash slack_sdk needs to join method names."""
    return url if url.endswith("/") else url + "/"


class MeteredWebClient(WebClient):
    """A ``WebClient`` that counts failed calls (after slack_sdk's retries) by method and error code."""

    def __init__(self, *args: Any, on_error: Callable[[str, str], None] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.on_error = on_error

    def api_call(self, api_method: str, **kwargs: Any) -> SlackResponse:
        try:
            return super().api_call(api_method, **kwargs)
        except SlackApiError as error:
            code = error.response.get("error") if error.response is not None else None
            self._count(api_method, str(code or f"http_{getattr(error.response, 'status_code', 0)}"))
            raise
        except OSError:  # connection refused, timeouts (urllib's errors are OSErrors)
            self._count(api_method, "connection")
            raise

    def _count(self, method: str, error: str) -> None:
        if self.on_error is not None:
            try:
                self.on_error(method, error)
            except Exception:  # counting must never hide the Slack error itself
                log.debug("counting a Slack error failed", exc_info=True)


def make_client(
    settings: Settings, *, token: str | None = None, timeout: int = DEFAULT_TIMEOUT, retries: bool = True
) -> WebClient:
    """A ``WebClient`` for ``SLACK_API_URL`` with the bot token (or ``token``) and retry handlers.

    ``retries=False`` is for calls on a latency budget (the lookup of the bot's identity while
    Slack waits for an ack): there a failure is cheaper than a long wait.
    """
    return MeteredWebClient(
        token=(settings.slack_bot_token if token is None else token) or None,
        base_url=api_base_url(settings.slack_api_url),
        timeout=timeout,
        retry_handlers=retry_handlers() if retries else [],
        on_error=slack_error_counter(
            RedisTarget.from_settings(settings),
            Keys(settings.chatops_redis_prefix),
            settings.chatops_metrics_enabled,
        ),
    )
