"""The template syntax shared by the catalog's ``{param}`` and declared checks' ``{args.X}``.

``string.Formatter``'s parse, with its error said for a catalog author; ``{root.field}``
placeholders (``tools.verification``) checked and rendered by plain concatenation, so a value is
text in its slot and nothing more.
"""

from __future__ import annotations

import re
import string
from collections.abc import Collection, Mapping

_FORMATTER = string.Formatter()
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def dotted_placeholders(template: str, roots: Collection[str]) -> list[tuple[str, str]]:
    """The ``{root.field}`` placeholders of ``template`` as (root, field), each root one of ``roots``;
    raises ``ValueError`` saying what is wrong (a bare name, another root, a spec or conversion)."""
    found = []
    for _, name, spec, conversion in parse_template(template):
        if name is None:
            continue
        root, dot, rest = name.partition(".")
        if not dot or root not in roots or not IDENTIFIER.fullmatch(rest):
            allowed = " or ".join(f"{{{r}.<field>}}" for r in roots)
            raise ValueError(f"placeholder {{{name}}} must be {allowed}")
        if spec or conversion:
            raise ValueError(f"placeholder {{{name}}} cannot have a format spec or conversion")
        found.append((root, rest))
    return found


def render_dotted(template: str, values: Mapping[str, Mapping[str, str]]) -> str:
    """Fill ``{root.field}`` placeholders (checked by ``dotted_placeholders``); a root missing from
    ``values`` keeps its placeholder as written (filled later: ``{before.X}`` of an undo)."""
    pieces = []
    for literal, name, _, _ in parse_template(template):
        pieces.append(literal)
        if name is not None:
            root, _, rest = name.partition(".")
            pieces.append(values[root].get(rest, "") if root in values else "{" + name + "}")
    return "".join(pieces)


def parse_template(template: str) -> list[tuple[str, str | None, str | None, str | None]]:
    try:
        return list(_FORMATTER.parse(template))
    except ValueError as exc:
        raise ValueError(
            f"bad template {template!r}: {exc} (write {{{{ and }}}} for literal braces)"
        ) from exc
