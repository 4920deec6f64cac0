"""Whether a person's word to a running run also cancels its pending approvals: one answer for a
thread reply (``bot.slack.handlers.events``) and a click on the Findings message's menu
(``bot.slack.handlers.findings_clicks``), which reaches the run like a reply."""

from __future__ import annotations

import logging

from bot.policy.deciders import Action
from bot.runs.approvals import ApprovalStatus
from bot.slack.handlers.runtime import WebRuntime

log = logging.getLogger(__name__)


def may_supersede(runtime: WebRuntime, channel: str, thread_ts: str, user: str, what: str) -> bool:
    """Whether ``user``'s reply (or click: ``what`` names it for the log) may cancel the thread's
    active run's pending approvals (``Action.SUPERSEDE``: the requester or an approver, who may
    decline every pending card).

    Asked for every reply to an active run, not only one that waits for an approval: a run that
    starts waiting right after the reply was stored still finds the answer on the inbox item
    (``InboxItem.may_supersede``) and supersedes only for someone who may decide.
    """
    service = runtime.service()
    run_id = service.active_run(channel, thread_ts)
    record = service.get(run_id) if run_id else None
    if record is None or record.status.terminal:
        return False
    pending = [a for a in service.approvals.for_run(record.run_id) if a.status is ApprovalStatus.PENDING]
    verdict = runtime.deciders.decide(user, Action.SUPERSEDE, requester=record.requester, pending=pending)
    if not verdict.allowed:
        log.info("%s by %s cannot cancel an approval: %s", what, user, verdict.reason)
    return verdict.allowed
