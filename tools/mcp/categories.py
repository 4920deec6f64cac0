"""The category of an MCP tool, and why: the operator's override, the server's annotations, or the default.

MCP annotations are *hints* (the spec says so: a server may claim anything). So they count only
for a server the operator marked ``trust: annotations``:

* ``readOnlyHint: true`` -> read_only (parallel only when ``idempotentHint`` is true too);
* ``destructiveHint: false`` -> mutating;
* anything else, including a tool with no annotations at all (the spec's defaults are
  ``readOnlyHint: false``, ``destructiveHint: true``) -> destructive.

Every tool of an untrusted server (``trust: none``, the default) is mutating, whatever it claims:
a human approves each call. A per-tool ``category`` override always wins, in both directions.
"""

from __future__ import annotations

from dataclasses import dataclass

import mcp_types

from agent.tooling import ToolCategory
from tools.mcp.config import McpToolOverride, Trust


@dataclass(frozen=True)
class Decision:
    category: ToolCategory
    parallel: bool
    reason: str
    """``override``, ``annotation: ...`` or ``default: ...`` (shown by ``chatops tools list``)."""


def decide(
    annotations: mcp_types.ToolAnnotations | None, trust: Trust, override: McpToolOverride | None
) -> Decision:
    """The category of one MCP tool (see the module docstring for the rules)."""
    if override is not None and override.category is not None:
        category = override.category
        return Decision(category, False, f"override: {category.value}")
    if trust != "annotations":
        return Decision(ToolCategory.MUTATING, False, "default: untrusted server (trust: none)")
    if annotations is None:
        return Decision(
            ToolCategory.DESTRUCTIVE, False, "default: no annotations (spec defaults: destructive)"
        )
    if annotations.read_only_hint is True:
        parallel = annotations.idempotent_hint is True
        return Decision(
            ToolCategory.READ_ONLY,
            parallel,
            "annotation: readOnlyHint" + (" + idempotentHint" if parallel else ""),
        )
    if annotations.destructive_hint is False:
        return Decision(ToolCategory.MUTATING, False, "annotation: destructiveHint false")
    return Decision(ToolCategory.DESTRUCTIVE, False, "annotation: destructiveHint (or not read-only)")
