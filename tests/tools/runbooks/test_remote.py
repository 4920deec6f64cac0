"""An alert's ``runbook_url``: read through the egress policy from a real local HTTP server; a host
the policy does not list is never asked, not even by a redirect from one it lists."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.listeners import CountingServer, counting_server
from tools.egress import EgressPolicy
from tools.runbooks import RunbookFetcher, RunbookLibrary, RunbookUnavailable

PAGE = """<!doctype html><html><head><title>Disk full | Wiki</title><style>p{}</style>
<script>alert('x')</script></head><body><h1>Disk full</h1><p>First check <a href="http://x">df</a>.</p>
<h2>Fix</h2><ul><li>clean old logs</li><li>grow the volume</li></ul></body></html>"""


@pytest.fixture
def sites() -> Iterator[tuple[CountingServer, CountingServer]]:
    with counting_server() as allowed, counting_server() as refused:
        yield allowed, refused


def test_an_allowed_host_is_fetched_reduced_to_text_and_cached(
    sites: tuple[CountingServer, CountingServer],
) -> None:
    allowed, _ = sites
    allowed.pages["/disk"] = ("text/html", PAGE.encode())
    now = [0.0]
    fetcher = RunbookFetcher(
        EgressPolicy.parse([f"127.0.0.1:{allowed.port}"]), ttl_seconds=60, clock=lambda: now[0]
    )
    runbook = fetcher.fetch(f"http://127.0.0.1:{allowed.port}/disk")
    assert runbook.title == "Disk full" and [h.text for h in runbook.headings] == ["Disk full", "Fix"]
    assert (
        "- clean old logs" in runbook.body and "alert(" not in runbook.body and "http://x" not in runbook.body
    )
    assert runbook.id == f"http://127.0.0.1:{allowed.port}/disk"
    fetcher.fetch(f"http://127.0.0.1:{allowed.port}/disk")
    assert allowed.paths == ["/disk"]  # cached
    now[0] = 61
    fetcher.fetch(f"http://127.0.0.1:{allowed.port}/disk")
    assert allowed.paths == ["/disk", "/disk"]  # the TTL passed
    library = RunbookLibrary(None, fetcher)
    found = library.for_alert("DiskFull", {}, runbook_url=f"http://127.0.0.1:{allowed.port}/disk")
    assert found is not None and found.title == "Disk full" and "- Fix" in found.outline


def test_a_refused_host_is_never_asked_even_through_a_redirect(
    sites: tuple[CountingServer, CountingServer],
) -> None:
    allowed, refused = sites
    fetcher = RunbookFetcher(EgressPolicy.parse([f"127.0.0.1:{allowed.port}"]))
    with pytest.raises(RunbookUnavailable, match="refused"):
        fetcher.fetch(f"http://127.0.0.1:{refused.port}/disk")
    with pytest.raises(RunbookUnavailable, match="refused"):
        fetcher.fetch(f"http://127.0.0.1:{allowed.port}/redirect?to=http://127.0.0.1:{refused.port}/disk")
    with pytest.raises(RunbookUnavailable):
        fetcher.fetch("file:///etc/passwd")
    assert refused.connections == 0 and len(allowed.paths) == 1
    assert (
        RunbookLibrary(None, fetcher).for_alert(
            "DiskFull", {}, runbook_url=f"http://127.0.0.1:{refused.port}/disk"
        )
        is None
    )


def test_a_big_page_is_cut_at_the_cap(sites: tuple[CountingServer, CountingServer]) -> None:
    allowed, _ = sites
    allowed.pages["/big"] = ("text/markdown", b"# Big\n" + b"x" * 100_000)
    fetcher = RunbookFetcher(EgressPolicy.parse([f"127.0.0.1:{allowed.port}"]), max_bytes=4096)
    runbook = fetcher.fetch(f"http://127.0.0.1:{allowed.port}/big")
    assert len(runbook.body) < 4200 and "[truncated at 4 KiB]" in runbook.body
