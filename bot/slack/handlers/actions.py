"""Clicks: Approve, Decline (and its reason modal), Stop, Transcript. The decision logic, without Bolt.

Each method answers a ``Reply``: what the clicker is told (ephemerally) and which approval card
to redraw. A click that is not allowed, or comes late (the approval was decided, superseded or
has expired), changes nothing and says why, naming who decided first and when. A click naming a
run or approval Redis does not know may come from the card of a run Redis lost: ``Reply.unknown``
has the app check that in Slack after the ack (``bot.slack.delivery.lost_cards``), and redraw it as lost. The decision
itself is ``ApprovalLifecycle.decide`` (``bot.runs.approval_lifecycle``: the atomic transition of
``bot.runs.approvals``, its audit entry, the run's resume), so a double click, or two approvers at
once, decide exactly once.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.claims import claim_once
from bot.errors import AlertGroupBusyError, ApprovalNotFoundError, NotAnApproverError
from bot.policy.break_glass import BreakGlassLog
from bot.policy.deciders import Action, Deciders, Ruling
from bot.runs.approval_votes import VoteOutcome
from bot.runs.approvals import Approval, ApprovalStatus, DecideOutcome
from bot.runs.record import RunRecord
from bot.runs.transcript_source import load_transcript
from bot.slack.handlers.runtime import WebRuntime
from bot.slack.rendering.mrkdwn import mention
from bot.slack.rendering.render import slack_date
from bot.slack.rendering.transcript_text import transcript_messages

log = logging.getLogger(__name__)
NOTHING_CHANGED = "Nothing changed."
NOT_THIS_CARD = f"This button does not belong to that approval's card. {NOTHING_CHANGED}"
# A click can reach the web process before the worker has recorded the card it came from.
CARD_RECORD_WAIT_SECONDS = 1.0
Card = tuple[str, str]  # the (channel, message ts) a click came from
_APPROVAL_ID = re.compile(r"[0-9a-f]{32}")  # uuid4 hex (``Approvals.draft``); anything else names none
NO_REASON = "no reason given"
TRANSCRIPT_COOLDOWN_SECONDS = 60  # a second click by the same person within this sends nothing again


@dataclass(frozen=True)
class Reply:
    """The clicker's ephemeral note (if any), the approval whose card to redraw, whether to open
    the decline modal, and the id the click named that Redis does not know (a lost run's card?)."""

    note: str | None = None
    approval: Approval | None = None
    open_modal: bool = False
    unknown: str | None = None


def send_privately(client: WebClient, record: RunRecord, user: str, messages: list[str]) -> None:
    """``messages`` in the run's thread as ephemerals only ``user`` sees (Slack refuses a non-member)."""
    for text in messages:
        client.chat_postEphemeral(channel=record.channel, user=user, text=text, thread_ts=record.thread_ts)


def late_note(approval: Approval) -> str:
    """Why a click on an approval that is no longer pending did nothing."""
    when = f" at {slack_date(approval.decided_at)}" if approval.decided_at else ""
    by = approval.decided_by
    who = f" by {mention(by)}" if by[:1] in ("U", "W") else ""
    status = approval.status
    if status is ApprovalStatus.SUPERSEDED:
        return f"This card was superseded{when}: a newer message{who} redirected the run. {NOTHING_CHANGED}"
    if status is ApprovalStatus.EXPIRED:
        return f"This approval expired{when}: nobody decided in time. {NOTHING_CHANGED}"
    return f"Already {status.value}{who}{when}. {NOTHING_CHANGED}"


class Interactions:
    """Approve / decline / stop / transcript, each asked of the deciders (``bot.policy.deciders``)."""

    def __init__(self, runtime: WebRuntime, clock: Callable[[], float] = time.time) -> None:
        self._rt = runtime
        self._clock = clock

    def approve(self, approval_id: str, user: str, card: Card, *, bots_own: bool = False) -> Reply:
        """Who may approve and how many must: the policy file as it is now, on the record's sealed
        facts (``Deciders.decide``), never the count or rule stored in the record. ``bots_own``:
        Slack's signed payload says the clicked message is this bot's post (``_card_recorded``)."""
        approval, late = self._pending(approval_id, card, bots_own)
        if late is not None:
            return late
        assert approval is not None
        ruling = self._deciders().decide(user, Action.APPROVE, approval)
        if ruling.undecidable:  # an altered record, a call the file now denies, an unreadable file
            log.warning(
                "approval %s: a click by %s decided nothing: %s", approval.id, user, ruling.undecidable
            )
        if not ruling.allowed:
            return Reply(f"{ruling.reason} {NOTHING_CHANGED}")
        if ruling.break_glass:  # alone, whatever the rule's count
            reason = f"approved by {user} (break-glass)"
            return self._decide(approval_id, user, card, approve=True, reason=reason, ruling=ruling)
        if ruling.requirement is not None and ruling.requirement.approvals > 1:
            return self._vote(approval, user, card, ruling)
        return self._decide(approval_id, user, card, approve=True, ruling=ruling)

    def _deciders(self) -> Deciders[Approval]:
        """The runtime's, with break-glass judged by this handler's clock."""
        service = self._rt.service()
        glass = BreakGlassLog(service.redis, self._rt.keys, service.audit, self._clock)
        return replace(self._rt.deciders, glass=glass.active_until)

    def _vote(self, approval: Approval, user: str, card: Card, ruling: Ruling) -> Reply:
        """One of the distinct approvals the policy file needs; the last one approves it."""
        requirement = ruling.requirement
        assert requirement is not None
        needed = requirement.approvals
        try:
            vote, result = self._rt.service().lifecycle.vote(approval.id, user=user, card=card, ruling=ruling)
        except ApprovalNotFoundError:
            return Reply(f"This approval no longer exists. {NOTHING_CHANGED}", unknown=approval.id)
        except NotAnApproverError as refused:
            return Reply(f"{refused.reason} {NOTHING_CHANGED}")
        shown = _shown(ruling, result.approval)
        if vote.outcome is VoteOutcome.MISMATCH:
            return Reply(NOT_THIS_CARD)
        if vote.outcome is VoteOutcome.WON:
            return Reply(approval=shown)
        if vote.outcome is VoteOutcome.REPEAT:
            note = f"Your approval is already counted ({vote.count} of {needed}); it counts once."
            return Reply(note, shown)
        if vote.outcome is VoteOutcome.COUNTED:  # the card is redrawn: it says who approved so far
            more = needed - vote.count
            return Reply(
                f"Your approval is counted ({vote.count} of {needed}); "
                f"{more} more from another eligible person {'is' if more == 1 else 'are'} needed.",
                shown,
            )
        return Reply(late_note(result.approval), shown)

    def decline_clicked(self, approval_id: str, user: str, card: Card, *, bots_own: bool = False) -> Reply:
        """The Decline button: allowed and still pending -> open the reason modal."""
        allowed = self._declinable(approval_id, user, card, bots_own)
        if isinstance(allowed, Reply):
            return allowed
        return Reply(approval=allowed[0], open_modal=True)

    def decline(self, approval_id: str, user: str, card: Card, reason: str | None) -> Reply:
        """The modal's submission (or a Decline whose modal could not open)."""
        allowed = self._declinable(approval_id, user, card)
        if isinstance(allowed, Reply):
            return allowed
        ruling = allowed[1]
        return self._decide(approval_id, user, card, approve=False, reason=reason or NO_REASON, ruling=ruling)

    def _declinable(
        self, approval_id: str, user: str, card: Card, bots_own: bool = False
    ) -> tuple[Approval, Ruling] | Reply:
        """The pending approval ``user`` may decline through ``card`` and the ruling that says so,
        or the reply saying why not (it is no longer pending, or the deciders refuse this user)."""
        approval, late = self._pending(approval_id, card, bots_own)
        if late is not None:
            return late
        assert approval is not None
        ruling = self._deciders().decide(user, Action.DECLINE, approval)
        if not ruling.allowed:
            return Reply(f"{ruling.reason} {NOTHING_CHANGED}")
        return approval, ruling

    def stop(self, run_id: str, user: str) -> Reply:
        service = self._rt.service()
        record = service.get(run_id)
        if record is None:
            return Reply(f"This run no longer exists. {NOTHING_CHANGED}", unknown=run_id)
        if record.status.terminal:
            return Reply(f"This run already ended ({record.status.value}). {NOTHING_CHANGED}")
        verdict = self._rt.deciders.decide(user, Action.STOP, requester=record.requester)
        if not verdict.allowed:
            return Reply(f"{verdict.reason} {NOTHING_CHANGED}")
        if not service.request_stop(run_id, user):
            return Reply(f"This run already ended. {NOTHING_CHANGED}")
        return Reply("Stopping the run; it ends after the step in progress.")

    def investigate(self, group_id: str, user: str, channel: str) -> Reply:
        """An alert thread's Investigate button: start the run in the alert's thread, requested by
        the clicker (the click must come from the alert's own channel; one run per thread). The
        alert's root is redrawn at once: no button, and who started the investigation."""
        from bot.alerts.store import AlertStore
        from bot.alerts.threads import AlertThreads
        from bot.slack.delivery.alert_presenter import SlackAlertPresenter

        service = self._rt.service()
        store = AlertStore(self._rt.redis(), self._rt.keys, self._rt.redact)
        group = store.group(group_id)
        if group is None or group.channel != channel or not self._rt.channel_allowed(channel):
            return Reply(f"This alert is no longer open here. {NOTHING_CHANGED}")
        already = service.active_run(group.channel, group.root_ts)
        threads = AlertThreads(store, service, SlackAlertPresenter(self._rt.client(), self._rt.redact))
        try:
            run_id = threads.investigate(group_id, user)
        except AlertGroupBusyError:
            return Reply(f"This alert is being updated right now; click Investigate again. {NOTHING_CHANGED}")
        except SlackApiError as error:  # the run started; only the root's redraw failed
            log.warning("alert %s: the root was not redrawn after Investigate: %s", group_id, error)
            return Reply("Investigating: the run is starting in this alert's thread.")
        if run_id is None:
            return Reply(f"This alert is no longer open here. {NOTHING_CHANGED}")
        if already == run_id:
            return Reply("An investigation of this alert is already running in its thread.")
        return Reply("Investigating: the run is starting in this alert's thread.")

    def transcript(self, run_id: str, user: str, channel: str = "") -> Reply:
        """The Transcript button of a finished run card: the transcript as readable mrkdwn, to the clicker alone.

        It holds every tool output (log lines, customer data), so it goes only to someone who may
        decide (``Action.TRANSCRIPT``), as ephemeral messages in the run's thread,
        and never to the channel. ``channel``: where the click came from; it must be the run's.
        """
        verdict = self._rt.deciders.decide(user, Action.TRANSCRIPT)
        if not verdict.allowed:
            return Reply(f"{verdict.reason} The transcript was not sent.")
        service = self._rt.service()
        record = service.get(run_id)
        if record is None:
            return Reply("This run no longer exists (its retention has expired).")
        if channel and channel != record.channel:
            return Reply("This button does not belong to a run of this channel. The transcript was not sent.")
        if not record.status.terminal:
            return Reply("The transcript is available once the run has ended.")
        flag = self._rt.keys.slack("transcript", run_id, user)
        if not claim_once(service.redis, flag, TRANSCRIPT_COOLDOWN_SECONDS):
            return Reply("This run's transcript was just sent to you (only you can see it).")
        transcript = load_transcript(service, run_id, self._rt.redact)
        try:
            send_privately(self._rt.client(), record, user, transcript_messages(transcript))
        except SlackApiError:
            service.redis.delete(flag)  # nothing (or not all) arrived: a new click may try again
            raise
        return Reply()

    # -- helpers --------------------------------------------------------------------------------

    def _pending(
        self, approval_id: str, card: Card, bots_own: bool = False
    ) -> tuple[Approval | None, Reply | None]:
        """The approval if this click may still decide it, else the reply explaining why not.

        A click decides only its own card: an approval id on another message (another run's
        card, another channel, a forged payload) decides nothing and redraws nothing.
        """
        service = self._rt.service()
        approval = service.approvals.get(approval_id) if _APPROVAL_ID.fullmatch(approval_id) else None
        if approval is None:
            unknown = approval_id if _APPROVAL_ID.fullmatch(approval_id) else None
            return None, Reply(f"This approval no longer exists. {NOTHING_CHANGED}", unknown=unknown)
        approval = self._card_recorded(approval, card if bots_own else None)
        if not approval.card_ts or (approval.card_channel, approval.card_ts) != card:
            return None, Reply(NOT_THIS_CARD)
        if approval.status is not ApprovalStatus.PENDING:
            return None, Reply(late_note(approval), approval)
        return approval, None

    def _card_recorded(self, approval: Approval, bots_own: Card | None) -> Approval:
        """``approval`` once its card's ts is recorded: the worker records it right after Slack
        answers the post, so a click on the card can arrive first (under load, seconds first).

        ``bots_own``: the clicked message, when Slack's signed payload says this bot posted it.
        A message of this bot's, in the run's channel, carrying this approval's button is its card
        (the worker posts one per approval): the click records it (``Approvals.claim_card``: only
        while none is recorded, so a recorded card is never replaced). Otherwise the record is
        waited for a moment (well within Slack's 3 s for the click's answer), never assumed."""
        unrecorded = not approval.card_ts and approval.status is ApprovalStatus.PENDING
        if unrecorded and bots_own is not None and approval.channel and bots_own[0] == approval.channel:
            service = self._rt.service()
            service.approvals.claim_card(approval.id, *bots_own)
            return service.approvals.get(approval.id) or approval
        deadline = time.monotonic() + CARD_RECORD_WAIT_SECONDS
        while (
            not approval.card_ts and approval.status is ApprovalStatus.PENDING and time.monotonic() < deadline
        ):
            time.sleep(0.02)
            approval = self._rt.service().approvals.get(approval.id) or approval
        return approval

    def _decide(
        self,
        approval_id: str,
        user: str,
        card: Card,
        *,
        approve: bool,
        reason: str = "",
        ruling: Ruling,
    ) -> Reply:
        """The atomic decision; expiry is judged by Redis's clock inside it, never this host's.
        ``ruling``: the deciders' (its requirement and break-glass go into the grant)."""
        try:
            result = self._rt.service().lifecycle.decide(
                approval_id, user=user, approve=approve, reason=reason, card=card, ruling=ruling
            )
        except ApprovalNotFoundError:
            return Reply(f"This approval no longer exists. {NOTHING_CHANGED}", unknown=approval_id)
        except NotAnApproverError as refused:
            return Reply(f"{refused.reason} {NOTHING_CHANGED}")
        if result.outcome is DecideOutcome.MISMATCH:
            return Reply(NOT_THIS_CARD)
        if not result.won:
            return Reply(late_note(result.approval), _shown(ruling, result.approval))
        return Reply(approval=_shown(ruling, result.approval))


def _shown(ruling: Ruling, approval: Approval) -> Approval:
    """``approval`` as its card should show it: with the requirement the click was judged by."""
    if ruling.requirement is None:
        return approval
    return approval.model_copy(update={"policy": ruling.requirement.to_json()})
