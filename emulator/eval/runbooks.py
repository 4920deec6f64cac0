"""A scenario's runbooks: the team's Markdown runbooks the bot can search and read during the run.

::

    runbooks:
      api/db-pool.md: |-            # its id: a path relative to the folder, ending in .md
        ---
        title: Orders API returns 5xx
        alerts: [ApiHighErrorRate]
        labels: {service: api}
        ---
        # Orders API returns 5xx
        ...

The session writes them into ``DIR/runbooks`` and points ``chatops web`` and ``chatops worker`` at
it (``CHATOPS_RUNBOOKS_DIR``); a scenario without ``runbooks:`` gets no folder, so its worker
offers no runbook tool (and its recordings stay what they were). Stricter than the bot's index,
which logs a malformed file and leaves it out: a scenario's runbook that would be left out, or
whose front matter has a key the index ignores (a typo such as ``alert:`` would silently match
nothing), is refused at load, with its id and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from tools.errors import RunbookFormatError
from tools.runbooks.document import parse_runbook, split_front_matter
from tools.runbooks.index import MAX_FILE_BYTES

FRONT_MATTER_KEYS = ("title", "alerts", "labels", "targets")
_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*\.md$")
MAX_RUNBOOKS = 20


def runbook_problems(runbooks: Mapping[str, str]) -> list[str]:
    """What is wrong with a scenario's ``runbooks:``, each ``runbooks.ID: what; fix: ...``."""
    problems = []
    if len(runbooks) > MAX_RUNBOOKS:
        problems.append(f"runbooks: more than {MAX_RUNBOOKS}; fix: keep the ones the scenario is about")
    for runbook_id, text in runbooks.items():
        where = f"runbooks.{runbook_id}"
        if not _ID.match(runbook_id) or ".." in runbook_id.split("/"):
            problems.append(
                f"{where}: not a relative path of a Markdown file; fix: name it like disk/high-usage.md"
            )
            continue
        if len(text.encode("utf-8")) > MAX_FILE_BYTES:
            problems.append(
                f"{where}: larger than {MAX_FILE_BYTES // 1024} KiB, the index skips it; fix: shorten it"
            )
            continue
        try:
            meta, _ = split_front_matter(text)
            parse_runbook(runbook_id, text)
        except RunbookFormatError as error:
            problems.append(f"{where}: {error}; fix: write the front matter as docs/RUNBOOKS.md says")
            continue
        unknown = sorted(str(key) for key in meta if key not in FRONT_MATTER_KEYS)
        if unknown:
            problems.append(
                f"{where}: front matter key {unknown[0]!r} is ignored by the index; "
                f"fix: use one of {', '.join(FRONT_MATTER_KEYS)}"
            )
    return problems


def write_runbooks(runbooks: Mapping[str, str], folder: Path) -> Path:
    """The runbooks as files under ``folder`` (created), which is returned."""
    folder.mkdir(parents=True, exist_ok=True)
    for runbook_id, text in runbooks.items():
        path = folder / runbook_id
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return folder
