"""The forms a known secret takes in text, as one regex: raw, spaced, URL- and JSON-escaped, hex, base64.

A model told by a log line to "encode the password first" writes ``aHVudGVyMg==``; a debug dump
shows ``68756e74657232``; a query string carries ``p%40ss``; the audit stream holds ``p\\"ss`` in
JSON. Each known secret (the bot's own, the ``CHATOPS_REDACT_ENV`` values, catalog headers) is
matched in all of these:

* as text: each character as itself, percent-encoded (any case) or JSON-escaped, with at most one
  space, tab, newline, ``.``, ``-``, ``_`` or ``:`` between characters ("spaced out");
* as hex: two digits a byte (any case), optionally ``\\x``-prefixed, optionally separated by a
  space or ``:`` (``xxd``, ``hexdump``, MAC-style);
* as base64 (standard and URL-safe alphabets), at each of the three byte alignments it can have
  inside a longer encoded blob: only the characters that depend on the secret's bytes alone are
  matched, so a secret encoded together with other data is found too. Line breaks inside
  (MIME and PEM wrap at 64 or 76 characters) are allowed.

What this cannot catch is written down in docs/TOOLS.md ("What redaction cannot catch").
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable

from tools.patterns import SafePattern, compile_safe

# A derived form shorter than this would match ordinary text.
MIN_FORM_CHARS = 6
_TEXT_GAP = r"[ \t\r\n.\-_:]?"
_HEX_GAP = r"[ :]?"
_B64_GAP = r"(?:\r?\n)?"
_B64_DROP = (0, 2, 3)  # leading characters shared with the bytes before, per alignment


def secrets_pattern(secrets: Iterable[str]) -> SafePattern | None:
    """One pattern for every form of every secret (longest secrets first), or None for none.

    RE2 runs it in one linear pass however many secrets there are (about 50 times faster than
    ``re`` on a MiB of output). A set too large for RE2's memory budget falls back to ``re``,
    still without backtracking blow-up: every alternative is a fixed sequence of characters.
    """
    ordered = sorted(set(secrets), key=len, reverse=True)
    alternatives: list[str] = []
    for secret in ordered:
        alternatives.extend(secret_forms(secret))
    if not alternatives:
        return None
    source = "|".join(dict.fromkeys(alternatives))
    try:
        return compile_safe(source)
    except ValueError:
        return SafePattern(source, re.compile(source))


def secret_forms(secret: str) -> list[str]:
    """The regex sources of each form of ``secret`` (see the module docstring)."""
    data = secret.encode()
    forms = [_text_form(secret), _hex_form(data)]
    for alphabet in ("standard", "urlsafe"):
        for alignment in range(3):
            core = _base64_core(data, alignment, alphabet)
            if len(core) >= MIN_FORM_CHARS:
                forms.append(_B64_GAP.join(re.escape(char) for char in core))
    return forms


def _text_form(secret: str) -> str:
    return _TEXT_GAP.join(_char_form(char) for char in secret)


def _char_form(char: str) -> str:
    options = [re.escape(char)]
    options.append("".join(f"%{_any_case(f'{byte:02X}')}" for byte in char.encode()))
    escaped = json.dumps(char)[1:-1]
    if escaped != char:
        options.append(re.escape(escaped))
    if char == "/":
        options.append(re.escape("\\/"))  # JSON may escape it too
    if char == " ":
        options.append(r"\+")  # form encoding
    return f"(?:{'|'.join(options)})"


def _hex_form(data: bytes) -> str:
    return _HEX_GAP.join(rf"(?:\\x)?{_any_case(f'{byte:02x}')}" for byte in data)


def _any_case(hex_digits: str) -> str:
    return "".join(f"[{d.lower()}{d.upper()}]" if d.isalpha() else d for d in hex_digits)


def _base64_core(data: bytes, alignment: int, alphabet: str) -> str:
    """The base64 characters that encode ``data`` alone when ``alignment`` bytes precede it."""
    padded = b"\x00" * alignment + data
    whole = len(padded) // 3 * 3
    encode = base64.urlsafe_b64encode if alphabet == "urlsafe" else base64.b64encode
    text = encode(padded[:whole]).decode()
    rest = len(padded) - whole
    if rest:
        # One leftover byte fixes one character, two fix two; the next depends on what follows.
        text += encode(padded[whole:]).decode()[:rest]
    return text[_B64_DROP[alignment] :]
