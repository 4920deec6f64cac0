"""Structured logs: JSON lines (or a human format on a terminal), run context on every line, secrets redacted.

``configure_logging`` installs one handler on the root logger (the CLI calls it for every
subcommand). Each line carries the ``run_id``, ``channel`` and ``thread_ts`` of the run being
worked on: the job binds them with ``run_context`` (context variables), so code deep in the loop
logs without passing them along. Threads a job starts (the tool pool, the lease renewer) do not
inherit context variables; for them the context bound last in the *process* is used as a
fallback, which is exact in RQ's work horses (one job per process) and in ``SimpleWorker``
(one job at a time).

Every string that reaches a line goes through the same ``tools.safety.Redactor`` as tool output
(Slack tokens, bearer tokens, ``password=...`` pairs, the values of ``CHATOPS_REDACT_ENV``...);
an ``extra`` field whose *name* looks secret is replaced whole.

JSON line fields: ``ts`` (UTC, ISO 8601 with milliseconds), ``level``, ``logger``, ``msg``,
``pid``, then the run fields when bound, any ``extra`` fields, and ``exc`` for a traceback.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, TextIO

from bot.settings import DEFAULTS, Settings
from tools.errors import ToolConfigError
from tools.safety import REDACTED, Redactor

RUN_FIELDS = ("run_id", "channel", "thread_ts")
FORMATS = ("auto", "json", "text")
_HANDLER_MARK = "_chatops_handler"
_SECRET_NAME = re.compile(r"(?i)password|passwd|secret|token|api[_-]?key|credential|authorization|cookie")
# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", *RUN_FIELDS}

_run: ContextVar[dict[str, str] | None] = ContextVar("chatops_log_run", default=None)
_process_run: dict[str, str] | None = None  # the fallback for threads a job started


@contextmanager
def run_context(run_id: str, channel: str = "", thread_ts: str = "") -> Iterator[None]:
    """Tag every log line written inside the block (and by the job's threads) with the run."""
    global _process_run
    fields = {"run_id": run_id, "channel": channel, "thread_ts": thread_ts}
    token = _run.set(fields)
    previous, _process_run = _process_run, fields
    try:
        yield
    finally:
        _run.reset(token)
        _process_run = previous


def current_run() -> dict[str, str]:
    """The run fields bound now (empty outside a job)."""
    return dict(_run.get() or _process_run or {})


class RunContextFilter(logging.Filter):
    """Copies the bound run fields onto each record (fields given with ``extra=`` win)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in current_run().items():
            if value and not hasattr(record, name):
                setattr(record, name, value)
        return True


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")}


class JsonFormatter(logging.Formatter):
    """One JSON object per line; every string value redacted before encoding (so the JSON stays valid)."""

    def __init__(self, redact: Callable[[str], str] = lambda text: text) -> None:
        super().__init__()
        self._redact = redact

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        line: dict[str, Any] = {
            "ts": stamp.replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "msg": self._redact(record.getMessage()),
            "pid": record.process,
        }
        for name in RUN_FIELDS:
            value = getattr(record, name, None)
            if value:
                line[name] = str(value)
        for name, value in _extras(record).items():
            line[name] = REDACTED if _SECRET_NAME.search(name) else self._clean(value)
        if record.exc_info:
            line["exc"] = self._redact(self.formatException(record.exc_info))
        if record.stack_info:
            line["stack"] = self._redact(self.formatStack(record.stack_info))
        return json.dumps(line, ensure_ascii=False, default=str)

    def _clean(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._redact(value)
        if isinstance(value, bool | int | float) or value is None:
            return value
        if isinstance(value, Mapping):
            return {
                str(k): REDACTED if _SECRET_NAME.search(str(k)) else self._clean(v) for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self._clean(item) for item in value]
        return self._redact(str(value))


class TextFormatter(logging.Formatter):
    """``12:00:01 INFO bot.runs.jobs [run 1a2b3c4d5e6f C1/171.2]: message`` for people at a terminal."""

    def __init__(self, redact: Callable[[str], str] = lambda text: text) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s%(run)s: %(message)s", "%H:%M:%S")
        self._redact = redact

    def format(self, record: logging.LogRecord) -> str:
        run_id = getattr(record, "run_id", "")
        where = "/".join(p for p in (getattr(record, "channel", ""), getattr(record, "thread_ts", "")) if p)
        record.run = f" [run {str(run_id)[:12]}{' ' + where if where else ''}]" if run_id else ""
        return self._redact(super().format(record))


def redactor_for(settings: Settings, extra_secrets: Iterable[str] = ()) -> Redactor:
    """The one redactor for everything the bot stores or shows: the built-in patterns, the bot's
    own secrets (``Settings.secret_values``: Slack tokens, LLM key, Redis password...), the
    ``CHATOPS_REDACT_ENV`` values and ``extra_secrets`` (e.g. the tool catalog's), each also in
    its encoded forms. Without the extra patterns when they are invalid (the CLI must still
    start, and ``chatops doctor`` reports the bad pattern)."""
    secrets = list(extra_secrets)
    try:
        return Redactor.from_settings(settings, extra_secrets=secrets)
    except ToolConfigError:
        usable = settings.model_copy(update={"chatops_redact_patterns": []})
        return Redactor.from_settings(usable, extra_secrets=secrets)


def wants_json(fmt: str, stream: TextIO) -> bool:
    """``auto`` means text on a terminal and JSON anywhere else (files, pipes, a log shipper)."""
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt == "auto":
        isatty = getattr(stream, "isatty", None)
        return not (callable(isatty) and isatty())
    return fmt == "json"


def configure_logging(
    level: str | int = "INFO",
    fmt: str = DEFAULTS.chatops_log_format,
    *,
    redactor: Redactor | None = None,
    stream: TextIO | None = None,
) -> logging.Handler:
    """Install the chatops handler on the root logger (replacing one installed before); returns it."""
    stream = stream or sys.stderr
    redact = (redactor or Redactor()).redact
    handler = logging.StreamHandler(stream)
    formatter = JsonFormatter(redact) if wants_json(fmt, stream) else TextFormatter(redact)
    handler.setFormatter(formatter)
    handler.addFilter(RunContextFilter())
    setattr(handler, _HANDLER_MARK, True)
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    logging.captureWarnings(True)
    return handler
