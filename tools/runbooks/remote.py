"""``RunbookFetcher``: an alert's ``runbook_url`` read through the egress policy, and only so.

The request is ``tools.http_client.request`` (the one bounded HTTP client of the tools): the
host must be allowed by ``CHATOPS_EGRESS_ALLOW`` (an unlisted host is refused, never put to an
approval: a runbook is not worth a card), every address it resolves to passes the deny rules,
every redirect hop is checked again, and the whole exchange ends at one deadline. The body is
read up to ``max_bytes``; HTML is reduced to text (``html_text``); Markdown and plain text are
kept. Answers are cached for ``ttl_seconds`` (failures for a shorter while, so a dead wiki is not
asked again by every alert), in the process: a worker's work horses each keep their own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from tools import http_client
from tools.egress import EgressPolicy
from tools.errors import RunbookFormatError, RunbookUnavailable, ToolCallError
from tools.runbooks.document import Runbook, parse_runbook
from tools.runbooks.html_text import html_to_text

TTL_SECONDS = 300.0
FAILURE_TTL_SECONDS = 30.0
MAX_BYTES = 256 * 1024
TIMEOUT_SECONDS = 5.0
MAX_URL_CHARS = 2048
_CACHE_ENTRIES = 256


@dataclass(frozen=True)
class _Entry:
    expires: float
    runbook: Runbook | None
    problem: str = ""


class RunbookFetcher:
    def __init__(
        self,
        egress: EgressPolicy,
        *,
        ttl_seconds: float = TTL_SECONDS,
        max_bytes: int = MAX_BYTES,
        timeout: float = TIMEOUT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._egress = egress
        self._ttl = ttl_seconds
        self._max_bytes = max_bytes
        self._timeout = timeout
        self._clock = clock
        self._cache: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def fetch(self, url: str) -> Runbook:
        """The runbook at ``url`` (its id is the URL); ``RunbookUnavailable`` says why not."""
        url = url.strip()
        if len(url) > MAX_URL_CHARS or not url.lower().startswith(("http://", "https://")):
            raise RunbookUnavailable(f"not an http(s) runbook URL: {url[:200]!r}")
        now = self._clock()
        with self._lock:
            entry = self._cache.get(url)
        if entry is None or entry.expires <= now:
            entry = self._get(url, now)
            with self._lock:
                if len(self._cache) >= _CACHE_ENTRIES:
                    self._cache.pop(next(iter(self._cache)))
                self._cache[url] = entry
        if entry.runbook is None:
            raise RunbookUnavailable(entry.problem)
        return entry.runbook

    def _get(self, url: str, now: float) -> _Entry:
        try:
            response = http_client.request(
                "GET",
                url,
                timeout=self._timeout,
                egress=self._egress,
                headers={"Accept": "text/markdown, text/plain, text/html;q=0.9"},
                follow_redirects=True,
                max_body_bytes=self._max_bytes,
            )
        except ToolCallError as exc:  # EgressRefusedError among them: not cached for long either
            return _Entry(now + FAILURE_TTL_SECONDS, None, f"runbook URL refused: {exc}")
        except httpx.HTTPError as exc:
            reason = http_client.describe_http_error(exc, self._timeout)
            return _Entry(now + FAILURE_TTL_SECONDS, None, f"runbook URL failed: {reason}")
        if response.status >= 400:
            return _Entry(now + FAILURE_TTL_SECONDS, None, f"runbook URL answered {response.status}")
        body = response.body
        title = ""
        if "<html" in body[:2048].lower() or "<!doctype html" in body[:2048].lower():
            title, body = html_to_text(body)
        if response.truncated:
            body += f"\n\n[truncated at {self._max_bytes // 1024} KiB]"
        try:
            runbook = parse_runbook(url, body, default_title=title or url)
        except RunbookFormatError:  # a page whose first line is '---' and no front matter
            runbook = parse_runbook(url, body.split("\n", 1)[-1], default_title=title or url)
        return _Entry(now + self._ttl, runbook)
