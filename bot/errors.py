"""Errors raised by the bot (runs, approvals, jobs, worker).

Tree::

    BotError
    ├── BotConfigurationError   misuse: a job outside a chatops worker, a bad runtime factory
    ├── RunNotFoundError        no run record with that id (never created, or expired)
    ├── ApprovalNotFoundError   no approval record with that id
    ├── NotAnApproverError      the person who clicked is not on the approvers list
    └── DurabilityError         an executing mark could not be made crash-safe: the tool must not run
        ├── NotDurableError         the server's persistence can lose it (``CHATOPS_DURABILITY=strict``)
        └── DurabilityUnconfirmedError  ``WAIT`` / ``WAITAOF`` fell short in time, or Redis failed

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


class DurabilityError(BotError):
    """``bot.runs.durability.Durability.wait`` could not make the last write survive a Redis crash.

    Raised before a side effect starts: the caller must not run the tool (its executing mark
    might vanish in a crash, and a resumed run would then run it again).
    """


class NotDurableError(DurabilityError):
    """The server's persistence settings can lose the mark in a crash and the mode is ``strict``."""

    def __init__(self, risk: str) -> None:
        super().__init__(f"Redis cannot keep the executing mark across a crash: {risk}")
        self.risk = risk


class DurabilityUnconfirmedError(DurabilityError):
    """``WAIT`` / ``WAITAOF`` did not confirm the write in time (or Redis failed while asked)."""

    def __init__(self, what: str) -> None:
        super().__init__(f"the executing mark is not confirmed durable: {what}")
        self.what = what
