"""The last step of a finished run's report: its incident, written to the memory (``bot.memory``).

A run that ended in any way is remembered (a failed one says what was tried); a runtime without a
memory (``CHATOPS_MEMORY_DAYS=0``, tests) skips it. Raising leaves the step undone: the sweep's
job tries it again, and the store replaces the record, never duplicates it.
"""

from __future__ import annotations

from agent.types import RunResult
from bot.runs.incident_capture import capture
from bot.runs.runtime import Runtime
from bot.runs.service import RunService
from tools.safety import Redactor


def remember(runtime: Runtime, service: RunService, run_id: str, result: RunResult) -> None:
    memory = runtime.memory
    if memory is None:
        return
    record = service.get(run_id)
    if record is None:
        return
    alert = None
    facts_of = getattr(runtime.alerts, "alert_facts", None)  # a custom seam may not have it
    if callable(facts_of):
        alert = facts_of(runtime, run_id)
    incident = capture(
        record,
        result,
        service.memory(run_id).load_messages(),
        at=runtime.clock(),
        redact=runtime.redact or Redactor().redact,  # none configured: the built-in patterns still apply
        facts=runtime.channel_facts,
        alert=alert,
    )
    memory.store.save(incident)
