"""The seal of an approval record: the call's facts as the worker proposed them, checked at the click.

The web process decides a click from the policy file as it is now (``bot.policy.deciders``,
``Policy.decide``), judged on the facts of the call in the record: its tool and arguments (the
target among them), category, the target's labels, requester, the people involved, the channel.
The record is in Redis, which a Redis writer can change: turn ``destructive`` into ``mutating``
(a rule for one approval instead of two), name another requester (who may then approve their own
call), drop a label. So the worker seals those facts when it proposes the call: an HMAC-SHA256
over every field it writes then, with a key derived from ``CHATOPS_RUNNER_SECRET`` (the web
process, the workers and the runners have it; it never goes to Redis). A record whose seal does
not verify, or whose card is not in the sealed channel, decides nothing.

What the seal does not cover is what moves after the proposal (status, the decider, the card's
message, the grant): those are the approvals' scripts' and the grant's business. Each vote of a
record that needs several is tagged with the same key (``vote``), so a vote a Redis writer adds
for someone who never clicked is dropped, and never counted into a grant. The
requirement itself (``Approval.policy``) is left out on purpose: nobody decides from it any more.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from pathlib import Path

from bot.errors import BotConfigurationError
from bot.runs.approvals import Approval

_PURPOSE = b"chatops approval seal v1"  # a key of its own: a seal is never a valid grant, nor the reverse
SEALED_FIELDS = frozenset(
    {
        "id",
        "run_id",
        "call_id",
        "tool",
        "args_json",
        "args_sha256",
        "category",
        "requester",
        "channel",
        "involved",
        "target",
        "target_via",
        "target_labels",
        "preview",
        "plan",
        "plan_created_at",
        "command",
        "why",
        "rationale",
        "verify",
        "provenance",
    }
)
TAMPERED = (
    "This approval's record was changed in Redis after the call was proposed (its seal does not "
    "verify), so it cannot be decided."
)


NEEDS_SECRET = (
    "CHATOPS_POLICY_FILE needs CHATOPS_RUNNER_SECRET (the same value for the web process, the workers "
    "and the runners): the workers seal each approval's facts with it, and the web process judges a "
    "click only on facts whose seal it can verify (docs/POLICY.md)"
)


def require_seal_key(policy_file: Path | None, secret: str) -> None:
    """Start-up: a policy file without the secret would let a Redis writer choose the facts the
    policy is judged on (a destructive call recorded as mutating); refuse to start instead."""
    if policy_file is not None and not secret:
        raise BotConfigurationError(NEEDS_SECRET)


def sealed_facts(approval: Approval) -> bytes:
    """The sealed fields of ``approval``, canonical (as stored and read back, byte for byte)."""
    facts = approval.model_dump(mode="json", include=set(SEALED_FIELDS))
    if not facts["provenance"]:
        del facts["provenance"]  # a record proposed before provenance keeps the seal it was given
    return json.dumps(facts, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


@dataclass(frozen=True)
class ApprovalSeal:
    """Seals a proposed record (the worker) and checks it at the click (the web process)."""

    key: bytes

    @classmethod
    def from_secret(cls, secret: str) -> ApprovalSeal | None:
        """``None`` without ``CHATOPS_RUNNER_SECRET``."""
        if not secret:
            return None
        return cls(hmac.new(secret.encode(), _PURPOSE, hashlib.sha256).digest())

    def of(self, approval: Approval) -> str:
        return hmac.new(self.key, sealed_facts(approval), hashlib.sha256).hexdigest()

    def sealed(self, draft: Approval) -> Approval:
        """``draft`` with its seal, before it is stored."""
        return draft.model_copy(update={"seal": self.of(draft)})

    def vote(self, approval_id: str, user: str) -> str:
        """The vote-set member of ``user``'s approval of ``approval_id`` (``bot.runs.approval_votes``):
        ``user|tag``, where only a holder of the key can make the tag."""
        tag = hmac.new(self.key, f"vote|{approval_id}|{user}".encode(), hashlib.sha256).hexdigest()[:32]
        return f"{user}|{tag}"

    def voter(self, approval_id: str, member: str) -> str | None:
        """The user a vote-set member is an authentic vote of (``None``: a member someone else wrote)."""
        user = member.partition("|")[0]
        return user if user and hmac.compare_digest(member, self.vote(approval_id, user)) else None

    def problem(self, approval: Approval, channel: str) -> str | None:
        """Why a click through a card in ``channel`` may not decide ``approval`` (``None``: it may)."""
        if not approval.seal or not hmac.compare_digest(approval.seal, self.of(approval)):
            return TAMPERED
        if approval.channel != channel:
            return f"{TAMPERED} (its card is not in the channel the call was proposed in)"
        return None
