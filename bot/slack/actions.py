"""Clicks: Approve, Decline (and its reason modal), Stop, Transcript. The decision logic, without Bolt.

Each method answers a ``Reply``: what the clicker is told (ephemerally) and which approval card
to redraw. A click that is not allowed, or comes late (the approval was decided, superseded or
has expired), changes nothing and says why, naming who decided first and when. The decision
itself is the atomic transition in ``bot.approvals`` (through ``RunService.decide``), so a
double click, or two approvers at once, decide exactly once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from bot.approvals import Approval, ApprovalStatus
from bot.errors import ApprovalNotFoundError
from bot.logs import redactor_for
from bot.slack.render import slack_date, transcript_messages
from bot.slack.runtime import WebRuntime
from bot.transcript import load_transcript, to_markdown

NOTHING_CHANGED = "Nothing changed."
NO_REASON = "no reason given"
TRANSCRIPT_COOLDOWN_SECONDS = 60  # a second click within this posts nothing (double clicks, two readers)


@dataclass(frozen=True)
class Reply:
    """The clicker's ephemeral note (if any), the approval whose card to redraw, and whether to
    open the decline modal."""

    note: str | None = None
    approval: Approval | None = None
    open_modal: bool = False


def late_note(approval: Approval) -> str:
    """Why a click on an approval that is no longer pending did nothing."""
    when = f" at {slack_date(approval.decided_at)}" if approval.decided_at else ""
    by = approval.decided_by
    who = f" by <@{by}>" if by[:1] in ("U", "W") else ""
    status = approval.status
    if status is ApprovalStatus.SUPERSEDED:
        return f"This card was superseded{when}: a newer message{who} redirected the run. {NOTHING_CHANGED}"
    if status is ApprovalStatus.EXPIRED:
        return f"This approval expired{when}: nobody decided in time. {NOTHING_CHANGED}"
    return f"Already {status.value}{who}{when}. {NOTHING_CHANGED}"


class Interactions:
    """Approve / decline / stop, checked against the approver policy."""

    def __init__(self, runtime: WebRuntime, clock: Callable[[], float] = time.time) -> None:
        self._rt = runtime
        self._clock = clock

    def approve(self, approval_id: str, user: str) -> Reply:
        approval, late = self._pending(approval_id)
        if late is not None:
            return late
        assert approval is not None
        verdict = self._rt.policy.may_approve(user, approval.requester, approval.category)
        if not verdict.allowed:
            return Reply(f"{verdict.reason} {NOTHING_CHANGED}")
        return self._decide(approval_id, user, approve=True)

    def decline_clicked(self, approval_id: str, user: str) -> Reply:
        """The Decline button: allowed and still pending -> open the reason modal."""
        approval, late = self._pending(approval_id)
        if late is not None:
            return late
        assert approval is not None
        verdict = self._rt.policy.may_decline(user, approval.requester)
        if not verdict.allowed:
            return Reply(f"{verdict.reason} {NOTHING_CHANGED}")
        return Reply(approval=approval, open_modal=True)

    def decline(self, approval_id: str, user: str, reason: str | None) -> Reply:
        """The modal's submission (or a Decline whose modal could not open)."""
        approval, late = self._pending(approval_id)
        if late is not None:
            return late
        assert approval is not None
        verdict = self._rt.policy.may_decline(user, approval.requester)
        if not verdict.allowed:
            return Reply(f"{verdict.reason} {NOTHING_CHANGED}")
        return self._decide(approval_id, user, approve=False, reason=reason or NO_REASON)

    def stop(self, run_id: str, user: str) -> Reply:
        service = self._rt.service()
        record = service.get(run_id)
        if record is None:
            return Reply(f"This run no longer exists. {NOTHING_CHANGED}")
        if record.status.terminal:
            return Reply(f"This run already ended ({record.status.value}). {NOTHING_CHANGED}")
        verdict = self._rt.policy.may_stop(user, record.requester)
        if not verdict.allowed:
            return Reply(f"{verdict.reason} {NOTHING_CHANGED}")
        if not service.request_stop(run_id, user):
            return Reply(f"This run already ended. {NOTHING_CHANGED}")
        return Reply("Stopping the run; it ends after the step in progress.")

    def transcript(self, run_id: str, user: str) -> Reply:
        """The Transcript button of a finished run card: post the Markdown transcript in the thread."""
        service = self._rt.service()
        record = service.get(run_id)
        if record is None:
            return Reply("This run no longer exists (its retention has expired).")
        if not record.status.terminal:
            return Reply("The transcript is posted once the run has ended.")
        flag = self._rt.keys.slack("transcript", run_id)
        if not service.redis.set(flag, user, nx=True, ex=TRANSCRIPT_COOLDOWN_SECONDS):
            return Reply("This run's transcript was just posted in the thread.")
        markdown = to_markdown(load_transcript(service, run_id, redactor_for(self._rt.settings).redact))
        client = self._rt.client()
        for text in transcript_messages(markdown, run_id):
            client.chat_postMessage(channel=record.channel, thread_ts=record.thread_ts, text=text)
        return Reply()

    # -- helpers --------------------------------------------------------------------------------

    def _pending(self, approval_id: str) -> tuple[Approval | None, Reply | None]:
        """The approval if a decision may still be made, else the reply explaining why not."""
        service = self._rt.service()
        approval = service.approvals.get(approval_id)
        if approval is None:
            return None, Reply(f"This approval no longer exists. {NOTHING_CHANGED}")
        if approval.status is not ApprovalStatus.PENDING:
            return None, Reply(late_note(approval), approval)
        if self._clock() >= approval.expires_at:
            # The scheduled expiry has not run yet; a click must not beat the deadline.
            result = service.expire(approval_id)
            settled = result.approval if result is not None else approval
            return None, Reply(late_note(settled), settled)
        return approval, None

    def _decide(self, approval_id: str, user: str, *, approve: bool, reason: str = "") -> Reply:
        try:
            result = self._rt.service().decide(approval_id, user=user, approve=approve, reason=reason)
        except ApprovalNotFoundError:
            return Reply(f"This approval no longer exists. {NOTHING_CHANGED}")
        if not result.won:
            return Reply(late_note(result.approval), result.approval)
        return Reply(approval=result.approval)
