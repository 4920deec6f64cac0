"""Errors raised by the bot (runs, approvals, jobs, worker).

Tree::

    BotError
    ├── BotConfigurationError   misuse: a job outside a chatops worker, a bad runtime factory
    ├── RunNotFoundError        no run record with that id (never created, or expired)
    ├── ApprovalNotFoundError   no approval record with that id
    ├── NotAnApproverError      the person may not decide that approval (``bot.policy.deciders``)
    ├── PolicyConfigError       ``CHATOPS_POLICY_FILE`` is wrong (also a ``BotConfigurationError``)
    ├── DurabilityError         an executing mark could not be made crash-safe: the tool must not run
    │   ├── NotDurableError         the server's persistence can lose it (``CHATOPS_DURABILITY=strict``)
    │   └── DurabilityUnconfirmedError  ``WAIT`` / ``WAITAOF`` fell short in time, or Redis failed
    ├── RefusedJobError         a queued job names a function workers do not run (a forged job)
    ├── NotReplicatedError      behind sentinels, no replica confirmed a write in time: do not acknowledge it
    ├── AlertError              an alert webhook or the alert routes (``bot.alerts``)
    │   ├── AlertPayloadError       a webhook body is malformed; the message is the 400 reason its sender sees
    │   ├── AlertConfigError        ``CHATOPS_ALERTS_FILE`` is wrong (also a ``BotConfigurationError``)
    │   └── AlertGroupBusyError     a worker holds the group's lock (a click waits briefly, then says so)
    └── MarkerError             a deploy marker refused (``bot.changes.markers``); ``status``: 400, 413 or 422

A decision that loses a race is not an error: ``Approvals.decide`` answers with who decided
first and what. ``agent.errors.LeaseLostError`` (another worker owns a run) is the agent's.
"""

from __future__ import annotations

from tools.config_errors import problems_message


class BotError(Exception):
    """Root of every error the bot raises."""


class BotConfigurationError(BotError):
    """The bot was wired wrongly (programmer or deployment error); raised at once."""


class RefusedJobError(BotError):
    """A job in a worker's queue names a function that is not one of the worker's jobs; it is
    refused without being imported (whoever wrote it into Redis does not choose what runs)."""


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
    """``user`` may not decide this approval (``bot.policy.deciders`` refused; ``reason`` says why)."""

    def __init__(self, user: str, reason: str = "") -> None:
        super().__init__(f"{user} may not decide this approval" + (f": {reason}" if reason else ""))
        self.user = user
        self.reason = reason


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


class NotReplicatedError(BotError):
    """``bot.runs.replication.Replication.confirm``: no replica confirmed the caller's writes in time.

    Behind sentinels a failover promotes a replica; a write only the old master had is gone. So
    what Slack is told was stored (an event answered 200, a click decided) must be on a replica
    first: the caller answers with an error instead, and Slack (or the person) tries again.
    """

    def __init__(self, what: str) -> None:
        super().__init__(f"not confirmed by a replica: {what}")
        self.what = what


class AlertError(BotError):
    """Root of the errors of ``bot.alerts``: alert webhooks, their matchers and routes."""


class AlertPayloadError(AlertError):
    """A webhook body cannot be taken: not JSON, a wrong version, a missing or mistyped field.

    ``reason`` (the message) is short and names the field (``alerts[0].startsAt: ...``): the web
    receiver answers 400 with it, so the sender's logs say what to fix.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class MarkerError(BotError):
    """A deploy marker cannot be taken: a malformed body (400), one over its size (413), or
    targets the inventory does not have (422). ``reason`` (the message) names the field or the
    target: the web receiver answers ``status`` with it, and ``chatops changes add`` prints it."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class AlertGroupBusyError(AlertError):
    """A worker is applying a notification to the alert group (it holds the group's lock) for
    longer than a click waits; the clicker is told to click again, and nothing changed."""

    def __init__(self, group: str) -> None:
        super().__init__(f"alert group {group} is being updated")
        self.group = group


class AlertConfigError(AlertError, BotConfigurationError):
    """``CHATOPS_ALERTS_FILE`` has one or more mistakes; each problem names the route and field.

    ``problems`` are the problems without the file name; the message repeats the file on every
    line, so one line copied from a log still says which file to fix.
    """

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = list(problems)
        super().__init__(problems_message("the alert routes file", path, self.problems))


class PolicyConfigError(BotConfigurationError):
    """``CHATOPS_POLICY_FILE`` has one or more mistakes; each problem names the rule and field.

    ``problems`` are the problems without the file name; the message repeats the file on every line.
    """

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = list(problems)
        super().__init__(problems_message("the policy file", path, self.problems))
