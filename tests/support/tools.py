"""Small real tools for tests of the loop: they count their executions and can block or fail."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.tooling import ToolCategory, ToolResult
from agent.types import ToolDef


@dataclass
class RecordingTool:
    """A tool that records every call's arguments and answers with ``respond(arguments)``."""

    name: str
    category: ToolCategory = ToolCategory.READ_ONLY
    parallel: bool = False
    timeout: float = 5.0
    respond: Callable[[dict[str, Any]], str] = lambda args: "ok"
    preview_text: str | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)
    active: int = 0
    max_active: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def definition(self) -> ToolDef:
        return ToolDef(name=self.name, description=f"The {self.name} tool.", parameters={"type": "object"})

    @property
    def executions(self) -> int:
        return len(self.calls)

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        parsed = json.loads(arguments)
        with self._lock:
            self.calls.append(parsed)
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            return ToolResult(self.respond(parsed))
        finally:
            with self._lock:
                self.active -= 1

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        if self.category is not ToolCategory.DESTRUCTIVE:
            return None
        return ToolResult(self.preview_text or f"would run {self.name} with {arguments}")


def sleeping(seconds: float, text: str = "done") -> Callable[[dict[str, Any]], str]:
    def respond(_: dict[str, Any]) -> str:
        time.sleep(seconds)
        return text

    return respond


def failing(message: str) -> Callable[[dict[str, Any]], str]:
    def respond(_: dict[str, Any]) -> str:
        raise RuntimeError(message)

    return respond
