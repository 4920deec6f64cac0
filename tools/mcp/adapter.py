"""``McpTool``: one tool of an MCP server, shaped as ``agent.tooling.Tool``.

The approval gate is the loop's, as for every tool: a call of a mutating or destructive MCP tool
without ``confirmed_by`` (written by the loop after a person approved) is refused here too.

A destructive MCP tool has no dry run (MCP has no such thing). Its ``preview`` therefore says so
plainly, lists every argument, and returns the call's canonical arguments as the ``plan``; the
approval stores that plan, and ``execute`` refuses unless the approved plan equals the arguments
it is asked to run. Destructive approvals need an approver other than the requester (the
approval policy's rule for every destructive call).

Where it runs (``placement``) follows from its server's configuration: a server bound to an
inventory target acts on that target, any other is the worker's own.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent.arguments import CONFIRMED_BY, checked_arguments
from agent.errors import ArgumentsRejected
from agent.tooling import APPROVAL_GRANT, APPROVED_PLAN, ToolCategory, ToolResult
from agent.types import ToolDef
from tools.base import error_result
from tools.errors import McpCallError
from tools.mcp.categories import Decision
from tools.mcp.pool import Connection
from tools.mcp.results import to_result
from tools.mcp.schemas import argument_problems
from tools.placement import TARGET_KINDS, WORKER, Placement

_CONFIRMED_BY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")


def canonical(arguments: dict[str, Any]) -> str:
    """The arguments as one stable JSON text: what a destructive approval is bound to."""
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class McpTool:
    """A server tool offered as ``<server>_<tool>`` with its checked schema and decided category."""

    def __init__(
        self,
        connection: Connection,
        remote_name: str,
        name: str,
        description: str,
        schema: dict[str, Any],
        decision: Decision,
        timeout: float,
    ) -> None:
        self.connection = connection
        self.server = connection.server.name
        self.remote_name = remote_name
        self.decision = decision
        self._schema = schema
        self._timeout = timeout
        self._definition = ToolDef(name=name, description=description, parameters=schema)

    @property
    def definition(self) -> ToolDef:
        return self._definition

    @property
    def category(self) -> ToolCategory:
        return self.decision.category

    @property
    def parallel(self) -> bool:
        return self.decision.parallel

    @property
    def timeout(self) -> float:
        return self._timeout

    @property
    def placement(self) -> Placement:
        """A server bound to a target acts on that target (its tools are offered there only, whatever
        kind it is); any other server is the worker's own: its tools run where the worker runs, through
        the worker's session, and take no target (``tools.placement``)."""
        if self.connection.server.target is None:
            return WORKER
        return Placement.target(*TARGET_KINDS)

    def describe(self, arguments: str) -> str | None:
        """The card's exact request: server, remote tool and every argument."""
        try:
            args, _, _ = self._parse(arguments)
        except ValueError:
            return None
        return f"MCP server {self.server}: {self.remote_name} {canonical(args)}"

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        if self.category is not ToolCategory.DESTRUCTIVE:
            return None
        try:
            args, _, _ = self._parse(arguments)
        except ValueError as exc:
            return error_result(str(exc))
        shown = "\n".join(
            f"  {key} = {json.dumps(value, ensure_ascii=False)}" for key, value in sorted(args.items())
        )
        text = (
            f"This MCP tool has no dry run: approving runs {self.definition.name} "
            f"({self.remote_name} on MCP server {self.server}) with exactly these arguments:\n"
            f"{shown or '  (no arguments)'}"
        )
        return ToolResult(output=text, plan=canonical(args))

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        try:
            args, confirmed_by, plan = self._parse(arguments)
        except ValueError as exc:
            return error_result(str(exc))
        if self.category.requires_confirmation and confirmed_by is None:
            return error_result(
                f"{self.definition.name} changes the system: it runs only after a person approves the call"
            )
        if self.category is ToolCategory.DESTRUCTIVE and plan != canonical(args):
            return error_result(
                f"{self.definition.name}: the arguments differ from the ones approved; not run"
            )
        try:
            result = self.connection.call(
                self.remote_name, args, timeout=min(timeout, self._timeout), budget=timeout
            )
        except McpCallError as exc:
            return error_result(str(exc))
        return to_result(result)

    def _parse(self, arguments: str) -> tuple[dict[str, Any], str | None, str | None]:
        """(the server's arguments, the approver, the approved plan); ``ValueError`` says why not."""
        try:
            payload = checked_arguments(arguments, (APPROVED_PLAN,))  # parsed once per text
        except ArgumentsRejected as exc:
            raise ValueError(str(exc)) from exc
        confirmed_by = payload.pop(CONFIRMED_BY, None)
        plan = payload.pop(APPROVED_PLAN, None)
        payload.pop(APPROVAL_GRANT, None)
        if confirmed_by is not None and not (
            isinstance(confirmed_by, str) and _CONFIRMED_BY.fullmatch(confirmed_by)
        ):
            raise ValueError("confirmed_by must be the approver's Slack user ID")
        if plan is not None and not isinstance(plan, str):
            raise ValueError("approved_plan must be text")
        problems = argument_problems(self._schema, payload)
        if problems:
            raise ValueError(f"invalid arguments for {self.definition.name}: {problems}")
        return payload, confirmed_by, plan
