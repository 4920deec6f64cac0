"""The series a tool result carries reach ``ToolEnd`` only when the model read that result.

Through ``agent.run.Run`` with a scripted model: a tool whose result lists series (as
``prometheus_range``'s does), called until the loop detector replaces its text with a warning,
a tool that fails with series attached, and a refused call.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.config import RunConfig
from agent.events import Event, ToolEnd
from agent.loop_detection import LOOP_WARNING
from agent.memory import InMemoryMemory
from agent.run import Run
from agent.scripted import ScriptedModel, tool_call
from agent.series import Series, SeriesSet
from agent.tooling import ToolCategory, ToolResult
from agent.types import Message, RunStatus, ToolDef

SERIES = SeriesSet("up", "last 5 min, step 2s", (Series('up{job="node"}', ((1.0, 1.0), (3.0, 0.0))),))


@dataclass
class SeriesTool:
    """Returns the same listing with ``SERIES`` attached (an error when ``fails``)."""

    name: str = "ranges"
    fails: bool = False
    category: ToolCategory = ToolCategory.READ_ONLY
    parallel: bool = False
    timeout: float = 5.0

    @property
    def definition(self) -> ToolDef:
        return ToolDef(name=self.name, description="Series.")

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        return ToolResult('1 series:\nup{job="node"}: min 0 max 1', is_error=self.fails, series=SERIES)

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        return None


def ends(tools: list[SeriesTool], calls: list[str]) -> list[ToolEnd]:
    events: list[Event] = []
    model = ScriptedModel([*(tool_call(name) for name in calls), "done"])
    memory = InMemoryMemory([Message.user("is the node up?")])
    config = RunConfig(models=[model], memory=memory, tools=tools, on_event=events.append, evidence=True)
    result = Run(config).execute()
    assert result.status in (RunStatus.COMPLETED, RunStatus.LOOP_DETECTED)
    return [event for event in events if isinstance(event, ToolEnd)]


def test_a_result_the_model_read_carries_its_series_with_its_evidence_id() -> None:
    [end] = ends([SeriesTool()], ["ranges"])
    assert end.series == SERIES and end.evidence == "E1"


def test_a_result_replaced_by_the_loop_warning_carries_none() -> None:
    found = ends([SeriesTool()], ["ranges"] * 4)
    assert [end.series is not None for end in found] == [True, True, False, False]
    assert found[2].output == LOOP_WARNING.format(count=3)


def test_a_failed_or_refused_call_carries_none() -> None:
    failed, unknown = ends([SeriesTool(fails=True)], ["ranges", "nonexistent"])
    assert failed.is_error and failed.series is None
    assert not unknown.executed and unknown.series is None
