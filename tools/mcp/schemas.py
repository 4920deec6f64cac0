"""Offered names (``<server>_<tool>``) and the input schemas passed on to the model.

A name must satisfy both providers' rules (OpenAI: ``^[a-zA-Z0-9_-]{1,64}$``; Anthropic:
``^[a-zA-Z0-9_-]{1,64}$`` too), so a server tool whose combined name does not is skipped at
start-up with a log line. A schema must be a JSON Schema object (``type: object``) that the
``jsonschema`` library accepts, within a size bound, with no remote ``$ref``: anything else is
skipped the same way (never a crash at run time). So is a schema with its own ``target`` on a
server bound to an inventory target: each call of its tools is routed by a ``target`` argument
that the fleet adds (``tools.targets``), so the server's would clash with it. A server that is not
bound keeps its ``target``: its tools are never routed by target. The schema also validates each
call's arguments before they are sent, so a model's mistake is answered here, field by field.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

from tools.targets import TARGET_ARGUMENT

NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
MAX_SCHEMA_CHARS = 32_000
RESERVED = ("confirmed_by", "approved_plan", "approval_grant")


class SchemaProblem(ValueError):
    """Why one server tool cannot be offered (its name or its schema)."""


def offered_name(server: str, tool: str) -> str:
    """``<server>_<tool>``; ``SchemaProblem`` when it breaks the providers' tool-name rules."""
    name = f"{server}_{tool}"
    if not tool or not NAME.fullmatch(name):
        raise SchemaProblem(f"offered name {name!r} must be 1-64 letters, digits, '_' or '-'")
    return name


def checked_schema(schema: object, *, bound_to: str | None = None) -> dict[str, Any]:
    """A copy of ``schema`` fit to offer; ``SchemaProblem`` says why not (``bound_to``: the
    inventory target the server is bound to, whose routing adds a ``target`` argument)."""
    if not isinstance(schema, dict):
        raise SchemaProblem("the input schema is not a JSON object")
    try:
        text = json.dumps(schema)
    except (TypeError, ValueError) as exc:
        raise SchemaProblem(f"the input schema is not JSON: {exc}") from exc
    if len(text) > MAX_SCHEMA_CHARS:
        raise SchemaProblem(f"the input schema is {len(text)} characters (at most {MAX_SCHEMA_CHARS})")
    copy: dict[str, Any] = json.loads(text)
    if copy.get("type", "object") != "object":
        raise SchemaProblem("the input schema's type must be 'object'")
    copy["type"] = "object"
    properties = copy.setdefault("properties", {})
    if not isinstance(properties, dict):
        raise SchemaProblem("the input schema's properties must be an object")
    taken = [name for name in RESERVED if name in properties]
    if taken:
        raise SchemaProblem(f"the argument {taken[0]!r} is reserved for the approval gate")
    if bound_to is not None and TARGET_ARGUMENT in properties:
        raise SchemaProblem(
            f"the argument {TARGET_ARGUMENT!r} clashes with the inventory's target: the server is bound "
            f"to target {bound_to!r}, and each call of its tools names its target in {TARGET_ARGUMENT!r}"
        )
    if re.search(r'"\$ref":\s*"(?!#)', text):
        raise SchemaProblem("the input schema refers to another document ($ref); only local refs are allowed")
    try:
        jsonschema.validators.validator_for(copy).check_schema(copy)
    except jsonschema.exceptions.SchemaError as exc:
        raise SchemaProblem(f"the input schema is not valid JSON Schema: {exc.message}") from exc
    return copy


def argument_problems(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """The call's arguments checked against the tool's schema: ``None``, or one line per problem."""
    validator = jsonschema.validators.validator_for(schema)(schema)
    problems = []
    for error in sorted(validator.iter_errors(arguments), key=lambda e: list(e.path)):
        where = ".".join(str(part) for part in error.path) or "(arguments)"
        problems.append(f"{where}: {error.message}")
    return "; ".join(problems[:5]) or None
