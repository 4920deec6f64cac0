"""A run's tool list: decided by its first segment, kept for the whole run.

The tool list is part of the model's cacheable prefix, and a run is several jobs (its start, a
resume after each decision or reply), each building its tools anew: an MCP server whose list
changed between two of them would change the run's tools mid-run. So the first segment's list is
recorded with the run (``bot.runs.record``: ``OfferedTool``, written with the job's first write)
and every later segment offers exactly those names, in that order:

* a recorded tool the current build still has and the policy still allows: the current tool;
* a recorded tool its source no longer lists (an MCP server stopped listing it, or is down and
  was never listed in this process): a ``WithdrawnTool`` with the recorded definition, so the
  prefix is unchanged, whose every call answers an ``Error: ...`` result the model reads;
* a recorded tool the policy now denies in this channel (the build lists it, the policy's list
  leaves it out; or, for one no longer listed, a deny rule now takes its name and category):
  dropped. Security beats caching: a denied tool is never offered from the record;
* a tool that appeared since the run started: not offered until a new run.

A run recorded before there was a list (or whose first job died before writing it) is offered
the current list, which is recorded then.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent.tooling import Tool, ToolCategory, ToolResult
from agent.types import ToolDef
from bot.runs.record import OfferedTool


@dataclass(frozen=True)
class RunTools:
    """The tools one segment offers, and the list to record (``None``: the run has one already)."""

    tools: list[Tool]
    record: list[OfferedTool] | None = None


def tool_source(tool: Tool) -> str:
    """Where ``tool`` comes from, for the error its stand-in answers: an MCP tool's server
    (``tools.mcp.adapter.McpTool.server``, also through the policy's wrapper), else ``""``."""
    server = getattr(tool, "server", None)
    return f"MCP server {server}" if isinstance(server, str) and server else ""


def offered(tool: Tool) -> OfferedTool:
    return OfferedTool(definition=tool.definition, category=tool.category, source=tool_source(tool))


def withdrawn_error(entry: OfferedTool) -> str:
    source = entry.source or "this worker's tool list"
    return (
        f"Error: tool {entry.definition.name} is no longer offered ({source} stopped listing it); "
        "it was offered when this run started"
    )


class WithdrawnTool:
    """A tool the run was offered at its start whose source stopped listing it: offered with the
    definition the model was shown (the prefix stays), every call refused with an error result.

    It is read-only to the loop, so a call of it is answered at once, never put before a person."""

    parallel = True
    timeout = 1.0
    category = ToolCategory.READ_ONLY

    def __init__(self, entry: OfferedTool) -> None:
        self.entry = entry

    @property
    def definition(self) -> ToolDef:
        return self.entry.definition

    def refusal(self, arguments: str) -> str:
        return withdrawn_error(self.entry)

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        return ToolResult(withdrawn_error(self.entry), is_error=True)

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        return None


def run_tools(
    recorded: Sequence[OfferedTool] | None,
    listed: Sequence[Tool],
    allowed: Sequence[Tool],
    still_allowed: Callable[[OfferedTool], bool],
) -> RunTools:
    """This segment's tools from the run's ``recorded`` list, the build's ``listed`` tools (before
    the policy) and the ``allowed`` ones (after it); ``still_allowed``: whether the policy now
    lets a run here be offered a recorded tool no longer listed (by its name and category)."""
    if recorded is None:
        return RunTools(list(allowed), [offered(tool) for tool in allowed])
    current = {tool.definition.name: tool for tool in allowed}
    known = {tool.definition.name for tool in listed}
    tools: list[Tool] = []
    for entry in recorded:
        name = entry.definition.name
        tool = current.get(name)
        if tool is not None:
            tools.append(tool)
        elif name not in known and still_allowed(entry):
            tools.append(WithdrawnTool(entry))
        # else: the build lists it and the policy leaves it out (or a deny rule takes it): dropped
    return RunTools(tools)
