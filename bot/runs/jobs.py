"""RQ jobs: ``start`` and ``resume`` work on a run, ``expire_approval`` declines an old approval.

They are enqueued by ``bot.runs.queueing`` only (by their import paths, the workers' allow-list)
and receive only ids; everything else comes from the ``Runtime`` the worker bound for the job
(``bot.runs.runtime``).
"""

from __future__ import annotations

from bot.runs.approvals import DecideOutcome
from bot.runs.run_job import RunJob
from bot.runs.runtime import current_runtime

# -- the job functions (RQ imports them by path in the work horse) ----------------------------------


def start(run_id: str) -> str:
    """Start a new run (the same work as ``resume``: a retried start resumes)."""
    return RunJob(current_runtime(), run_id).execute()


def resume(run_id: str, deferrals: int = 0) -> str:
    """Continue a run from its stored history (after an approval, a reply, or a dead worker)."""
    return RunJob(current_runtime(), run_id, deferrals).execute()


def expire_approval(approval_id: str) -> str:
    """Scheduled at the approval's ``expires_at``: decline it if nobody decided, and resume the run."""
    result = current_runtime().service().lifecycle.expire(approval_id)
    if result is None:
        return "missing"
    if result.outcome is DecideOutcome.NOT_DUE:
        return "not_due"  # this scheduler's clock ran ahead of Redis's: scheduled again
    return "expired" if result.settled else f"already {result.approval.status.value}"
