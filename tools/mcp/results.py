"""An MCP ``CallToolResult`` as the ``ToolResult`` the model reads.

Text blocks are kept; ``structuredContent`` is added as JSON (unless a text block already says
exactly that); images, audio and resources are *described* (kind, type, size, URI), never
dumped: base64 is noise to a model and a blob may be huge. ``isError`` becomes an ``Error: ...``
result. Redaction and the output cap are applied afterwards by the loop, as for every tool.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types

from agent.tooling import ToolResult

_EXCERPT_CHARS = 500


def to_result(result: mcp_types.CallToolResult) -> ToolResult:
    parts = [_describe_block(block) for block in result.content]
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        text = json.dumps(structured, ensure_ascii=False, sort_keys=True, default=str)
        # The SDK wraps a plain return value as {"result": value}: the text already says it.
        wrapped = (
            isinstance(structured, dict)
            and list(structured) == ["result"]
            and str(structured["result"]) in parts
        )
        if not wrapped and not any(_same_json(part, structured) for part in parts):
            parts.append(text)
    output = "\n".join(part for part in parts if part) or "(the tool returned no content)"
    if result.is_error:
        return ToolResult(output=f"Error: {output}", is_error=True)
    return ToolResult(output=output)


def _same_json(text: str, value: Any) -> bool:
    try:
        return bool(json.loads(text) == value)
    except ValueError:
        return False


def _describe_block(block: Any) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        kind = "image" if isinstance(block, mcp_types.ImageContent) else "audio"
        size = len(block.data) * 3 // 4
        return f"[{kind}: {block.mime_type}, about {size} bytes, not shown]"
    if isinstance(block, mcp_types.ResourceLink):
        return (
            f"[resource link: {block.uri} ({block.name}{', ' + block.mime_type if block.mime_type else ''})]"
        )
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        mime = f", {resource.mime_type}" if resource.mime_type else ""
        if isinstance(resource, mcp_types.TextResourceContents):
            excerpt = resource.text[:_EXCERPT_CHARS]
            more = (
                f" ... ({len(resource.text)} characters in all)"
                if len(resource.text) > _EXCERPT_CHARS
                else ""
            )
            return f"[resource {resource.uri}{mime}]\n{excerpt}{more}"
        return f"[resource {resource.uri}{mime}: binary, not shown]"
    return f"[{getattr(block, 'type', type(block).__name__)} content, not shown]"
