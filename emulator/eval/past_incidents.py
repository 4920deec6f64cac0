"""A scenario's past incidents: what the bot remembers of earlier threads before the run starts.

::

    incidents:
      - ago: 9d                        # when that run ended, before the scenario's start
        question: checkout on web-03 times out   # or alert: {name: ..., labels: {...}}
        targets: [web-03, db-01]       # the targets its calls ran on
        root_cause: pgbouncer on db-01 had no free server connection   # the supported hypothesis
        quotes: ["cl_waiting=212"]      # its verified quotes
        answer: The pool of orders on db-01 was full ...
        fixes: [{tool: pgbouncer_reload, target: db-01, approved_by: U0CAROL}]
        disputed: false                # a 👎 on its answer

The session stores them in the memory of the run's channel (``bot.memory``: the same record a
finished run leaves, through the same store) once the bot is up and before the run starts, so the
run meets them as every run does: the most similar in its first message, quoted as the bot's
notes, and through ``similar_incidents``. They are data, like every incident: the bot's framing
says so, and nothing in them can approve or run anything. Their ids and times come from the
scenario and its start, so a replayed run sees the same bytes. A scenario without ``incidents:``
stores none (its recordings stay what they were).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import redis
from pydantic import Field

from bot.keys import Keys
from bot.memory.incident import Action, Incident, Supported
from bot.memory.store import IncidentStore
from emulator.eval.quantities import Age
from emulator.eval.strict import Strict

MAX_INCIDENTS = 10
RETENTION_DAYS = 180  # the bot's default (CHATOPS_MEMORY_DAYS)
_TEXT = 2000


class PastAlert(Strict):
    name: str = Field(min_length=1, max_length=200)
    labels: dict[str, str] = Field(default_factory=dict, max_length=20)


class PastFix(Strict):
    tool: str = Field(min_length=1, max_length=200)
    target: str = Field(default="", max_length=200)
    approved_by: str = Field(default="", max_length=200)


class PastIncident(Strict):
    ago: Age
    question: str = Field(default="", max_length=_TEXT)
    alert: PastAlert | None = None
    targets: tuple[str, ...] = Field(default=(), max_length=20)
    root_cause: str = Field(min_length=1, max_length=_TEXT)
    quotes: tuple[str, ...] = Field(default=(), max_length=3)
    answer: str = Field(default="", max_length=_TEXT)
    fixes: tuple[PastFix, ...] = Field(default=(), max_length=20)
    disputed: bool = False


def incident_problems(incidents: Sequence[PastIncident], days: float = RETENTION_DAYS) -> list[str]:
    """What is wrong with a scenario's ``incidents:``, each ``incidents[N].KEY: what; fix: ...``."""
    problems = []
    if len(incidents) > MAX_INCIDENTS:
        problems.append(f"incidents: more than {MAX_INCIDENTS}; fix: keep the ones the scenario is about")
    for index, past in enumerate(incidents):
        if not past.question and past.alert is None:
            problems.append(f"incidents[{index}]: neither question nor alert; fix: say what was asked")
        if past.ago <= 0 or past.ago >= days * 86400:
            problems.append(
                f"incidents[{index}].ago: must be within the bot's memory ({days:g} days); fix: e.g. 9d"
            )
    return problems


def incident_records(
    name: str, incidents: Sequence[PastIncident], channel: str, started_at: float
) -> list[Incident]:
    """The scenario's incidents as the memory keeps them, in the run's ``channel`` (public)."""
    records = []
    for index, past in enumerate(incidents):
        at = started_at - past.ago
        records.append(
            Incident(
                id=hashlib.blake2b(f"{name}:{index}".encode(), digest_size=16).hexdigest(),
                channel=channel,
                private=False,
                thread_ts=f"{int(at)}.{index:06d}",
                link="",
                at=at,
                requester="U0PAST" if past.alert is None else "Alertmanager",
                question=past.question,
                alert_name=past.alert.name if past.alert is not None else "",
                labels=dict(past.alert.labels) if past.alert is not None else {},
                targets=past.targets,
                status="completed",
                conclusion="root_cause_found",
                answer=past.answer,
                supported=(Supported(past.root_cause, past.quotes),),
                actions=tuple(Action(f.tool, f.target, f.approved_by) for f in past.fixes),
                feedback="down" if past.disputed else "",
            )
        )
    return records


def seed_incidents(
    name: str,
    incidents: Sequence[PastIncident],
    *,
    redis_url: str,
    key_prefix: str,
    channel: str,
    started_at: float,
) -> int:
    """Store the scenario's incidents in the session's memory; how many."""
    if not incidents:
        return 0
    client = redis.Redis.from_url(redis_url)
    try:
        store = IncidentStore(client, Keys(key_prefix), retention_days=RETENTION_DAYS)
        for incident in incident_records(name, incidents, channel, started_at):
            store.save(incident)
    finally:
        client.close()
    return len(incidents)
