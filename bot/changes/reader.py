"""The journal's readers in the worker: the model's read-only tool ``recent_changes(target, since?,
until?)`` and the alert runs' window before ``startsAt`` (``bot.alerts.changes``).

Where it executes: in the worker, which reads the targets' journals from Redis, as
``similar_incidents`` reads the memory. That is safe because every change is sealed with its
target's key (``bot.changes.journal``): the worker holds the secret and checks each seal, so an
entry nobody with the key wrote is skipped and never shown; and it works for every kind of target
(a deploy marker on an SSH or Kubernetes target has no runner to ask), without a round trip to a
runner that may be busy or gone. The worker never scans a host here: it only reads.

Which targets a run may read: the ones its channel may name (``targets_for(channel)``: the fleet's
``CHATOPS_CHANNEL_TARGETS`` rule, ``bot.fleet.routing``), bound in code when the run's tools are
built, never from the model. The tool is a ``TargetedTool`` over those targets, like every host
tool: its schema lists them, an unknown one is an ``Error:`` naming them, and each answer says
``[target]``. An alert's run reads its alert's target only when its channel may name it.

A Kubernetes target has no runner scanning it: its rollout history and its namespace's events are
its change journal (``tools.changes.kubernetes``), read from its API with its own kubectl context
and namespace when the tool is called (``live``), beside the deploy markers its journal holds.

Without ``CHATOPS_RUNNER_SECRET`` there is no journal (``journal`` is ``None``: nothing could seal
or check an entry): the tool is still offered, and answers that plainly.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from pydantic import BaseModel, Field

from agent.tooling import Tool, ToolCategory
from bot.changes.errors import NotATime
from bot.changes.journal import DAY, ChangeJournal
from bot.changes.text import DATA_NOTE, describe, parse_when, utc
from tools.base import FunctionTool, ToolContext, tool
from tools.changes.record import Change
from tools.errors import ToolCallError
from tools.inventory import Target
from tools.placement import WORKER
from tools.targets import TargetedTool

DEFAULT_WINDOW = 6 * 3600  # recent_changes without ``since``: the last six hours
MAX_LISTED = 100  # changes read for one answer (the newest of the window)
MAX_ANSWER = 12_000  # characters of one answer; the changes that do not fit are counted
NO_JOURNAL = (
    "There is no change journal: CHATOPS_RUNNER_SECRET is not set, and without it no change can be "
    "sealed or checked, so none is recorded or read. Ask an operator to set it if you need this."
)

LiveChanges = Callable[[Target, ToolContext, float, float], list[Change]]
"""A target's changes read from its own API now (``bot.ops.fleet.kubernetes_changes_of``)."""

TargetsFor = Callable[[str], tuple[Sequence[Target], str | None]]
"""A channel's targets and its default target (``bot.fleet.routing.Fleet.targets_for``)."""


class RecentChangesArgs(BaseModel):
    since: str | None = Field(
        default=None,
        max_length=64,
        description="Start of the window: an RFC 3339 time (2026-12-01T10:00:00Z) or a duration before now (30m, 2h, 1d). Default: 6h.",
    )
    until: str | None = Field(
        default=None, max_length=64, description="End of the window, in the same forms. Default: now."
    )


@dataclass(frozen=True)
class ChangeReader:
    """The journal (``None``: no secret, no journal), each channel's targets, the retention (for
    what an empty answer says the journal covers) and a clock (Redis's in production)."""

    journal: ChangeJournal | None
    targets_for: TargetsFor
    days: int = 30
    clock: Callable[[], float] = time.time
    live: LiveChanges | None = None  # a Kubernetes target's rollouts and events, read from its API

    def tools(self, channel: str) -> list[Tool]:
        """``recent_changes`` over the targets a run in ``channel`` may name (none: no tool)."""
        targets, default = self.targets_for(channel)
        if not targets:
            return []
        routes = {target.name: (target, self._bound(target.name, target)) for target in targets}
        return [TargetedTool(self._bound(""), routes, default=default)]

    def may_read(self, channel: str, target: str) -> bool:
        return any(known.name == target for known in self.targets_for(channel)[0])

    def before(self, channel: str, target: str, at: float, seconds: float, *, limit: int) -> list[Change]:
        """The changes of ``target`` in the ``seconds`` before ``at`` (oldest first), if a run in
        ``channel`` may read them; none without a journal."""
        if self.journal is None or not self.may_read(channel, target):
            return []
        return self.journal.between(target, at - seconds, at, limit=limit)

    def answer(
        self,
        target: str,
        since: str | None,
        until: str | None,
        live: Callable[[float, float], list[Change]] | None = None,
    ) -> str:
        """What ``recent_changes`` says about ``target`` (already checked against the channel);
        ``live``: the target's own changes read now (a Kubernetes target's), beside its journal."""
        if self.journal is None and live is None:
            return NO_JOURNAL
        now = self.clock()
        try:
            end = parse_when(until, now) if until else now
            start = parse_when(since, now) if since else end - DEFAULT_WINDOW
        except NotATime as error:
            raise ToolCallError(str(error)) from None
        if start > end:
            raise ToolCallError(f"since ({utc(start)}) is after until ({utc(end)})")
        found = self.journal.between(target, start, end, limit=MAX_LISTED) if self.journal else []
        if live is not None:
            found = sorted([*found, *live(start, end)], key=lambda change: change.at)[-MAX_LISTED:]
        window = f"on {target} between {utc(start)} and {utc(end)}"
        if not found:
            return f"No change recorded {window}. {self._covers(target, start)}"
        return _listed(found, window)

    def _covers(self, target: str, start: float) -> str:
        """What the journal holds before an empty window: its newest earlier change, or nothing."""
        if self.journal is None:
            return NO_JOURNAL
        kept_from = self.clock() - self.days * DAY
        earlier = self.journal.between(target, kept_from, start, limit=1)
        if earlier:
            last = earlier[-1]
            return (
                f"The journal keeps {self.days} days; the last change recorded on {target} before "
                f"that was at {utc(last.at)} ({last.kind})."
            )
        return (
            f"The journal keeps {self.days} days and has no change recorded on {target} before that either."
        )

    def _bound(self, target: str, known: Target | None = None) -> FunctionTool[Any]:
        reader = self
        live = self.live if known is not None and known.via == "kubernetes" else None

        @tool(category=ToolCategory.READ_ONLY, parallel=True, timeout=15, placement=WORKER)
        def recent_changes(args: RecentChangesArgs, ctx: ToolContext) -> str:
            """What changed on a target (packages, watched files with their diffs, units, restarts, reboots, crontabs, deploys; a Kubernetes target's rollouts and events) in a window, oldest first; default: the last 6 hours."""
            if not target:
                raise ToolCallError("recent_changes needs a target")
            read = partial(live, known, ctx) if live is not None and known is not None else None
            return reader.answer(target, args.since, args.until, read)

        return recent_changes


def _listed(found: list[Change], window: str) -> str:
    head = f"{len(found)} change(s) {window}, oldest first{' (the newest ' + str(MAX_LISTED) + ')' if len(found) >= MAX_LISTED else ''}. {DATA_NOTE}"
    parts = [head]
    size = len(head)
    for shown, change in enumerate(found):
        text = describe(change)
        if size + len(text) + 1 > MAX_ANSWER:
            parts.append(f"[{len(found) - shown} more change(s) not shown: ask for a shorter window]")
            break
        parts.append(text)
        size += len(text) + 1
    return "\n".join(parts)
