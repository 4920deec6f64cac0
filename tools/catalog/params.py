"""Catalog parameters: their pydantic validation and the JSON schema the model sees."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model

from tools.catalog.spec import ParamSpec, ParamValue

_PYTHON_TYPES: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool}
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


def value_text(value: ParamValue) -> str:
    """How a value appears in argv, URLs and headers (``true``/``false`` for booleans)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _no_control_chars(value: Any) -> Any:
    # Newlines and NULs would survive "^...$" patterns ($ matches before a final newline).
    if isinstance(value, str) and _CONTROL_CHARS.search(value):
        raise ValueError("control characters (newlines, tabs, NUL...) are not allowed")
    return value


def _no_leading_dash(value: Any) -> Any:
    if value_text(value).startswith("-"):
        raise ValueError("a value starting with '-' would be read as an option and is not allowed here")
    return value


def param_annotation(spec: ParamSpec, *, in_argv: bool) -> Any:
    """The type annotation (with constraints and checks) that validates one parameter."""
    base: Any = Literal[tuple(spec.enum)] if spec.enum else _PYTHON_TYPES[spec.type]
    constraints = Field(
        description=spec.description,
        pattern=spec.pattern if spec.type == "string" and not spec.enum else None,
        ge=spec.minimum,
        le=spec.maximum,
    )
    checks: list[Any] = [AfterValidator(_no_control_chars)]
    if in_argv and not spec.allow_flags:
        checks.append(AfterValidator(_no_leading_dash))
    return Annotated[base, constraints, *checks]


def arguments_model(tool_name: str, params: dict[str, ParamSpec], argv_params: set[str]) -> type[BaseModel]:
    """A pydantic model for the tool's arguments (unknown arguments refused)."""
    fields: dict[str, Any] = {}
    for name, spec in params.items():
        annotation = param_annotation(spec, in_argv=name in argv_params)
        if spec.default is not None:
            fields[name] = (annotation, spec.default)
        elif not spec.required:
            fields[name] = (annotation | None, None)
        else:
            fields[name] = (annotation, ...)
    # Rust's regex engine (pydantic's default) is linear in the value: a model-supplied value can
    # never make an operator's pattern backtrack for minutes. Patterns it cannot compile
    # (lookaround, backreferences) fail when the catalog loads, naming the tool.
    config = ConfigDict(extra="forbid", regex_engine="rust-regex")
    model: type[BaseModel] = create_model(f"{tool_name}_arguments", __config__=config, **fields)
    return model


def parameters_schema(params: dict[str, ParamSpec]) -> dict[str, Any]:
    """The JSON schema offered to the model (``confirmed_by`` is never in it)."""
    properties: dict[str, Any] = {}
    required = []
    for name, spec in params.items():
        prop: dict[str, Any] = {"type": spec.type}
        for key in ("description", "enum", "pattern", "minimum", "maximum", "default"):
            value = getattr(spec, key)
            if value is not None:
                prop[key] = value
        properties[name] = prop
        if spec.required and spec.default is None:
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema
