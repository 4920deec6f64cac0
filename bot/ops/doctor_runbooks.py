"""``chatops doctor``'s check of the runbook folder (``CHATOPS_RUNBOOKS_DIR``): it is a folder, and
every runbook in it is indexed; each file the index skips (malformed front matter, too large, not
UTF-8) is named with what is wrong, as a warning: the other runbooks are served all the same."""

from __future__ import annotations

from bot.ops.doctor_check import Check, Outcome
from bot.settings import Settings
from tools.runbooks import RunbookIndex

_PROBLEMS_SHOWN = 20


def check_runbooks(settings: Settings) -> Check:
    folder = settings.chatops_runbooks_dir
    if folder is None:
        return Check("runbooks", Outcome.PASS, "no runbook folder (CHATOPS_RUNBOOKS_DIR): no runbook tools")
    if not folder.is_dir():
        return Check(
            "runbooks",
            Outcome.FAIL,
            f"{folder} is not a directory",
            "point CHATOPS_RUNBOOKS_DIR at a runbook checkout",
        )
    index = RunbookIndex(folder)
    summary = f"{len(index)} runbooks in {folder}"
    problems = index.problems
    if not problems:
        return Check("runbooks", Outcome.PASS, summary)
    lines = [f"{summary}; {len(problems)} not indexed:"]
    lines += [f"- {problem}" for problem in problems[:_PROBLEMS_SHOWN]]
    if len(problems) > _PROBLEMS_SHOWN:
        lines.append(f"- ... and {len(problems) - _PROBLEMS_SHOWN} more")
    return Check(
        "runbooks", Outcome.WARN, "\n".join(lines), "fix each file's front matter (docs/RUNBOOKS.md)"
    )
