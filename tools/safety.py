"""Output safety: secret redaction and a size cap for every tool result.

``OutputFilter`` (``str -> str``) is what the loop applies to each tool result, errors included:
control characters are stripped, secrets are replaced by ``[REDACTED]``, and long text keeps its
head and tail with a marker saying how much was cut. Redaction runs before the cut, so a secret is
never half-shown at the edge of the cut. ``Redactor`` alone is reusable (the logging layer).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from tools.errors import ToolConfigError
from tools.patterns import SafePattern, compile_safe
from tools.secret_forms import secrets_pattern

REDACTED = "[REDACTED]"
DEFAULT_MAX_CHARS = 4000
MIN_MAX_CHARS = 200
# Shorter values would redact ordinary words; real secrets are longer than this.
MIN_SECRET_VALUE_CHARS = 6

_PRIVATE_KEY_HEADER = r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----"
_PRIVATE_KEY_FOOTER = r"-----END [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----"
# A whole block, or one whose end was cut off (a log tail, a truncated dump).
_PRIVATE_KEY_BLOCK = re.compile(rf"{_PRIVATE_KEY_HEADER}(?:.*?{_PRIVATE_KEY_FOOTER}|.*\Z)", re.DOTALL)
_PRIVATE_KEY_FOOTER_LINE = re.compile(rf"[ \t]*{_PRIVATE_KEY_FOOTER}")
_BASE64_LINE = re.compile(r"[ \t]*[A-Za-z0-9+/=]{16,}[ \t]*\r?")
_SLACK_TOKEN = re.compile(r"\b(?:xox[a-z]|xapp)-[A-Za-z0-9-]{6,}")
_SLACK_WEBHOOK = re.compile(r"(hooks\.slack\.com/(?:services|workflows)/)[A-Za-z0-9/_-]+")
# An access key ID followed closely by its 40-character secret (CSV exports, "id secret" pairs).
_AWS_KEY_PAIR = re.compile(
    r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b(?P<sep>[\s,;:=|\"'`]{1,10})[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
)
_AWS_ACCESS_KEY = re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9\-._~+/]{8,}=*")
# The lookbehinds make each run of key characters a single match attempt: without them a long
# run (a base64 blob) is retried from every position, which is quadratic.
_URL_PASSWORD = re.compile(r"(?i)(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*://[^\s/:@]*:)([^\s/@]+)(@)")
# ``KEY=value``, ``key: value``, ``"key": "value"``, ``--token=value``; the key stays readable.
# Keys are matched as whole runs (possessive, after a lookbehind) and checked for a secret word
# afterwards, so the scan stays linear however long a line is.
_KEY_SEPARATOR = re.compile(r"(?<![A-Za-z0-9_.-])(?P<name>[A-Za-z0-9_.-]++)[\"']?[ \t]*+[:=][ \t]*+")
_SECRET_WORD = re.compile(
    r"(?i)password|passwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key"
    r"|credential|authorization|cookie"
)
_PAIR_VALUE = re.compile(r"(?i)\"[^\"\n]*\"|'[^'\n]*'|(?:(?:Bearer|Basic|Token|Digest)[ \t]+)?[^\s,;&\"'<>]+")
# A count, not a credential: ``Tokens: 48,213``, ``max_tokens: 4096``. Kept only under keys whose one
# secret word is "token" (the bot's own usage lines); ``password=1234`` is still redacted.
_PLAIN_NUMBER = re.compile(r"[+-]?\d+(?:[.,_]\d+)*[}\])]*")  # closers: the end of a JSON object
_ANSI_ESCAPE = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class OutputSettings(Protocol):
    """The settings ``OutputFilter.from_settings`` reads (``bot.settings.Settings`` has them)."""

    @property
    def chatops_tool_output_max_chars(self) -> int: ...

    @property
    def chatops_redact_env(self) -> Sequence[str]: ...

    @property
    def chatops_redact_patterns(self) -> Sequence[str]: ...


class Redactor:
    """Replaces secrets in text by ``[REDACTED]``.

    Built-in rules: private key blocks, Slack tokens and webhook URLs, AWS access keys (and the
    secret key next to one), bearer tokens, passwords in URLs, and ``key=value`` / ``key: value``
    pairs whose key looks secret (a plain number under a ``token`` key is a count and kept). On
    top: known ``secrets`` (e.g. the values of configured environment variables), matched raw and
    in their encoded forms (``tools.secret_forms``: spaced, URL- and JSON-escaped, hex, base64),
    and extra ``patterns`` (RE2 syntax; each whole match is replaced).
    """

    def __init__(self, secrets: Iterable[str] = (), patterns: Iterable[str] = ()) -> None:
        values = {value for value in secrets if len(value) >= MIN_SECRET_VALUE_CHARS}
        self._known = secrets_pattern(values)
        self._extra = [_compile_pattern(pattern) for pattern in patterns]

    @classmethod
    def from_env(
        cls, names: Iterable[str], env: Mapping[str, str] | None = None, patterns: Iterable[str] = ()
    ) -> Redactor:
        """Redact the values that the environment variables ``names`` hold in ``env``."""
        source = os.environ if env is None else env
        return cls(secrets=[source[name] for name in names if source.get(name)], patterns=patterns)

    @classmethod
    def from_settings(
        cls,
        settings: OutputSettings,
        env: Mapping[str, str] | None = None,
        extra_secrets: Iterable[str] = (),
    ) -> Redactor:
        """Redact the ``CHATOPS_REDACT_ENV`` values, ``CHATOPS_REDACT_PATTERNS`` and ``extra_secrets``.

        A value is taken from the environment and from the settings field of the same name, since
        settings may have read it from ``.env`` without it being in the environment.
        """
        source = os.environ if env is None else env
        secrets = list(extra_secrets)
        own = getattr(settings, "secret_values", None)  # bot.settings.Settings: its own secrets
        if callable(own):
            secrets.extend(value for value in own() if isinstance(value, str))
        for name in settings.chatops_redact_env:
            secrets.append(source.get(name, ""))
            loaded = getattr(settings, name.lower(), None)
            if isinstance(loaded, str):
                secrets.append(loaded)
        return cls(secrets=[value for value in secrets if value], patterns=settings.chatops_redact_patterns)

    def redact(self, text: str) -> str:
        """``text`` with every secret it recognises replaced."""
        text = _PRIVATE_KEY_BLOCK.sub(f"{REDACTED} (private key)", text)
        text = _redact_key_tails(text)
        if self._known is not None:
            text = self._known.sub(REDACTED, text)
        text = _SLACK_TOKEN.sub(REDACTED, text)
        text = _SLACK_WEBHOOK.sub(rf"\g<1>{REDACTED}", text)
        text = _AWS_KEY_PAIR.sub(rf"{REDACTED}\g<sep>{REDACTED}", text)
        text = _AWS_ACCESS_KEY.sub(REDACTED, text)
        text = _BEARER.sub(rf"\g<1>{REDACTED}", text)
        text = _URL_PASSWORD.sub(rf"\g<1>{REDACTED}\g<3>", text)
        text = _redact_secret_pairs(text)
        for pattern in self._extra:
            text = pattern.sub(REDACTED, text)
        return text

    def redact_json(self, node: object) -> object:
        """A JSON value redacted so it stays valid JSON: every string (keys too) redacted, and the
        whole value of a key that looks secret replaced (``{"password": "..."}``; counts kept)."""
        if isinstance(node, str):
            return self.redact(node)
        if isinstance(node, dict):
            return {
                self.redact(str(key)): REDACTED if _secret_value(str(key), item) else self.redact_json(item)
                for key, item in node.items()
            }
        if isinstance(node, list | tuple):
            return [self.redact_json(item) for item in node]
        return node


def _redact_key_tails(text: str) -> str:
    """The end of a key block whose header was cut off (a ``tail``): base64 lines, then the footer.

    Walks back from each footer line by line, so the cost stays linear in the text.
    """
    pieces: list[str] = []
    done = 0
    for footer in _PRIVATE_KEY_FOOTER_LINE.finditer(text):
        line_start = max(done, text.rfind("\n", done, footer.start()) + 1)
        if line_start != footer.start() and text[line_start : footer.start()].strip(" \t"):
            continue  # the footer does not begin its line
        start = line_start
        while start > done:
            previous = max(done, text.rfind("\n", done, start - 1) + 1)
            if not _BASE64_LINE.fullmatch(text, previous, start - 1):
                break
            start = previous
        if start == line_start:
            continue  # no key material above it
        pieces.append(text[done:start])
        pieces.append(f"{REDACTED} (private key)")
        done = footer.end()
    pieces.append(text[done:])
    return "".join(pieces)


def _redact_secret_pairs(text: str) -> str:
    """Replace the value after each key that looks secret (quotes around a value are kept)."""
    pieces: list[str] = []
    done = 0
    for key in _KEY_SEPARATOR.finditer(text):
        if key.start() < done or not _SECRET_WORD.search(key.group("name")):
            continue  # inside a value already replaced, or an ordinary key
        value = _PAIR_VALUE.match(text, key.end())
        if value is None or _is_count(key.group("name"), value.group(0)):
            continue
        quote = value.group(0)[0] if value.group(0)[0] in "\"'" else ""
        pieces.append(text[done : key.end()])
        pieces.append(f"{quote}{REDACTED}{quote}")
        done = value.end()
    pieces.append(text[done:])
    return "".join(pieces)


def _secret_value(key: str, value: object) -> bool:
    """Whether a JSON object's ``key: value`` is a credential (containers are searched instead)."""
    if value is None or isinstance(value, bool | dict | list) or not _SECRET_WORD.search(key):
        return False
    return not _is_count(key, str(value))


def _is_count(key: str, value: str) -> bool:
    words = {word.lower() for word in _SECRET_WORD.findall(key)}
    return words == {"token"} and _PLAIN_NUMBER.fullmatch(value.strip("\"'")) is not None


def _compile_pattern(pattern: str) -> SafePattern:
    # RE2: these run over tool output, which an attacker can shape; a backtracking pattern would
    # let a log line freeze every worker.
    try:
        compiled = compile_safe(pattern)
    except ValueError as exc:
        raise ToolConfigError(f"redaction pattern {pattern!r} is not a valid regex: {exc}") from None
    if compiled.search(""):
        raise ToolConfigError(f"redaction pattern {pattern!r} matches the empty string")
    return compiled


def strip_control_chars(text: str) -> str:
    """Remove terminal escapes and control characters (keeps newlines and tabs)."""
    text = _ANSI_ESCAPE.sub("", text.replace("\r\n", "\n"))
    return _CONTROL_CHARS.sub("", text)


def truncate(text: str, max_chars: int) -> str:
    """Keep the head and tail of ``text`` within ``max_chars``, with a marker saying what was cut.

    Cuts fall on line boundaries when one is near, so the kept lines are whole.
    """
    if len(text) <= max_chars:
        return text
    marker_room = len(f"\n[... {len(text)} characters cut ...]\n")
    budget = max(0, max_chars - marker_room)
    head_end = _line_boundary_before(text, budget * 2 // 3)
    tail_start = _line_boundary_after(text, len(text) - (budget - head_end))
    cut = tail_start - head_end
    return f"{text[:head_end]}\n[... {cut} characters cut ...]\n{text[tail_start:]}"


def _line_boundary_before(text: str, index: int) -> int:
    """``index`` moved back to just after a newline, if one lies within the last fifth."""
    newline = text.rfind("\n", index - index // 5, index)
    return newline + 1 if newline >= 0 else index


def _line_boundary_after(text: str, index: int) -> int:
    """``index`` moved forward to just after a newline, if one lies within the next fifth."""
    span = (len(text) - index) // 5
    newline = text.find("\n", index, index + span)
    return newline + 1 if newline >= 0 else index


class OutputFilter:
    """The ``tool_output_filter`` of a run: clean, redact, then cap the size."""

    def __init__(self, redactor: Redactor | None = None, max_chars: int = DEFAULT_MAX_CHARS) -> None:
        if max_chars < MIN_MAX_CHARS:
            raise ToolConfigError(f"the tool output cap must be at least {MIN_MAX_CHARS} characters")
        self.redactor = redactor or Redactor()
        self.max_chars = max_chars

    @classmethod
    def from_settings(
        cls,
        settings: OutputSettings,
        *,
        env: Mapping[str, str] | None = None,
        extra_secrets: Iterable[str] = (),
    ) -> OutputFilter:
        """Built from ``CHATOPS_TOOL_OUTPUT_MAX_CHARS``, ``CHATOPS_REDACT_ENV``, ``CHATOPS_REDACT_PATTERNS``.

        ``extra_secrets``: more literal values, e.g. ``ToolRegistry.secret_values`` (catalog headers).
        """
        redactor = Redactor.from_settings(settings, env, extra_secrets)
        return cls(redactor, max_chars=settings.chatops_tool_output_max_chars)

    def __call__(self, text: str) -> str:
        return truncate(self.redactor.redact(strip_control_chars(text)), self.max_chars)
