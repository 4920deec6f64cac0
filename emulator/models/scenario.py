"""Scenario files: a YAML script that makes the OpenAI-compatible server behave like an ops model.

A scenario answers each request from the request alone (so any number of runs can share one
server): first the ``rules`` whose ``when`` matches the conversation, else the next of ``turns``
(the n-th turn answers a conversation holding n assistant messages)::

    name: disk-full
    latency: 0.2                   # seconds before every answer (optional)
    rules:
      - when: {role: user, contains: "logs first"}      # the newest message
        reply: {tool_calls: [{name: tail_log, arguments: {path: /var/log/nginx/error.log}}]}
      - when: {tool: tail_log}                          # the newest message is tail_log's result
        reply: {text: "Here is what the log says:\\n{last_tool_result}"}
    turns:
      - tool_calls: [{name: disk_usage, arguments: {path: /}}]
      - text: "Done: {last_tool_result}"
    faults:                        # by request number, counted from 1 across the server's life
      - {request: 2, status: 429, retry_after: 1}

``when`` keys (all given must hold): ``role`` of the newest message; ``contains`` / ``matches``
(a regex) on its text; ``tool``, the tool whose result it is; ``any_user_contains``, a user
message anywhere in the conversation; ``turn_at_least``, at least that many assistant messages
so far (``{role: user, turn_at_least: 1}`` is a reply that arrived while the run worked);
``turn_at_most``, at most that many (``{tool: disk_usage, turn_at_most: 1}``: the first check's
result, not a later one's). A tool result is read without the ``[E3] `` evidence label the
runtime puts before it on the wire (``emulator.models.conversation``): ``contains`` and
``matches`` see the tool's own text.

Reply texts may quote ``{last_tool_result}``, ``{last_user_message}``, ``{tool_result[NAME]}`` (the
newest result of tool NAME, without its label) and ``{evidence[NAME]}`` (that result's evidence
id, ``E3``; ``E0`` when there is none). Anything else in braces is a mistake found at load time
(``{{`` is a brace).

Evidence (``emulator.models.scenario_evidence``): a model that shows its work quotes what its
tools really printed, which a script cannot know in advance, so quotes are found in the real
output when the reply is made::

    quotes:                        # named lines of real output, for texts and findings
      full: {tool: disk_usage, line: '\\d+% /var/log$'}      # the first line matching the regex
    turns:
      - tool_calls: [{name: disk_usage, arguments: {path: /var/log}}]
      - findings:                  # an update_findings call, made after the reply's tool_calls
          hypotheses:
            - id: H1
              statement: the api's rotated logs fill /var/log
              status: supported    # open, supported or refuted
              evidence:
                - {cite: full}                                  # a named quote
                - {tool: largest_files, line: 'api\\.log-'}    # or one written in place
                - {ref: E9, quote: "made up"}                   # or given as it is (a liar's)
          conclusion: root_cause_found   # investigating, root_cause_found, no_fault_found, inconclusive
          confidence: high               # low, medium, high
      - text: 'Full: {cite[full]}, that is "{quote[full]}" from {evidence[disk_usage]}.'

A line quote is the first line of the tool's newest result holding a match (stripped; only the
group named ``quote`` when the regex has one: ``'(?P<quote>load average: .*)$'``); older results of the tool are searched when the newest has
no such line. Its ref is the id of the result it came from. When no result has such a line the ref
is the tool's newest id and the quote an honest placeholder that the runtime shows unverified.
``{quote[NAME]}`` is the quote's text, ``{cite[NAME]}`` a citation the runtime checks,
``[E2: "the line"]`` (a line holding ``"`` is cited by its longest piece without one).

Variables: ``load_scenario(name, variables={"web-03.log_dir": "/srv/demo/var/log"})`` replaces
``${web-03.log_dir}`` in reply texts and tool-call arguments when the file is loaded (``$$`` is a
``$``), so one scenario can point at paths known only at run time. A name may hold dots and
dashes, so the demo names each simulated host's values after the host (``${db-01.log_dir}``,
``${db-01.host_root}``); its plain ``${log_dir}`` and ``${host_root}`` are still those of its
first host, web-03, so older scenario files mean what they meant. When variables are given, a
``${name}`` that is not one of them (a typo: ``${web-3.log_dir}``) stops the load with its place,
rather than sending a tool a path that does not exist. Values are inserted once, as they are: a
value holding ``${...}`` or braces is never expanded again (in a ``line`` regex, escaped).

Scenario sets: a file with ``pick`` instead of ``turns`` serves several scenarios from one server,
choosing by the conversation's first user message (``load_script`` loads either kind)::

    name: demo
    latency: 0.8                   # optional: overrides every scenario's latency
    pick:                          # the first whose ``when`` matches; one without ``when`` is the default
      - when: {matches: "(?i)\\bcpu\\b"}    # keys: contains, matches
        scenario: high-cpu         # a name (next to this file, then emulator/models/scenarios), a path, or inline
        example: "@ops the api on web-03 is burning CPU"   # optional: a message this scenario answers
      - scenario: disk-full
    fallback: |-                   # optional: the answer to a conversation no ``when`` matches
      This model only knows these scenarios:
      {examples}

``fallback`` (instead of a default choice) answers what no scenario is about honestly, rather
than playing a scenario that has nothing to do with the question; ``{examples}`` in it is the
list of the choices' ``example`` messages, which ``ScenarioSet.examples`` also gives.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from emulator.models.conversation import Conversation, without_notes
from emulator.models.errors import ScenarioError
from emulator.models.openai_server import Reply, ScriptedToolCall
from emulator.models.scenario_evidence import (
    FindingsSpec,
    LineQuote,
    check_keys,
    check_template,
    parse_findings,
    parse_quotes,
    render,
)
from emulator.models.scenario_variables import substitute

__all__ = ["Scenario", "ScenarioError", "ScenarioSet", "load_scenario", "load_script"]

SCENARIO_DIR = Path(__file__).parent / "scenarios"
_WHEN_KEYS = {"role", "contains", "matches", "tool", "any_user_contains", "turn_at_least", "turn_at_most"}
_PICK_KEYS = {"contains", "matches"}
_TURN_KEYS = ("turn_at_least", "turn_at_most")
_REPLY_KEYS = {"text", "tool_calls", "delay", "findings"}
_TOP_KEYS = {"name", "description", "latency", "rules", "turns", "faults", "quotes"}


@dataclass(frozen=True)
class Rule:
    when: Mapping[str, str]
    reply: Mapping[str, Any]


@dataclass
class Scenario:
    name: str
    turns: Sequence[Mapping[str, Any]]
    rules: Sequence[Rule] = ()
    latency: float = 0.0
    faults: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    quotes: Mapping[str, LineQuote] = field(default_factory=dict)
    _counter: itertools.count[int] = field(default_factory=lambda: itertools.count(1), repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __call__(self, body: dict[str, Any]) -> Reply:
        """The reply to one request body (an ``emulator.models.openai_server.ReplyFn``)."""
        with self._lock:
            number = next(self._counter)
        if number in self.faults:
            return _fault(self.faults[number])
        conversation = Conversation(body.get("messages", []))
        for rule in self.rules:
            if _matches(rule.when, conversation):
                return self._reply(rule.reply, conversation)
        turn = conversation.turns()
        if turn >= len(self.turns):
            return Reply(text="I have nothing more to add.", delay=self.latency)
        return self._reply(self.turns[turn], conversation)

    def _reply(self, spec: Mapping[str, Any], conversation: Conversation) -> Reply:
        calls = [
            ScriptedToolCall(name=str(call["name"]), arguments=dict(call.get("arguments") or {}))
            for call in spec.get("tool_calls") or []
        ]
        findings = spec.get("findings")
        if isinstance(findings, FindingsSpec):  # after the others: it reads what came before
            calls.append(ScriptedToolCall(name=findings.tool, arguments=findings.arguments(conversation)))
        text = spec.get("text")
        return Reply(
            text=render(str(text), conversation, self.quotes) if text is not None else None,
            tool_calls=calls,
            delay=float(spec.get("delay", self.latency)),
        )


def _fault(spec: Mapping[str, Any]) -> Reply:
    status = int(spec.get("status", 500))
    if status == 429:
        return Reply.rate_limited(spec.get("retry_after", 1))
    if spec.get("timeout"):
        return Reply(text="(too late)", delay=float(spec["timeout"]))
    return Reply.server_error(status)


def _matches(when: Mapping[str, str], conversation: Conversation) -> bool:
    last = conversation.last
    if last is None:
        return False
    text = conversation.last_text()  # a tool result's without its evidence label
    for key, value in when.items():
        if key == "role":
            holds = last.get("role") == value
        elif key == "contains":
            holds = value.lower() in text.lower()
        elif key == "matches":
            holds = re.search(value, text) is not None
        elif key == "tool":
            holds = conversation.last_tool() == value
        elif key == "any_user_contains":
            holds = any(
                m.get("role") == "user" and value.lower() in str(m.get("content") or "").lower()
                for m in conversation.messages
            )
        elif key == "turn_at_least":
            holds = conversation.turns() >= int(value)
        else:  # turn_at_most
            holds = conversation.turns() <= int(value)
        if not holds:
            return False
    return True


@dataclass(frozen=True)
class Choice:
    """One entry of a scenario set: ``scenario`` serves conversations whose first user message
    matches ``when`` (``contains`` / ``matches``); an empty ``when`` matches every conversation."""

    when: Mapping[str, str]
    scenario: Scenario


@dataclass
class ScenarioSet:
    """Several scenarios behind one server, chosen per conversation by its first user message.

    The choice is made from the request alone (like a scenario's turns), so any number of runs,
    of any of the scenarios, can share the server.
    """

    name: str
    choices: Sequence[Choice]
    fallback: Scenario | None = None
    examples: Sequence[str] = ()

    def pick(self, messages: list[dict[str, Any]]) -> Scenario:
        """The scenario for a conversation: the first choice that matches, else the fallback (or
        the last choice when there is none)."""
        first = next((m for m in messages if m.get("role") == "user"), None)
        text = without_notes(str(first.get("content") or "")) if first else ""
        for choice in self.choices:
            if _first_message_matches(choice.when, text):
                return choice.scenario
        return self.fallback or self.choices[-1].scenario

    def __call__(self, body: dict[str, Any]) -> Reply:
        """The reply to one request body (an ``emulator.models.openai_server.ReplyFn``)."""
        return self.pick(body.get("messages", []))(body)

    @property
    def scenarios(self) -> list[Scenario]:
        return [choice.scenario for choice in self.choices]


def _first_message_matches(when: Mapping[str, str], text: str) -> bool:
    if "contains" in when and when["contains"].lower() not in text.lower():
        return False
    return not ("matches" in when and re.search(when["matches"], text) is None)


# -- loading ----------------------------------------------------------------------------------


def _check_reply(where: str, spec: Any) -> Mapping[str, Any]:
    reply = check_keys(where, spec, _REPLY_KEYS)
    if "text" not in reply and not reply.get("tool_calls") and "findings" not in reply:
        raise ScenarioError(f"{where}: a reply needs text, tool_calls or findings")
    for index, call in enumerate(reply.get("tool_calls") or []):
        call = check_keys(f"{where}.tool_calls[{index}]", call, {"name", "arguments"})
        if not isinstance(call.get("name"), str):
            raise ScenarioError(f"{where}.tool_calls[{index}]: name is required")
    return reply


def _check_regex(where: str, when: Mapping[str, Any]) -> None:
    if "matches" in when:
        try:
            re.compile(str(when["matches"]))
        except re.error as error:
            raise ScenarioError(f"{where}.matches: not a valid regular expression: {error}") from error


def parse_scenario(data: Any, source: str, variables: Mapping[str, str] | None = None) -> Scenario:
    """A scenario from parsed YAML; ``variables`` fill ``${name}`` in replies (texts and arguments)
    and quotes."""
    top = check_keys(source, data, _TOP_KEYS)
    raw_quotes = top.get("quotes")
    if variables and raw_quotes is not None:
        raw_quotes = substitute(raw_quotes, variables, f"{source}: quotes")
    quotes = parse_quotes(f"{source}: quotes", raw_quotes)

    def reply(where: str, spec: Any) -> Mapping[str, Any]:
        checked = dict(_check_reply(where, spec))
        if variables:
            substituted = dict(substitute(checked, variables, where))
            if "text" in checked:  # texts are str.format templates later: a value's braces are literal
                quoted = {
                    name: value.replace("{", "{{").replace("}", "}}") for name, value in variables.items()
                }
                substituted["text"] = substitute(checked["text"], quoted, f"{where}.text")
            checked = substituted
        if "text" in checked:
            checked["text"] = str(checked["text"])
            check_template(f"{where}.text", checked["text"], quotes)
        if "findings" in checked:
            checked["findings"] = parse_findings(f"{where}.findings", checked["findings"], quotes)
        return checked

    turns = [reply(f"{source}: turns[{i}]", turn) for i, turn in enumerate(top.get("turns") or [])]
    rules = []
    for index, raw in enumerate(top.get("rules") or []):
        where = f"{source}: rules[{index}]"
        rule = check_keys(where, raw, {"when", "reply"})
        when = check_keys(f"{where}.when", rule.get("when"), _WHEN_KEYS)
        _check_regex(f"{where}.when", when)
        for key in _TURN_KEYS:
            if key in when and not isinstance(when[key], int):
                raise ScenarioError(f"{where}.when.{key}: expected a whole number")
        rules.append(
            Rule(when={k: str(v) for k, v in when.items()}, reply=reply(f"{where}.reply", rule.get("reply")))
        )
    faults = {}
    for index, raw in enumerate(top.get("faults") or []):
        fault = check_keys(f"{source}: faults[{index}]", raw, {"request", "status", "retry_after", "timeout"})
        faults[int(fault["request"])] = fault
    return Scenario(
        name=str(top.get("name", source)),
        turns=turns,
        rules=rules,
        latency=float(top.get("latency", 0.0)),
        faults=faults,
        quotes=quotes,
    )


def _find(name_or_path: str | Path, near: Path | None = None) -> Path:
    path = Path(name_or_path)
    if path.exists():
        return path
    for directory in (near, SCENARIO_DIR):
        if directory is not None and (directory / f"{name_or_path}.yaml").exists():
            return directory / f"{name_or_path}.yaml"
    return SCENARIO_DIR / f"{name_or_path}.yaml"  # reading it says what is missing


def _read(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except OSError as error:
        raise ScenarioError(f"{path}: cannot read: {error}") from error
    except yaml.YAMLError as error:
        raise ScenarioError(f"{path}: not valid YAML: {error}") from error


def load_scenario(name_or_path: str | Path, variables: Mapping[str, str] | None = None) -> Scenario:
    """A scenario by file path, or by name from ``emulator/models/scenarios`` (``disk-full``)."""
    path = _find(name_or_path)
    return parse_scenario(_read(path), str(path), variables)


def parse_scenario_set(
    data: Any, source: str, variables: Mapping[str, str] | None = None, directory: Path | None = None
) -> ScenarioSet:
    """A scenario set from parsed YAML; named scenarios are looked up next to it, then in the package."""
    top = check_keys(source, data, {"name", "description", "latency", "pick", "fallback"})
    entries = top.get("pick")
    if not isinstance(entries, list) or not entries:
        raise ScenarioError(f"{source}: pick: expected a list of {{when, scenario}}")
    choices, examples = [], []
    for index, raw in enumerate(entries):
        where = f"{source}: pick[{index}]"
        entry = check_keys(where, raw, {"when", "scenario", "example"})
        if "example" in entry:
            examples.append(str(entry["example"]))
        when = check_keys(f"{where}.when", entry.get("when") or {}, _PICK_KEYS)
        _check_regex(f"{where}.when", when)
        spec = entry.get("scenario")
        if isinstance(spec, str):
            path = _find(spec, directory)
            scenario = parse_scenario(_read(path), str(path), variables)
        elif isinstance(spec, Mapping):
            scenario = parse_scenario(spec, f"{where}.scenario", variables)
        else:
            raise ScenarioError(f"{where}: scenario: expected a name, a path or a scenario")
        if "latency" in top:
            scenario.latency = float(top["latency"])
        choices.append(Choice(when={k: str(v) for k, v in when.items()}, scenario=scenario))
    fallback = _fallback(top.get("fallback"), examples, source, top.get("latency"))
    return ScenarioSet(
        name=str(top.get("name", source)), choices=choices, fallback=fallback, examples=examples
    )


def _fallback(text: Any, examples: Sequence[str], source: str, latency: Any) -> Scenario | None:
    """The scenario answering a conversation no choice is about: ``text``, with ``{examples}``."""
    if text is None:
        return None
    if not isinstance(text, str) or not text.strip():
        raise ScenarioError(f"{source}: fallback: expected the text of the answer")
    listed = "\n".join(f"• {example}" for example in examples).replace("{", "{{").replace("}", "}}")
    return Scenario(
        name="fallback",
        turns=[{"text": text.replace("{examples}", listed)}],
        latency=float(latency or 0.0),
    )


def load_script(
    name_or_path: str | Path, variables: Mapping[str, str] | None = None
) -> Scenario | ScenarioSet:
    """A scenario or a scenario set (a file with ``pick``), by path or by name; either is a ReplyFn."""
    path = _find(name_or_path)
    data = _read(path)
    if isinstance(data, Mapping) and "pick" in data:
        return parse_scenario_set(data, str(path), variables, path.parent)
    return parse_scenario(data, str(path), variables)
