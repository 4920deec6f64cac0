"""Plain data as a run leaves it: findings as shown (``Findings.as_json``) and flat audit entries."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from emulator.eval.truth import Truth

Quote = tuple[str, str, bool]  # ref, quote, verified


def hypothesis(
    statement: str, status: str = "supported", evidence: Sequence[Quote] = (("E1", "x", True),), **extra: Any
) -> dict[str, Any]:
    return {
        "id": extra.pop("id", None),
        "statement": statement,
        "status": status,
        "claimed_status": extra.pop("claimed_status", status),
        "evidence": [
            {"ref": ref, "quote": quote, "verified": verified, "problem": None if verified else "not found"}
            for ref, quote, verified in evidence
        ],
        **extra,
    }


def findings(*hypotheses: Mapping[str, Any], conclusion: str = "root_cause_found") -> dict[str, Any]:
    numbered = [{**h, "id": h["id"] or f"H{n}"} for n, h in enumerate(hypotheses, 1)]
    return {
        "conclusion": conclusion,
        "claimed_conclusion": conclusion,
        "confidence": "medium",
        "claimed_confidence": "medium",
        "version": 1,
        "hypotheses": numbered,
        "checked": [{"ref": "E1", "tool": "tail_log", "target": "web-03"}],
    }


def executed(
    tool: str,
    target: str = "web-03",
    category: str = "read_only",
    arguments: Mapping[str, Any] | None = None,
    *,
    refused: bool = False,
) -> dict[str, str]:
    return {
        "kind": "tool_refused" if refused else "tool_executed",
        "run_id": "r1",
        "at": "1.0",
        "tool": tool,
        "target": target,
        "category": category,
        "arguments": json.dumps({"target": target, **(arguments or {})}),
        "outcome": "ok",
    }


def approved(tool: str, target: str = "web-03", by: str = "U0APPROVER") -> dict[str, str]:
    return {
        "kind": "approval_decided",
        "run_id": "r1",
        "at": "1.0",
        "approval_id": "a1",
        "tool": tool,
        "status": "approved",
        "decided_by": by,
        "target": target,
    }


def plan(*paths: str) -> str:
    files = [
        {"path": p, "size": 5, "mtime_ns": 1, "dev": 1, "ino": n, "parent_dev": 1, "parent_ino": 2}
        for n, p in enumerate(paths)
    ]
    return json.dumps(
        {"version": 1, "created": 1.0, "cutoff": 0.5, "files": files, "matched": len(files), "complete": True}
    )


def truth(**fields: Any) -> Truth:
    return Truth.model_validate({"facts": ["x"], **fields})
