"""Tool-call arguments as they may enter the system: bounded, plain JSON objects that can be shown.

The model writes a tool call's arguments as JSON text. Before ``json.loads`` touches it, the text
is checked for size (bytes) and nesting depth (a linear scan that skips over JSON strings), so
``[[[[...]]]]`` 100,000 deep is refused at once instead of raising ``RecursionError`` somewhere
downstream. After parsing, the value must be an object, every number finite, no key repeated, and
every string (keys too) short enough and made only of characters an approver can see for what they
are: no bidi controls, zero-width or other format characters (Cf), line or paragraph separators
(Zl, Zp), private-use, surrogate or unassigned code points, nor control characters other than
``\\n`` and ``\\t``. An approval card shows the arguments verbatim; text that reads differently from
what executes cannot be approved, so it never gets that far.

Every refusal is an ``ArgumentsRejected`` whose message names the argument and says what to change,
written for the model that sent it.
"""

from __future__ import annotations

import functools
import json
import math
import re
import unicodedata
from collections.abc import Collection
from typing import Any

from agent.errors import ArgumentsRejected

MAX_ARGUMENTS_BYTES = 64 * 1024
"""The largest arguments of one call, in UTF-8 bytes."""
MAX_ARGUMENTS_DEPTH = 20
"""The deepest nesting of objects and arrays (the top-level object counts as 1)."""
MAX_STRING_CHARS = 8 * 1024
"""The longest single string, key or value, in characters."""
MAX_TRUSTED_BYTES = 8 * 1024 * 1024
"""Room for values the runtime itself wrote into an approved call (a dry run's plan), beyond ``max_bytes``."""
CONFIRMED_BY = "confirmed_by"
"""The argument only the loop writes, into an approved call: who approved it (``agent.tool_step``)."""
TRUSTED_ARGUMENTS = ("approved_plan", "approval_grant")
"""Keys the loop itself writes into approved calls (``agent.tooling``): exempt from the text limits."""
_PARSED_KEPT = 64  # distinct argument texts whose checked parse is kept (one call is read several times)

# Where nesting can change: brackets and braces, and the quotes and backslashes that decide
# whether a bracket is inside a string. Everything else is skipped by the regex engine.
_STRUCTURAL = re.compile(r'[\[\]{}"\\]')
_ALLOWED_CONTROLS = frozenset("\n\t")
# Unicode general categories that cannot be shown faithfully on an approval card.
_UNSHOWABLE_CATEGORIES = {
    "Cf": "an invisible formatting character",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
    "Co": "a private-use character",
    "Cs": "a lone surrogate",
    "Cn": "an unassigned code point",
    "Cc": "a control character",
}


def parse_arguments(
    text: str,
    *,
    max_bytes: int = MAX_ARGUMENTS_BYTES,
    max_depth: int = MAX_ARGUMENTS_DEPTH,
    max_string: int = MAX_STRING_CHARS,
    trusted: Collection[str] = (),
) -> dict[str, Any]:
    """The arguments object in ``text``; raises ``ArgumentsRejected`` saying what to change.

    Empty (or all-whitespace) text is an empty object: models send ``""`` for tools without
    parameters. ``trusted`` names top-level keys the runtime writes into an approved call itself
    (``approved_plan``): their values are exempt from the string checks and count against
    ``MAX_TRUSTED_BYTES`` instead of ``max_bytes``. Only a tool, which receives the runtime's
    arguments, passes them; the model's own arguments are parsed without.
    """
    size = _size(text)
    room = max_bytes + (MAX_TRUSTED_BYTES if trusted else 0)
    if size > room:
        raise _too_large(size, max_bytes)
    if not text.strip():
        return {}
    check_depth(text, max_depth)
    value = _loads(text)
    if not isinstance(value, dict):
        raise ArgumentsRejected(f"the arguments must be a JSON object, not {_json_type(value)}")
    if trusted and not value.keys().isdisjoint(trusted):
        checked = {key: item for key, item in value.items() if key not in trusted}
    else:
        checked = value  # the usual case: no key of the runtime's
    if trusted and len(checked) == len(value) and size > max_bytes:
        raise _too_large(size, max_bytes)  # no key of the runtime's: the text itself is bounded
    if len(checked) < len(value) and _size(canonical_arguments(checked)) > max_bytes:
        raise _too_large(_size(canonical_arguments(checked)), max_bytes)
    if not _plainly_fine(text, max_string):
        _check_strings(checked, "", max_string)
    return value


def _plainly_fine(text: str, max_string: int) -> bool:
    """Whether every key and string parsed from ``text`` is fine without looking at them: with no
    escape in the text, each is a run of its characters, so none is longer than the text, and none
    holds a character the text does not (printable text: the check made in C, once)."""
    return len(text) <= max_string and "\\" not in text and text.isprintable()


def checked_arguments(text: str, trusted: tuple[str, ...] = TRUSTED_ARGUMENTS) -> dict[str, Any]:
    """``parse_arguments(text, trusted=trusted)``, done once per distinct text.

    One call's arguments are read by the gate, the loop detector and the tool wrappers in the same
    iteration; the checks walk the whole text, so their verdict is kept, keyed by the text itself
    (nothing else decides it), for the last ``_PARSED_KEPT`` texts up to ``MAX_ARGUMENTS_BYTES``.
    Each caller gets its own top-level copy: callers add keys (``confirmed_by``), never change
    nested values.
    """
    if len(text) > MAX_ARGUMENTS_BYTES:  # a dry run's plan: rare, and too large to keep around
        return parse_arguments(text, trusted=trusted)
    verdict = _checked_once(text, trusted)
    if isinstance(verdict, str):
        raise ArgumentsRejected(verdict)
    return dict(verdict)


@functools.lru_cache(maxsize=_PARSED_KEPT)
def _checked_once(text: str, trusted: tuple[str, ...]) -> dict[str, Any] | str:
    try:
        return parse_arguments(text, trusted=trusted)
    except ArgumentsRejected as rejected:  # kept as its message: a raised instance would gather tracebacks
        return str(rejected)


def arguments_without(text: str, keys: tuple[str, ...]) -> str:
    """``text`` less its top-level ``keys``: what a wrapper hands the tool it wraps (a router drops
    the ``target`` it routed by). Worked out once per distinct text, like ``checked_arguments``
    (whose parse it reads), so the layers of one call do not parse and serialise it again each.
    Text that is not an arguments object comes back as it is: the inner tool refuses it itself."""
    if len(text) > MAX_ARGUMENTS_BYTES:
        return _without(text, keys)
    return _without_once(text, keys)


@functools.lru_cache(maxsize=_PARSED_KEPT)
def _without_once(text: str, keys: tuple[str, ...]) -> str:
    return _without(text, keys)


def _without(text: str, keys: tuple[str, ...]) -> str:
    try:
        parsed = checked_arguments(text)
    except ArgumentsRejected:
        return text
    return json.dumps({key: value for key, value in parsed.items() if key not in keys})


def canonical_arguments(parsed: dict[str, Any]) -> str:
    """One text per arguments object (sorted keys, no spaces, unicode kept): for hashing and identity."""
    if _canonical_chunks is not None:
        return "".join(_canonical_chunks(parsed, 0))
    return _CANONICAL.encode(parsed)


def confirmed_by(arguments: str) -> str | None:
    """Who approved the call whose ``arguments`` these are, as the loop wrote it in; ``None`` for a
    call nobody approved. The one reader: the run card, the audit log and the history use it."""
    try:
        value = json.loads(arguments).get(CONFIRMED_BY)
    except (ValueError, AttributeError, RecursionError):
        return None
    return value if isinstance(value, str) else None


def check_depth(text: str, max_depth: int) -> None:
    """Raise ``ArgumentsRejected`` if brackets outside JSON strings nest deeper than ``max_depth``.

    Linear in ``len(text)`` and never recursive. Malformed text (unbalanced brackets, an
    unterminated string) passes here and is refused by the parser, which then recurses at most
    ``max_depth`` levels.
    """
    if text.count("{") + text.count("[") <= max_depth:
        return  # the usual case: fewer opening brackets than the limit, wherever they are (C speed)
    depth = 0
    in_string = False
    skip_to = -1  # the character after a backslash is escaped, whatever it is
    for match in _STRUCTURAL.finditer(text):
        position = match.start()
        if position < skip_to:
            continue
        char = match.group()
        if in_string:
            if char == "\\":
                skip_to = position + 2
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > max_depth:
                raise ArgumentsRejected(
                    f"the arguments nest objects or arrays more than {max_depth} levels deep "
                    f"(at most {max_depth}): flatten them"
                )
        elif char in "]}":
            depth -= 1


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _too_large(size: int, max_bytes: int) -> ArgumentsRejected:
    return ArgumentsRejected(
        f"the arguments are {size:,} bytes (at most {max_bytes:,}): send less, "
        "or do the work in several smaller calls"
    )


def describe_character(char: str) -> str:
    """``U+202E RIGHT-TO-LEFT OVERRIDE`` (or the kind of character when it has no name)."""
    code = f"U+{ord(char):04X}"
    name = unicodedata.name(char, "")
    if name:
        return f"{code} {name}"
    kind = _UNSHOWABLE_CATEGORIES.get(unicodedata.category(char), "a character")
    return f"{code} ({kind})"


def showable(char: str) -> bool:
    """Whether a reader sees ``char`` for what it is (``\\n`` and ``\\t`` count as showable)."""
    return char in _ALLOWED_CONTROLS or unicodedata.category(char) not in _UNSHOWABLE_CATEGORIES


def unshowable_character(text: str) -> str | None:
    """The first character of ``text`` an approver could not see for what it is, if any."""
    # Printable (``str.isprintable``: no category C* or Z* but the ASCII space) implies showable:
    # every unshowable category is one of those. Checked in C before the walk by character.
    if text.isprintable() or text.replace("\n", " ").replace("\t", " ").isprintable():
        return None
    for char in text:
        if not showable(char):
            return char
    return None


def _loads(text: str) -> Any:
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise ArgumentsRejected(
            f"the arguments are not valid JSON ({exc.msg} at position {exc.pos})"
        ) from exc
    except RecursionError as exc:  # unreachable after check_depth; kept so no caller ever sees one
        raise ArgumentsRejected("the arguments nest too deeply: flatten them") from exc
    except ValueError as exc:  # an integer with thousands of digits (Python's int limit), and the hooks
        if isinstance(exc, ArgumentsRejected):
            raise
        raise ArgumentsRejected(
            "the arguments contain a number too long to read: send fewer digits (or the number as a string)"
        ) from exc


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # A repeated key means different things to different parsers: the card and the tool could disagree.
    result = dict(pairs)  # built in C; a key given twice leaves it shorter than the pairs
    if len(result) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ArgumentsRejected(f"argument {_quoted(key)} is given twice: give each argument once")
            seen.add(key)
    return result


def _refuse_constant(name: str) -> float:
    raise ArgumentsRejected(f"{name} is not a JSON number: use a finite number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ArgumentsRejected(f"the number {text[:40]} is too large: use a finite number")
    return value


def _check_strings(value: Any, path: str, max_string: int) -> None:
    """Every key and string value, recursively: short enough and showable.

    A key or string that passes the check made in C (``_fine``) costs no call and no path text;
    the path is built for what needs a closer look, or a look inside.
    """
    if isinstance(value, str):
        _check_string(value, path, max_string, what="argument")
    elif isinstance(value, dict):
        for key, item in value.items():
            fine_key = len(key) <= max_string and key.isprintable()
            if fine_key and (type(item) in _SCALARS or (type(item) is str and _fine(item, max_string))):
                continue
            where = f"{path}.{key}" if path else key
            _check_string(key, where, max_string, what="argument name")
            _check_strings(item, where, max_string)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if type(item) in _SCALARS or (type(item) is str and _fine(item, max_string)):
                continue
            _check_strings(item, f"{path}[{index}]", max_string)


_SCALARS = frozenset({int, float, bool, type(None)})  # what JSON parses to besides str, dict and list


def _fine(text: str, max_string: int) -> bool:
    return len(text) <= max_string and text.isprintable()


def _check_string(text: str, path: str, max_string: int, *, what: str) -> None:
    if _fine(text, max_string):
        return  # the usual case, decided in C; the label below is built only for a refusal
    label = f"{what} {_quoted(path)}" if path else what
    if len(text) > max_string:
        raise ArgumentsRejected(
            f"{label} is {len(text):,} characters long (at most {max_string:,}): shorten it"
        )
    char = unshowable_character(text)
    if char is not None:
        raise ArgumentsRejected(
            f"{label}: {describe_character(char)} cannot be shown on an approval card: "
            "send the text without it"
        )


def _quoted(path: str) -> str:
    """A path as it can be quoted in a message: characters that cannot be shown become escapes."""
    shown = "".join(
        char if char == " " or (char.isprintable() and char not in '"\\') else _escape(char) for char in path
    )
    return f'"{shown[:200]}"'


def _escape(char: str) -> str:
    if char in '"\\':
        return "\\" + char
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"


# Built once: ``json.loads`` and ``json.dumps`` with any option build a new decoder or encoder per call.
_DECODER = json.JSONDecoder(
    object_pairs_hook=_unique_keys, parse_constant=_refuse_constant, parse_float=_finite_float
)
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
# ``_CANONICAL.encode`` builds its C encoder anew on every call (two thirds of its cost for a small
# object); this is that encoder, built once with the same options. No cycle check: what it encodes
# is parsed JSON or built from it. Used only when the C encoder exists and agrees with ``_CANONICAL``.
_canonical_chunks = (
    json.encoder.c_make_encoder(  # type: ignore[attr-defined]
        None, _CANONICAL.default, json.encoder.encode_basestring, None, ":", ",", True, False, False
    )
    if getattr(json.encoder, "c_make_encoder", None) is not None
    else None
)
_SAMPLE = {"b": [1, 2.5, None, True, {"z": "é\n\u202e", "a": -1}], "a": "x"}
if _canonical_chunks is not None and "".join(_canonical_chunks(_SAMPLE, 0)) != _CANONICAL.encode(_SAMPLE):
    _canonical_chunks = None
