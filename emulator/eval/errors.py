"""The evaluation harness's errors."""

from __future__ import annotations


class ScenarioFileError(ValueError):
    """A scenario file that cannot be used: the message names the file, the place in it and the fix,
    one problem a line."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__("\n".join(f"{source}: {problem}" for problem in problems))


class ScoringInputError(ValueError):
    """A run's record the scorer cannot read (findings that are not the runtime's shape, an audit
    field the audit had to cut): scoring it would give a number that means nothing."""


class EvalError(RuntimeError):
    """The harness could not run a scenario to its end; the message says why."""
