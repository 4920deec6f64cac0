"""Errors raised by the bot (runs, approvals, jobs, worker).

Tree::

    BotError
    ├── BotConfigurationError   misuse: a job outside a chatops worker, a bad runtime factory
    ├── RunNotFoundError        no run record with that id (never created, or expired)
    ├── ApprovalNotFoundError   no approval record with that id
    └── NotAnApproverError      the person who clicked is not on the approvers list

A decision that loses a race is not an error: ``Approvals.decide`` answers with who decided
first and what. ``agent.errors.LeaseLostError`` (another worker owns a run) is the agent's.
"""

from __future__ import annotations


class BotError(Exception):
    """Root of every error the bot raises."""


class BotConfigurationError(BotError):
    """The bot was wired wrongly (programmer or deployment error); raised at once."""


class RunNotFoundError(BotError):
    """No run record with this id: it was never created or its retention expired."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run {run_id}")
        self.run_id = run_id


class ApprovalNotFoundError(BotError):
    """No approval record with this id: it was never created or its retention expired."""

    def __init__(self, approval_id: str) -> None:
        super().__init__(f"no approval {approval_id}")
        self.approval_id = approval_id


class NotAnApproverError(BotError):
    """``user`` may not decide approvals (``CHATOPS_APPROVERS`` does not list them)."""

    def __init__(self, user: str) -> None:
        super().__init__(f"{user} is not an approver")
        self.user = user
