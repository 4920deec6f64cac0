"""``RunbookLibrary``: the folder's index and the ``runbook_url`` fetcher together, as the worker
holds them: what an alert's run is told first, and what the model's tools read
(``tools.runbooks.tools.runbook_tools(library)``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from tools.errors import RunbookUnavailable
from tools.runbooks.document import Runbook
from tools.runbooks.index import RunbookIndex
from tools.runbooks.remote import RunbookFetcher

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AlertRunbook:
    """The runbook an alert's run starts from: its title (shown on the alert's root), id and outline."""

    title: str
    id: str
    outline: str


class RunbookLibrary:
    def __init__(self, index: RunbookIndex | None = None, fetcher: RunbookFetcher | None = None) -> None:
        self.index = index
        self.fetcher = fetcher

    def for_alert(
        self, alertname: str, labels: Mapping[str, str], *, target: str = "", runbook_url: str = ""
    ) -> AlertRunbook | None:
        """The folder's best runbook for the alert (by name, then labels), else the one its
        ``runbook_url`` annotation points to when the egress policy lets it be read; ``None``: none."""
        runbook: Runbook | None = None
        if self.index is not None:
            runbook = self.index.best_for_alert(alertname, labels, target)
        if runbook is None and runbook_url and self.fetcher is not None:
            try:
                runbook = self.fetcher.fetch(runbook_url)
            except RunbookUnavailable as exc:
                log.info("alert %s: %s", alertname, exc)
        if runbook is None:
            return None
        return AlertRunbook(runbook.title, runbook.id, runbook.outline())

    def get(self, runbook_id: str) -> Runbook:
        """A runbook by id: a key of the index, or an http(s) URL read through the egress policy."""
        if self.index is not None:
            found = self.index.get(runbook_id)
            if found is not None:
                return found
        if runbook_id.lower().startswith(("http://", "https://")):
            if self.fetcher is None:
                raise RunbookUnavailable("runbook URLs are not read here")
            return self.fetcher.fetch(runbook_id)
        raise RunbookUnavailable(
            f"no runbook has the id {runbook_id[:200]!r}; ids are the ones search_runbooks returns "
            "(a path relative to the runbook folder, e.g. disk/high-usage.md) or a runbook URL"
        )
