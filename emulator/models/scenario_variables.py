"""Variables in scenario files: ``${name}`` replaced by values known only at run time (a demo
host's folders), checked so that a typo stops the load (``emulator.models.scenario``)."""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from typing import Any

from emulator.models.errors import ScenarioError


class _Placeholders(string.Template):
    """``$name`` as ``string.Template`` reads it; inside braces a name may also hold dots and dashes
    and start with a digit (``${web-03.log_dir}``, ``${01-db.log_dir}``): inventory names do."""

    braceidpattern = r"(?a:[_a-z0-9][_a-z0-9.-]*)"


def substitute(value: Any, variables: Mapping[str, str], where: str) -> Any:
    """``${name}`` replaced in every string inside ``value``; an unknown ``${name}`` is an error
    (an unknown ``$name`` without braces is left as it is: prose may hold a ``$HOME``). In a
    ``line`` (a regular expression) a value is inserted escaped: a path's dots are dots."""
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
        escaped = {name: re.escape(text) for name, text in variables.items()}
        return {
            key: substitute(item, escaped if key == "line" else variables, f"{where}.{key}")
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [substitute(item, variables, f"{where}[{index}]") for index, item in enumerate(value)]
    return value
