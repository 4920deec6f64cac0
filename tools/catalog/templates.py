"""``{param}`` templates of catalog tools (``${NAME}`` references in them: ``tools.env_references``).

A template is checked once at load time (only declared parameter names, no format specs, no
attribute or index access) and rendered per call by plain concatenation, so a value is text in
its slot and nothing more: it never splits into several argv elements and is never re-parsed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from urllib.parse import quote

from tools.base import CONFIRMED_BY
from tools.env_references import expand_env
from tools.templating import IDENTIFIER as _IDENTIFIER
from tools.templating import parse_template as _parse


def placeholders(template: str) -> list[str]:
    """The parameter names used in ``template``; raises ``ValueError`` saying what is wrong."""
    names = []
    for _, field, spec, conversion in _parse(template):
        if field is None:
            continue
        if not _IDENTIFIER.fullmatch(field):
            raise ValueError(f"placeholder {{{field}}} must be a plain parameter name")
        if spec or conversion:
            raise ValueError(f"placeholder {{{field}}} cannot have a format spec or conversion")
        names.append(field)
    return names


def check_template(template: str, allowed: Collection[str]) -> list[str]:
    """Raise ``ValueError`` unless every placeholder is in ``allowed``; return the names used."""
    names = placeholders(template)
    unknown = [name for name in names if name not in allowed]
    if unknown:
        declared = ", ".join(sorted(name for name in allowed if name != CONFIRMED_BY)) or "none"
        raise ValueError(f"{{{unknown[0]}}} is not a declared parameter (declared: {declared})")
    return names


def render(template: str, values: Mapping[str, str], *, encode: bool = False) -> str:
    """Fill ``template``; with ``encode`` each value is percent-encoded (a URL path or query part)."""
    pieces = []
    for literal, field, _, _ in _parse(template):
        pieces.append(literal)
        if field is not None:
            pieces.append(quote(values[field], safe="") if encode else values[field])
    return "".join(pieces)


def is_single_placeholder(template: str) -> str | None:
    """The parameter name when ``template`` is exactly ``{name}``, else ``None``."""
    parsed = list(_parse(template))
    if len(parsed) == 1 and parsed[0][0] == "" and parsed[0][1] is not None:
        return parsed[0][1]
    return None


def expand_env_in_template(text: str, env: Mapping[str, str]) -> str:
    """Replace ``${NAME}`` by the variable's value, escaped so it is never read as a ``{param}``."""
    return expand_env(text, env, lambda value: value.replace("{", "{{").replace("}", "}}"))
