"""How a configuration file's mistake is said: one message per pydantic error, with a suggestion.

Shared by the files an operator writes (the inventory, the alert routes): an unknown key gets
"did you mean", a missing one says so, a value outside a fixed set names the closest member.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection
from typing import Any


def did_you_mean(word: object, choices: Collection[str]) -> str:
    """`` (did you mean 'labels'?)`` for a near miss among ``choices``, else ``""``."""
    close = difflib.get_close_matches(str(word), list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def field_message(error: Any, *, known_keys: Collection[str], choices: Collection[str]) -> str:
    """What is wrong with one field (a pydantic ``ErrorDetails``), in the operator's words."""
    if error["type"] == "extra_forbidden":
        return f"unknown key{did_you_mean(error['loc'][-1] if error['loc'] else '', known_keys)}"
    if error["type"] == "missing":
        return "required key is missing"
    if error["type"] == "literal_error":
        return f"{error['msg']}{did_you_mean(error.get('input'), choices)}"
    return str(error["msg"]).removeprefix("Value error, ")


def problems_message(what: str, path: str, problems: list[str]) -> str:
    """``the inventory F is invalid (2 problems):`` then one line per problem, each naming the file
    again, so one line copied from a log still says which file to fix."""
    lines = "\n".join(f"  - {path}: {problem}" for problem in problems)
    count = f"{len(problems)} problem" + ("s" if len(problems) != 1 else "")
    return f"{what} {path} is invalid ({count}):\n{lines}"
