"""The 400 reasons of alert webhooks: pydantic's validation errors as one short line naming the
field (``alerts[0].labels.severity: must be a string, not a number``), and a sender's values in
them quoted and cut, so a hostile body cannot flood the sender's log or ours."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError


def shorten(value: str) -> str:
    """A sender's value in a reason: quoted and short, so a hostile one cannot flood a log."""
    return json.dumps(value[:60]) + ("..." if len(value) > 60 else "")


def describe(exc: ValidationError, prefix: str = "") -> str:
    """The first mistake of ``exc`` as one 400 reason (``alerts[0].status: ...``), and how many more."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc, message = tuple(first["loc"]), _message(first)
    if loc[-1:] == ("[key]",):  # the name of a label, not its value
        loc, message = loc[:-1], "the name " + message.removeprefix("String ")
    others = len(errors) - 1
    more = f" (and {others} more problem{'s' if others > 1 else ''})" if others else ""
    return f"{_location(loc, prefix)}: {message}{more}"


def json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def _location(loc: tuple[int | str, ...], prefix: str) -> str:
    text = prefix
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", part):
            text += f".{part}" if text else part
        else:
            text += f"[{shorten(part)}]"
    return text or "(body)"


_TYPE_WORDS = {
    "string_type": "a string",
    "int_type": "an integer",
    "dict_type": "an object",
    "list_type": "a list",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "bool_type": "a boolean",
}


def _message(error: Any) -> str:
    kind = error["type"]
    if kind == "missing":
        return "required field is missing"
    if kind in _TYPE_WORDS:
        return f"must be {_TYPE_WORDS[kind]}, not {json_type(error.get('input'))}"
    if kind == "too_long" and "actual_length" in error.get("ctx", {}):
        return f"must have at most {error['ctx']['max_length']} entries, not {error['ctx']['actual_length']}"
    if kind == "literal_error":
        given = error.get("input")
        shown = shorten(given) if isinstance(given, str) else json_type(given)
        return f"must be {error['ctx']['expected']}, not {shown}"
    return str(error["msg"]).removeprefix("Value error, ")
