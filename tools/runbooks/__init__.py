"""Runbooks: the team's Markdown runbooks (``CHATOPS_RUNBOOKS_DIR``) and an alert's ``runbook_url``,
read by the model as data.

* ``document``: one runbook parsed: its optional YAML front matter (``title``, ``alerts``,
  ``labels`` as Alertmanager matchers, ``targets``), its headings and sections.
* ``index``: ``RunbookIndex``, the folder indexed at start and again, file by file, when a stat scan
  (at most every ``rescan_seconds``, on use) sees a file added, changed or gone; a malformed
  file is reported (``problems``) and skipped, the others stay. Ranking: alert name, then labels,
  then targets, then full-text relevance.
* ``remote``: ``RunbookFetcher``, a ``runbook_url`` fetched through the egress policy only
  (``tools.http_client``: every redirect hop re-checked), size-capped, HTML reduced to text,
  cached with a TTL.
* ``library``: ``RunbookLibrary``, both together: what an alert's run is told (``for_alert``) and
  what the two read-only tools ``search_runbooks`` / ``read_runbook`` read (``tools.runbooks.tools``).

A runbook's text is data: it reaches the model framed as the team's reference text, through the
run's output filter (redaction, cap) like any tool output, and Slack only through the renderers
that show tool text inert. Nothing in it can change a tool's category or an approval: those are
code's (``tools.base``, ``agent.tool_step``). An id is only ever a key of the index (or an
http(s) URL the egress policy judges), never a path opened as given.
"""

from tools.errors import RunbookFormatError, RunbookUnavailable
from tools.runbooks.document import Runbook, parse_runbook
from tools.runbooks.index import RunbookIndex, RunbookProblem, SearchHit
from tools.runbooks.library import AlertRunbook, RunbookLibrary
from tools.runbooks.remote import RunbookFetcher
from tools.runbooks.tools import runbook_tools

__all__ = [
    "AlertRunbook",
    "Runbook",
    "RunbookFetcher",
    "RunbookFormatError",
    "RunbookIndex",
    "RunbookLibrary",
    "RunbookProblem",
    "RunbookUnavailable",
    "SearchHit",
    "parse_runbook",
    "runbook_tools",
]
