"""``chatops doctor``'s check of the MCP servers in the catalog: each is started and its tools listed."""

from __future__ import annotations

from bot.ops.doctor_check import Check, Outcome
from bot.settings import Settings
from tools.errors import ToolConfigError
from tools.registry import build_registry_from_settings


def check_mcp(settings: Settings) -> Check:
    try:
        registry = build_registry_from_settings(settings)  # starts each server and lists its tools
    except ToolConfigError as error:
        return Check(
            "mcp", Outcome.FAIL, f"the MCP servers cannot be loaded: {error}", "fix CHATOPS_TOOLS_FILE"
        )
    statuses = registry.mcp.statuses
    if not statuses:
        return Check("mcp", Outcome.PASS, "no MCP servers configured")
    lines = []
    failed, skipping = [], []
    for status in statuses:
        if status.error:
            failed.append(status.server)
            lines.append(f"{status.server} ({status.transport}): {status.error}")
            continue
        skipped = f", {len(status.skipped)} skipped" if status.skipped else ""
        lines.append(
            f"{status.server} ({status.transport}): {status.listed} tools listed, {len(status.offered)} offered{skipped}"
        )
        lines += [f"  not offered: {reason}" for reason in status.skipped]  # the tool and why
        if status.skipped:
            skipping.append(status.server)
    registry.close()
    if failed:
        return Check(
            "mcp",
            Outcome.FAIL,
            "\n".join(lines),
            f"start or fix {', '.join(failed)} (docs/TOOLS.md, MCP servers); their tools are not offered",
        )
    if skipping:
        return Check(
            "mcp",
            Outcome.WARN,
            "\n".join(lines),
            f"fix the tools {', '.join(skipping)} cannot offer, or leave them out with the server's `deny`",
        )
    return Check("mcp", Outcome.PASS, "\n".join(lines))
