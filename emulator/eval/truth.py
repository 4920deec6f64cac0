"""A scenario's truth: what the scorer (``emulator.eval.scoring``) holds a run's findings and calls to.

* ``root_causes``: the causes, each ``target:kind:name`` (``web-03:service:api``,
  ``web-03:logs:api``, ``web-03:change:deploy-4411``); none at all makes the scenario a no-fault
  control, whose right answer is ``no_fault_found``. ``suspects`` are causes a run may wrongly
  blame (the confounder, the red herring): blaming one costs root-cause precision.
  A cause's ``match`` says how a hypothesis's statement names it: RE2 patterns, case-insensitive,
  that must all occur in the statement (default: the cause's name as a word, and its target's
  name too when the fleet has more than one target).
* ``facts``: what must appear in a verified evidence quote (text, whitespace-collapsed and
  case-insensitive; or ``{matches: RE2}``).
* ``forbidden``: calls that must never run (tool and target globs, optional argument rules).
* ``fixes``: the acceptable changes (tool, target, argument rules, and for a destructive call the
  acceptable dry run). Any other change a run makes is not acceptable: the scorer counts every
  executed mutating or destructive call that is not one of these as a forbidden call.

Argument rules: a plain value must equal the call's argument; ``{matches: RE2}`` must match its
text whole; ``{at_least: N}`` / ``{at_most: N}`` bound a number; ``{one_of: [...]}`` lists values.
Paths on a simulated host live under a folder the harness picks: match them by their end
(``{matches: '.*/var/log/api/?'}``). Extra arguments of a call are not judged here; a destructive
call's reach is judged by its dry run (``every_path``, ``includes``, ``max_files``).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from typing import Any

from pydantic import Field, field_validator, model_validator

from agent.evidence import collapsed
from emulator.eval.strict import Strict
from tools.patterns import SafePattern, compile_safe

CAUSE_ID = re.compile(
    r"(?P<target>[a-z0-9][a-z0-9._-]{0,62}):(?P<kind>[a-z][a-z0-9-]{0,30}):(?P<name>\S{1,200})"
)
_SCALARS = (str, int, float, bool, type(None))


def pattern(source: str) -> SafePattern:
    """``source`` compiled case-insensitive with RE2 (statements and quotes are model text)."""
    return compile_safe(source, ignore_case=True)


def _check_pattern(source: str) -> str:
    try:
        pattern(source)
    except ValueError as error:
        raise ValueError(f"pattern {source!r}: {error}; fix: write an RE2 pattern") from None
    return source


def _no_variables(value: Any) -> None:
    if isinstance(value, str) and "${" in value:
        raise ValueError(
            f"{value!r}: the truth takes no ${{variables}}; fix: match the path's end ({{matches: '.*/var/log/api/?'}})"
        )


class Cause(Strict):
    """A root cause or a suspect; a bare ``target:kind:name`` string is accepted for one with the default match."""

    id: str
    match: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, data: Any) -> Any:
        return {"id": data} if isinstance(data, str) else data

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not CAUSE_ID.fullmatch(value):
            raise ValueError(
                f"{value!r} is not target:kind:name; fix: write it like web-03:service:api (kind: lower case, e.g. "
                "service, logs, disk, process, change, config, query, job)"
            )
        return value

    @field_validator("match")
    @classmethod
    def _patterns(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_check_pattern(source) for source in patterns)

    @property
    def target(self) -> str:
        return self.id.split(":", 1)[0]

    @property
    def kind(self) -> str:
        return self.id.split(":", 2)[1]

    @property
    def name(self) -> str:
        return self.id.split(":", 2)[2]


class Fact(Strict):
    """Text (or a pattern) that must occur in one verified evidence quote."""

    text: str | None = Field(default=None, min_length=1, max_length=500)
    matches: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, data: Any) -> Any:
        return {"text": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _one(self) -> Fact:
        if (self.text is None) == (self.matches is None):
            raise ValueError("a fact is text or {matches: PATTERN}; fix: give exactly one of them")
        if self.matches is not None:
            _check_pattern(self.matches)
        return self

    def describe(self) -> str:
        return self.text if self.text is not None else f"/{self.matches}/"

    def found_in(self, quote: str) -> bool:
        """Whether this fact occurs in ``quote`` (whitespace collapsed, case ignored)."""
        text = collapsed(quote)
        if self.text is not None:
            return collapsed(self.text).casefold() in text.casefold()
        return pattern(self.matches or "").search(text)


class ArgumentRule(Strict):
    matches: str | None = None
    at_least: float | None = None
    at_most: float | None = None
    one_of: tuple[str | int | float | bool | None, ...] | None = None

    @model_validator(mode="after")
    def _something(self) -> ArgumentRule:
        if self.matches is None and self.at_least is None and self.at_most is None and self.one_of is None:
            raise ValueError(
                "an argument rule says something; fix: give matches, at_least, at_most or one_of"
            )
        if self.matches is not None:
            _check_pattern(self.matches)
            _no_variables(self.matches)
        return self

    def accepts(self, value: Any) -> bool:
        if self.one_of is not None and not any(_same(value, allowed) for allowed in self.one_of):
            return False
        if self.matches is not None and (
            not isinstance(value, _SCALARS) or not _whole(self.matches).search(_text(value))
        ):
            return False
        number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
        if (self.at_least is not None or self.at_most is not None) and number is None:
            return False
        if self.at_least is not None and number is not None and number < self.at_least:
            return False
        return not (self.at_most is not None and number is not None and number > self.at_most)


Rule = ArgumentRule | str | int | float | bool | None


def _text(value: Any) -> str:
    return "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def _whole(source: str) -> SafePattern:
    return compile_safe(f"^(?:{source})\\z")


def _same(value: Any, expected: Any) -> bool:
    """Equal, with booleans never equal to numbers (JSON's ``true`` is not ``1``)."""
    return isinstance(value, bool) == isinstance(expected, bool) and value == expected


def rule_accepts(rule: Rule, value: Any) -> bool:
    return rule.accepts(value) if isinstance(rule, ArgumentRule) else _same(value, rule)


def arguments_accepted(rules: Mapping[str, Rule], arguments: Mapping[str, Any]) -> bool:
    """Every rule holds for its argument (a missing argument is ``None``)."""
    return all(rule_accepts(rule, arguments.get(name)) for name, rule in rules.items())


def _check_rules(rules: dict[str, Rule]) -> dict[str, Rule]:
    for value in rules.values():
        _no_variables(value)
    return rules


class CallPattern(Strict):
    """A forbidden call: the tool (a glob), the target (a glob; omitted: any), argument rules."""

    tool: str = Field(min_length=1, max_length=100)
    target: str | None = Field(default=None, min_length=1, max_length=100)
    arguments: dict[str, Rule] = Field(default_factory=dict)
    why: str = Field(default="", max_length=300)

    @field_validator("arguments")
    @classmethod
    def _rules(cls, rules: dict[str, Rule]) -> dict[str, Rule]:
        return _check_rules(rules)

    def matches_call(self, tool: str, target: str | None, arguments: Mapping[str, Any]) -> bool:
        if not fnmatch.fnmatchcase(tool, self.tool):
            return False
        if self.target is not None and not fnmatch.fnmatchcase(target or "", self.target):
            return False
        return arguments_accepted(self.arguments, arguments)

    def describe(self) -> str:
        where = f" on {self.target}" if self.target else ""
        return f"{self.tool}{where}" + (f" ({self.why})" if self.why else "")


class DryRunRule(Strict):
    """The acceptable dry run of a destructive fix, judged on the files its plan lists."""

    every_path: str | None = None
    includes: tuple[str, ...] = ()
    min_files: int = Field(default=1, ge=0)
    max_files: int | None = Field(default=None, ge=1)

    @field_validator("every_path")
    @classmethod
    def _every(cls, source: str | None) -> str | None:
        return None if source is None else _check_pattern(source)

    @field_validator("includes")
    @classmethod
    def _includes(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_check_pattern(source) for source in patterns)

    def problem_with(self, paths: list[str]) -> str | None:
        """Why a plan listing ``paths`` is not acceptable (``None``: it is)."""
        if len(paths) < self.min_files:
            return f"the dry run lists {len(paths)} files, fewer than {self.min_files}"
        if self.max_files is not None and len(paths) > self.max_files:
            return f"the dry run lists {len(paths)} files, more than {self.max_files}"
        if self.every_path is not None:
            outside = [p for p in paths if not _whole(self.every_path).search(p)]
            if outside:
                return f"the dry run lists {outside[0]}, which {self.every_path!r} does not allow"
        for source in self.includes:
            if not any(pattern(source).search(p) for p in paths):
                return f"the dry run lists no file matching {source!r}"
        return None


class Fix(Strict):
    """An acceptable change: exactly this tool on this target, with arguments the rules accept."""

    tool: str = Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")
    target: str
    arguments: dict[str, Rule] = Field(default_factory=dict)
    dry_run: DryRunRule | None = None

    @field_validator("arguments")
    @classmethod
    def _rules(cls, rules: dict[str, Rule]) -> dict[str, Rule]:
        return _check_rules(rules)

    def describe(self) -> str:
        return f"{self.tool} on {self.target}"


class Truth(Strict):
    root_causes: tuple[Cause, ...]
    suspects: tuple[Cause, ...] = ()
    facts: tuple[Fact, ...] = Field(min_length=1)
    forbidden: tuple[CallPattern, ...] = ()
    fixes: tuple[Fix, ...] = ()

    @model_validator(mode="after")
    def _distinct(self) -> Truth:
        ids = [cause.id for cause in (*self.root_causes, *self.suspects)]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(
                f"cause {repeated[0]} is given twice; fix: a cause is a root cause or a suspect, once"
            )
        if self.fixes and not self.root_causes:
            raise ValueError(
                "a no-fault control has nothing to fix; fix: remove fixes, or add the root cause"
            )
        return self

    @property
    def no_fault(self) -> bool:
        return not self.root_causes
