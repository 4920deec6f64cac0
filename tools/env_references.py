"""``${NAME}`` references to environment variables in operators' configuration: the catalog's
headers and templates, the MCP servers' entries, the observability endpoints' headers.

A reference is replaced in one pass by its variable's value, so a value that itself looks like
``${OTHER}`` is never expanded again; nothing else is interpreted. Callers report the names that
are not set (``env_references``) before they expand.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def env_references(text: str) -> list[str]:
    """The variable names of ``${NAME}`` references in ``text``."""
    return _REFERENCE.findall(text)


def expand_env(text: str, env: Mapping[str, str], quote: Callable[[str], str] = str) -> str:
    """``text`` with each ``${NAME}`` replaced by ``quote(env[NAME])`` (a ``KeyError`` when unset)."""
    return _REFERENCE.sub(lambda match: quote(env[match.group(1)]), text)
