"""What every ``chatops doctor`` check answers (``bot.ops.doctor`` and its ``doctor_*`` checks):
a ``Check`` with its ``Outcome``, one PASS / WARN / FAIL line and how to fix it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

TIMEOUT = 10.0  # seconds for each network call a check makes


class Outcome(StrEnum):
    PASS = "PASS"
    WARN = "WARN"
    FAIL = "FAIL"


@dataclass(frozen=True)
class Check:
    name: str
    outcome: Outcome
    summary: str
    fix: str = ""

    def lines(self) -> list[str]:
        first, *rest = self.summary.splitlines() or [""]
        out = [f"{self.outcome.value}  {self.name:<8}  {first}"]
        out += [f"{'':16}{line}" for line in rest]
        if self.fix:
            out.append(f"{'':16}fix: {self.fix}")
        return out
