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
result, not a later one's). Reply
texts may quote ``{last_tool_result}``, ``{last_user_message}`` and ``{tool_result[NAME]}`` (the
newest result of tool NAME).

Variables: ``load_scenario(name, variables={"web-03.log_dir": "/srv/demo/var/log"})`` replaces
``${web-03.log_dir}`` in reply texts and tool-call arguments when the file is loaded (``$$`` is a
``$``), so one scenario can point at paths known only at run time. A name may hold dots and
dashes, so the demo names each simulated host's values after the host (``${db-01.log_dir}``,
``${db-01.host_root}``); its plain ``${log_dir}`` and ``${host_root}`` are still those of its
first host, web-03, so older scenario files mean what they meant. When variables are given, a
``${name}`` that is not one of them (a typo: ``${web-3.log_dir}``) stops the load with its place,
rather than sending a tool a path that does not exist. Values are inserted once, as they are: a
value holding ``${...}`` or braces is never expanded again.

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
import string
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from emulator.models.openai_server import Reply, ScriptedToolCall

SCENARIO_DIR = Path(__file__).parent / "scenarios"
_WHEN_KEYS = {"role", "contains", "matches", "tool", "any_user_contains", "turn_at_least", "turn_at_most"}
_PICK_KEYS = {"contains", "matches"}
_TURN_KEYS = ("turn_at_least", "turn_at_most")
_REPLY_KEYS = {"text", "tool_calls", "delay"}


class ScenarioError(ValueError):
    """The scenario file is not valid; the message names the file and the place."""


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
    _counter: itertools.count[int] = field(default_factory=lambda: itertools.count(1), repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __call__(self, body: dict[str, Any]) -> Reply:
        """The reply to one request body (an ``emulator.models.openai_server.ReplyFn``)."""
        with self._lock:
            number = next(self._counter)
        if number in self.faults:
            return _fault(self.faults[number])
        messages: list[dict[str, Any]] = body.get("messages", [])
        for rule in self.rules:
            if _matches(rule.when, messages):
                return self._reply(rule.reply, messages)
        turn = sum(1 for message in messages if message.get("role") == "assistant")
        if turn >= len(self.turns):
            return Reply(text="I have nothing more to add.", delay=self.latency)
        return self._reply(self.turns[turn], messages)

    def _reply(self, spec: Mapping[str, Any], messages: list[dict[str, Any]]) -> Reply:
        calls = [
            ScriptedToolCall(name=str(call["name"]), arguments=dict(call.get("arguments") or {}))
            for call in spec.get("tool_calls") or []
        ]
        text = spec.get("text")
        return Reply(
            text=_render(str(text), messages) if text is not None else None,
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


def _tool_names(messages: list[dict[str, Any]]) -> dict[str, str]:
    """tool_call_id -> tool name, from the assistant messages' calls."""
    names = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            names[call.get("id", "")] = call.get("function", {}).get("name", "")
    return names


def _matches(when: Mapping[str, str], messages: list[dict[str, Any]]) -> bool:
    if not messages:
        return False
    last = messages[-1]
    text = str(last.get("content") or "")
    checks: dict[str, Callable[[str], bool]] = {
        "role": lambda value: last.get("role") == value,
        "contains": lambda value: value.lower() in text.lower(),
        "matches": lambda value: re.search(value, text) is not None,
        "tool": lambda value: (
            last.get("role") == "tool" and _tool_names(messages).get(last.get("tool_call_id", "")) == value
        ),
        "any_user_contains": lambda value: any(
            m.get("role") == "user" and value.lower() in str(m.get("content") or "").lower() for m in messages
        ),
        "turn_at_least": lambda value: _turns(messages) >= int(value),
        "turn_at_most": lambda value: _turns(messages) <= int(value),
    }
    return all(checks[key](value) for key, value in when.items())


def _turns(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m.get("role") == "assistant")


class _Quotes(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "(nothing yet)"


def _render(template: str, messages: list[dict[str, Any]]) -> str:
    names = _tool_names(messages)
    by_tool: dict[str, str] = _Quotes()
    last_tool, last_user = "(no tool result yet)", ""
    for message in messages:
        content = str(message.get("content") or "")
        if message.get("role") == "tool":
            last_tool = content
            by_tool[names.get(message.get("tool_call_id", ""), "")] = content
        elif message.get("role") == "user":
            last_user = content
    return template.format(last_tool_result=last_tool, last_user_message=last_user, tool_result=by_tool)


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
        text = str(first.get("content") or "") if first else ""
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


def _check_keys(where: str, mapping: Any, allowed: set[str]) -> Mapping[str, Any]:
    if not isinstance(mapping, Mapping):
        raise ScenarioError(f"{where}: expected a mapping, got {type(mapping).__name__}")
    unknown = set(mapping) - allowed
    if unknown:
        raise ScenarioError(
            f"{where}: unknown key {sorted(unknown)[0]!r} (allowed: {', '.join(sorted(allowed))})"
        )
    return mapping


def _check_reply(where: str, spec: Any) -> Mapping[str, Any]:
    reply = _check_keys(where, spec, _REPLY_KEYS)
    if "text" not in reply and not reply.get("tool_calls"):
        raise ScenarioError(f"{where}: a reply needs text or tool_calls")
    for index, call in enumerate(reply.get("tool_calls") or []):
        call = _check_keys(f"{where}.tool_calls[{index}]", call, {"name", "arguments"})
        if not isinstance(call.get("name"), str):
            raise ScenarioError(f"{where}.tool_calls[{index}]: name is required")
    return reply


def _check_regex(where: str, when: Mapping[str, Any]) -> None:
    if "matches" in when:
        try:
            re.compile(str(when["matches"]))
        except re.error as error:
            raise ScenarioError(f"{where}.matches: not a valid regular expression: {error}") from error


class _Placeholders(string.Template):
    """``$name`` as ``string.Template`` reads it; inside braces a name may also hold dots and dashes
    and start with a digit (``${web-03.log_dir}``, ``${01-db.log_dir}``): inventory names do."""

    braceidpattern = r"(?a:[_a-z0-9][_a-z0-9.-]*)"


def _substitute(value: Any, variables: Mapping[str, str], where: str) -> Any:
    """``${name}`` replaced in every string inside ``value``; an unknown ``${name}`` is an error
    (an unknown ``$name`` without braces is left as it is: prose may hold a ``$HOME``)."""
    if isinstance(value, str):
        template = _Placeholders(value)
        for match in template.pattern.finditer(value):
            name = match.group("braced")
            if name is None and match.group("invalid") is not None and value.startswith("${", match.start()):
                name = value[match.start() + 2 :].split("}", 1)[0][:60]  # ${web 03}: not a name at all
            if name is not None and name not in variables:
                known = ", ".join(f"${{{known}}}" for known in sorted(variables))
                raise ScenarioError(f"{where}: unknown variable ${{{name}}} (known: {known})")
        return template.safe_substitute(variables)
    if isinstance(value, Mapping):
        return {key: _substitute(item, variables, f"{where}.{key}") for key, item in value.items()}
    if isinstance(value, list):
        return [_substitute(item, variables, f"{where}[{index}]") for index, item in enumerate(value)]
    return value


def parse_scenario(data: Any, source: str, variables: Mapping[str, str] | None = None) -> Scenario:
    """A scenario from parsed YAML; ``variables`` fill ``${name}`` in replies (texts and arguments)."""
    top = _check_keys(source, data, {"name", "description", "latency", "rules", "turns", "faults"})

    def reply(where: str, spec: Any) -> Mapping[str, Any]:
        checked = _check_reply(where, spec)
        if not variables:
            return checked
        substituted = dict(_substitute(checked, variables, where))
        if "text" in checked:  # texts are str.format templates later: a value's braces are literal
            quoted = {name: value.replace("{", "{{").replace("}", "}}") for name, value in variables.items()}
            substituted["text"] = _substitute(checked["text"], quoted, f"{where}.text")
        return substituted

    turns = [reply(f"{source}: turns[{i}]", turn) for i, turn in enumerate(top.get("turns") or [])]
    rules = []
    for index, raw in enumerate(top.get("rules") or []):
        where = f"{source}: rules[{index}]"
        rule = _check_keys(where, raw, {"when", "reply"})
        when = _check_keys(f"{where}.when", rule.get("when"), _WHEN_KEYS)
        _check_regex(f"{where}.when", when)
        for key in _TURN_KEYS:
            if key in when and not isinstance(when[key], int):
                raise ScenarioError(f"{where}.when.{key}: expected a whole number")
        rules.append(
            Rule(when={k: str(v) for k, v in when.items()}, reply=reply(f"{where}.reply", rule.get("reply")))
        )
    faults = {}
    for index, raw in enumerate(top.get("faults") or []):
        fault = _check_keys(
            f"{source}: faults[{index}]", raw, {"request", "status", "retry_after", "timeout"}
        )
        faults[int(fault["request"])] = fault
    return Scenario(
        name=str(top.get("name", source)),
        turns=turns,
        rules=rules,
        latency=float(top.get("latency", 0.0)),
        faults=faults,
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
    top = _check_keys(source, data, {"name", "description", "latency", "pick", "fallback"})
    entries = top.get("pick")
    if not isinstance(entries, list) or not entries:
        raise ScenarioError(f"{source}: pick: expected a list of {{when, scenario}}")
    choices, examples = [], []
    for index, raw in enumerate(entries):
        where = f"{source}: pick[{index}]"
        entry = _check_keys(where, raw, {"when", "scenario", "example"})
        if "example" in entry:
            examples.append(str(entry["example"]))
        when = _check_keys(f"{where}.when", entry.get("when") or {}, _PICK_KEYS)
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
