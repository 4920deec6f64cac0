"""Evidence in scenario files: quotes taken from the real tool output at request time, citations in
reply texts, and ``findings:`` replies that call the runtime's ``update_findings``.

A scripted model cannot know in advance what a tool will print (sizes, dates, paths of the run),
so a scenario names *where* a quote is and the quote is read from the conversation when the reply
is made (``emulator.models.conversation``):

* ``{tool: largest_files, line: "api\\.log-"}``: the first line of the newest ``largest_files``
  result that holds a match of the regular expression, stripped (or only its group named
  ``quote``, when it has one: ``(?P<quote>...)``); its ``ref`` is that result's evidence id.
  Older results of the tool are searched when the newest has no such line (``disk_usage``
  before and after a clean-up). No result matches: the ref is the tool's newest id (``E0`` when
  it has none) and the quote an honest placeholder, ``(no line of largest_files's output matches
  api\\.log-)``, which the runtime's check shows as unverified: a script never makes up a quote
  that looks real.
* ``{cite: NAME}``: the scenario's named quote ``quotes: {NAME: {tool, line}}``, the same one
  reply texts cite with ``{cite[NAME]}``.
* ``{ref: E2, quote: "..."}``: given as it is, checked by nobody here: what a model that
  fabricates would send (the runtime shows it unverified).

Every mistake is found when the file is loaded and named with its place: an unknown key, a
status, conclusion or confidence outside the tool's values, a regex that does not compile, a
``cite`` or ``{quote[NAME]}`` that names no quote, an unknown ``{field}`` in a text.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent.evidence import FINDINGS_TOOL
from agent.findings import Conclusion, Confidence, HypothesisStatus
from agent.findings_tool import MAX_QUOTE
from emulator.models.conversation import Conversation
from emulator.models.errors import ScenarioError

TEXT_FIELDS = ("last_tool_result", "last_user_message", "tool_result", "evidence", "quote", "cite")
_KEYED_FIELDS = {"tool_result", "evidence", "quote", "cite"}
_NAMED_QUOTE_FIELDS = {"quote", "cite"}
_HYPOTHESIS_ID = re.compile(r"H[1-9][0-9]{0,2}")


def check_keys(where: str, mapping: Any, allowed: set[str]) -> Mapping[str, Any]:
    if not isinstance(mapping, Mapping):
        raise ScenarioError(f"{where}: expected a mapping, got {type(mapping).__name__}")
    unknown = set(mapping) - allowed
    if unknown:
        raise ScenarioError(
            f"{where}: unknown key {sorted(unknown)[0]!r} (allowed: {', '.join(sorted(allowed))})"
        )
    return mapping


def _text(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ScenarioError(f"{where}: expected a non-empty string")
    return value


def _regex(where: str, value: Any) -> re.Pattern[str]:
    try:
        return re.compile(_text(where, value))
    except re.error as error:
        raise ScenarioError(f"{where}: not a valid regular expression: {error}") from error


def _choice(where: str, value: Any, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise ScenarioError(f"{where}: expected one of {', '.join(allowed)}, got {value!r}")
    return str(value)


# -- quotes -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LineQuote:
    """A line of a tool's output, found at request time."""

    tool: str
    pattern: re.Pattern[str]

    def resolve(self, conversation: Conversation) -> tuple[str, str]:
        found = conversation.find_line(self.tool, self.pattern)
        if found is not None:
            ref, quote = found
            return ref, quote[:MAX_QUOTE]
        placeholder = f"(no line of {self.tool}'s output matches {self.pattern.pattern})"
        return conversation.newest_ref(self.tool), placeholder[:MAX_QUOTE]


@dataclass(frozen=True)
class LiteralQuote:
    """A ref and a quote written in the scenario: sent as they are."""

    ref: str
    quote: str

    def resolve(self, conversation: Conversation) -> tuple[str, str]:
        return self.ref, self.quote


Quote = LineQuote | LiteralQuote


def parse_line_quote(where: str, spec: Any) -> LineQuote:
    spec = check_keys(where, spec, {"tool", "line"})
    for key in ("tool", "line"):
        if key not in spec:
            raise ScenarioError(f"{where}: {key} is required")
    return LineQuote(tool=_text(f"{where}.tool", spec["tool"]), pattern=_regex(f"{where}.line", spec["line"]))


def parse_quotes(where: str, spec: Any) -> dict[str, LineQuote]:
    """A scenario's ``quotes: {NAME: {tool, line}}``."""
    if spec is None:
        return {}
    if not isinstance(spec, Mapping):
        raise ScenarioError(f"{where}: expected a mapping of names to {{tool, line}}")
    parsed = {}
    for name, quote in spec.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", name):
            raise ScenarioError(f"{where}: {name!r} is not a quote name (letters, digits, _ and -)")
        parsed[name] = parse_line_quote(f"{where}.{name}", quote)
    return parsed


def _evidence(where: str, spec: Any, quotes: Mapping[str, LineQuote]) -> Quote:
    if isinstance(spec, Mapping) and "cite" in spec:
        check_keys(where, spec, {"cite"})
        name = spec["cite"]
        if name not in quotes:
            raise ScenarioError(f"{where}.cite: no quote named {name!r} (quotes: {_names(quotes)})")
        return quotes[name]
    if isinstance(spec, Mapping) and "ref" in spec:
        check_keys(where, spec, {"ref", "quote"})
        return LiteralQuote(_text(f"{where}.ref", spec["ref"]), _text(f"{where}.quote", spec.get("quote")))
    if isinstance(spec, Mapping) and not {"tool", "line"} <= set(spec):
        raise ScenarioError(f"{where}: expected {{tool, line}}, {{cite: NAME}} or {{ref, quote}}")
    return parse_line_quote(where, spec)


def _names(quotes: Mapping[str, LineQuote]) -> str:
    return ", ".join(sorted(quotes)) or "none"


# -- findings ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HypothesisSpec:
    id: str
    statement: str
    status: str
    evidence: tuple[Quote, ...]


@dataclass(frozen=True)
class FindingsSpec:
    """A reply's ``findings:``: an ``update_findings`` call whose quotes are read at request time."""

    hypotheses: tuple[HypothesisSpec, ...]
    conclusion: str
    confidence: str

    def arguments(self, conversation: Conversation) -> dict[str, Any]:
        """The call's arguments, every quote resolved against ``conversation``."""
        hypotheses = []
        for hypothesis in self.hypotheses:
            evidence = []
            for quote in hypothesis.evidence:
                ref, text = quote.resolve(conversation)
                evidence.append({"ref": ref, "quote": text})
            hypotheses.append(
                {
                    "id": hypothesis.id,
                    "statement": hypothesis.statement,
                    "status": hypothesis.status,
                    "evidence": evidence,
                }
            )
        return {"hypotheses": hypotheses, "conclusion": self.conclusion, "confidence": self.confidence}

    @property
    def tool(self) -> str:
        return FINDINGS_TOOL


def parse_findings(where: str, spec: Any, quotes: Mapping[str, LineQuote]) -> FindingsSpec:
    """``findings: {hypotheses: [{id, statement, status, evidence}], conclusion, confidence}``."""
    findings = check_keys(where, spec, {"hypotheses", "conclusion", "confidence"})
    for key in ("conclusion", "confidence"):
        if key not in findings:
            raise ScenarioError(f"{where}: {key} is required")
    raw = findings.get("hypotheses") or []
    if not isinstance(raw, list):
        raise ScenarioError(f"{where}.hypotheses: expected a list")
    hypotheses = [_hypothesis(f"{where}.hypotheses[{i}]", item, quotes) for i, item in enumerate(raw)]
    ids = [h.id for h in hypotheses]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ScenarioError(f"{where}.hypotheses: ids must be unique: {', '.join(repeated)}")
    return FindingsSpec(
        hypotheses=tuple(hypotheses),
        conclusion=_choice(f"{where}.conclusion", findings["conclusion"], [c.value for c in Conclusion]),
        confidence=_choice(f"{where}.confidence", findings["confidence"], [c.value for c in Confidence]),
    )


def _hypothesis(where: str, spec: Any, quotes: Mapping[str, LineQuote]) -> HypothesisSpec:
    hypothesis = check_keys(where, spec, {"id", "statement", "status", "evidence"})
    for key in ("id", "statement", "status"):
        if key not in hypothesis:
            raise ScenarioError(f"{where}: {key} is required")
    hid = str(hypothesis["id"])
    if not _HYPOTHESIS_ID.fullmatch(hid):
        raise ScenarioError(f"{where}.id: expected H1, H2 ..., got {hid!r}")
    evidence = hypothesis.get("evidence") or []
    if not isinstance(evidence, list):
        raise ScenarioError(f"{where}.evidence: expected a list")
    return HypothesisSpec(
        id=hid,
        statement=_text(f"{where}.statement", hypothesis["statement"]),
        status=_choice(f"{where}.status", hypothesis["status"], [s.value for s in HypothesisStatus]),
        evidence=tuple(_evidence(f"{where}.evidence[{i}]", e, quotes) for i, e in enumerate(evidence)),
    )


# -- texts ------------------------------------------------------------------------------------------


def check_template(where: str, text: str, quotes: Mapping[str, LineQuote]) -> None:
    """A reply text's ``{fields}``: each one of ``TEXT_FIELDS``, keyed ones with one ``[key]``, the
    quote names known; braces balanced (``{{`` is a brace)."""
    try:
        fields = [field for _, field, _, _ in string.Formatter().parse(text) if field is not None]
    except ValueError as error:
        raise ScenarioError(f"{where}: {error} (write a literal brace as {{{{ or }}}})") from error
    for field in fields:
        root, bracket, key = field.partition("[")
        if root not in TEXT_FIELDS:
            raise ScenarioError(f"{where}: unknown field {{{field}}} (known: {', '.join(TEXT_FIELDS)})")
        keyed = bool(bracket) and key.endswith("]") and "[" not in key and len(key) > 1
        if (root in _KEYED_FIELDS) != keyed or "." in root:
            form = f"{{{root}[NAME]}}" if root in _KEYED_FIELDS else f"{{{root}}}"
            raise ScenarioError(f"{where}: {{{field}}} should be written {form}")
        name = key[:-1]
        if root in _NAMED_QUOTE_FIELDS and name not in quotes:
            raise ScenarioError(f"{where}: {{{field}}} names no quote (quotes: {_names(quotes)})")


def render(template: str, conversation: Conversation, quotes: Mapping[str, LineQuote]) -> str:
    """A reply text with every field filled from ``conversation``."""
    return template.format(
        last_tool_result=conversation.last_output(),
        last_user_message=conversation.last_user,
        tool_result=_Outputs(conversation),
        evidence=_Refs(conversation),
        quote=_Quotes(conversation, quotes, cite=False),
        cite=_Quotes(conversation, quotes, cite=True),
    )


class _Outputs:
    """``{tool_result[NAME]}``: the newest output of tool NAME, without its evidence label."""

    def __init__(self, conversation: Conversation) -> None:
        self.conversation = conversation

    def __getitem__(self, tool: str) -> str:
        result = self.conversation.newest(tool)
        return result.output if result else "(nothing yet)"


class _Refs(_Outputs):
    """``{evidence[NAME]}``: the evidence id of tool NAME's newest result (``E0``: none)."""

    def __getitem__(self, tool: str) -> str:
        return self.conversation.newest_ref(tool)


class _Quotes:
    """``{quote[NAME]}``: the named quote's text; ``{cite[NAME]}``: ``[E2: "that text"]``."""

    def __init__(self, conversation: Conversation, quotes: Mapping[str, LineQuote], *, cite: bool) -> None:
        self.conversation = conversation
        self.quotes = quotes
        self.cite = cite

    def __getitem__(self, name: str) -> str:
        ref, quote = self.quotes[name].resolve(self.conversation)
        return citation(ref, quote) if self.cite else quote


def citation(ref: str, quote: str) -> str:
    """``[E2: "quote"]`` in the syntax ``agent.citations`` reads: a quote holds no ``"`` and no line
    break, so a line that does is cited by its longest piece without one (still a substring)."""
    piece = max(re.split(r'["\n]', quote), key=len).strip()[:MAX_QUOTE].strip()
    return f'[{ref}: "{piece or "(empty quote)"}"]'
