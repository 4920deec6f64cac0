"""Reading the settings the way every process does: ``load_settings``, with every problem named.

One place turns what is wrong with the configuration into lines an operator can act on: a value the
model refuses (``REDIS_URL: must start with redis://...``), a name no setting knows
(``bot.settings_names``), a missing ``--env-file``. Each ``SettingProblem`` names the setting, where it
came from and the fix, and never echoes a value (it may be a secret).

The load never stops at the first problem: a value the model refuses is replaced by its default and
the rest read again, so ``chatops doctor`` can report that one setting and still run every other check
(``Loaded.invalid`` says which settings it must not trust). Every other command stops on an error
(``Loaded.errors``); warnings are logged.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dotenv import dotenv_values
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from bot.settings import DEFAULTS, RENAMED, Settings, SettingsConflict
from bot.settings_names import ENVIRONMENT, review_names

DEFAULT_ENV_FILE = ".env"
_FIELDS = {
    **{name.upper(): name for name in Settings.model_fields},
    **{old: new.lower() for old, (new, _) in RENAMED.items()},
}
_MAX_PASSES = 8  # each pass takes out at least one refused setting; a few suffice in practice


class SettingsFileMissingError(FileNotFoundError):
    """``--env-file`` names no file: reading the defaults instead would hide the mistake."""

    def __init__(self, path: str) -> None:
        super().__init__(f"--env-file {path}: no such file")
        self.path = path


@dataclass(frozen=True)
class SettingProblem:
    """What is wrong with one setting (``setting`` is its variable name, or ``--env-file``)."""

    setting: str
    message: str
    fix: str = ""
    source: str = ""
    fatal: bool = True

    def line(self) -> str:
        where = f" (in {self.source})" if self.source else ""
        fix = f"; fix: {self.fix}" if self.fix else ""
        return f"{self.setting}{where}: {self.message}{fix}"


@dataclass(frozen=True)
class Loaded:
    """The settings (a refused value replaced by its default), and every problem found."""

    settings: Settings
    problems: list[SettingProblem] = field(default_factory=list)
    invalid: frozenset[str] = frozenset()  # field names whose value was refused

    @property
    def errors(self) -> list[SettingProblem]:
        return [problem for problem in self.problems if problem.fatal]

    @property
    def warnings(self) -> list[SettingProblem]:
        return [problem for problem in self.problems if not problem.fatal]


def load_settings(env_file: str | None = None) -> Loaded:
    """The settings from the process environment over ``env_file`` (default ``./.env``, which may be
    absent; a named one may not: ``SettingsFileMissingError``), as the model reads them."""
    environ = os.environ
    if env_file is not None and not _readable(Path(env_file)):
        raise SettingsFileMissingError(env_file)
    path = env_file if env_file is not None else DEFAULT_ENV_FILE
    file_values = dotenv_values(path) if _readable(Path(path)) else {}
    source = str(path)
    settings, refused = _tolerant(path if file_values else None, source, file_values, environ)
    invalid = frozenset(name for problem in refused for name in _fields(problem))
    names = review_names(file_values, source, environ, also_known=settings.chatops_redact_env)
    problems = [
        *refused,
        *(SettingProblem(n.name, n.message, _name_fix(n.message, n.fatal), n.source, n.fatal) for n in names),
    ]
    return Loaded(settings, sorted(problems, key=lambda problem: not problem.fatal), invalid)


def _readable(path: Path) -> bool:
    """A file (or ``/dev/null``, a pipe): anything but a directory or nothing."""
    return path.exists() and not path.is_dir()


def _name_fix(message: str, fatal: bool) -> str:
    """An unknown name's fix, unless its message says it already ("did you mean ...?")."""
    return "rename or remove it" if fatal and "; " not in message else ""


def _tolerant(
    env_file: str | None, source: str, file_values: Mapping[str, str | None], environ: Mapping[str, str]
) -> tuple[Settings, list[SettingProblem]]:
    """Read; for each value refused, note it and read again with that setting at its default."""
    overrides: dict[str, Any] = {}
    problems: list[SettingProblem] = []
    for _ in range(_MAX_PASSES):
        try:
            return Settings(_env_file=env_file, **overrides), problems  # type: ignore[call-arg]
        except ValidationError as error:
            found = [_problem(detail, source, file_values, environ) for detail in error.errors()]
        fresh = [problem for problem in found if _fields(problem) - overrides.keys()]
        for problem in fresh:
            overrides.update({name: getattr(DEFAULTS, name) for name in _fields(problem)})
        problems += [problem for problem in found if problem not in problems]
        if not fresh:
            break
    return Settings.model_construct(), problems  # nothing readable: the defaults, every check told why


def _fields(problem: SettingProblem) -> set[str]:
    return {_FIELDS[name] for name in problem.setting.split(", ") if name in _FIELDS}


def _problem(
    detail: ErrorDetails, source: str, file_values: Mapping[str, str | None], environ: Mapping[str, str]
) -> SettingProblem:
    conflict = (detail.get("ctx") or {}).get("error")
    if isinstance(conflict, SettingsConflict):
        names = list(conflict.settings)
    else:
        names = [str(detail["loc"][0]).upper()] if detail["loc"] else ["settings"]
    message = str(detail["msg"]).removeprefix("Value error, ")
    if len(names) == 1:  # "REDIS_SENTINEL_TLS: needs REDIS_SENTINELS", not the name twice
        message = message.removeprefix(f"{names[0]} ")
    where = _where(names, source, file_values, environ)
    return SettingProblem(", ".join(names), message, f"correct it in {where}", where)


def _where(
    names: list[str], source: str, file_values: Mapping[str, str | None], environ: Mapping[str, str]
) -> str:
    """Where the setting was read from: the environment wins over the file, as in the model."""
    in_env = any(name in environ or name.lower() in environ for name in names)
    in_file = any(name in {key.upper() for key in file_values} for name in names)
    if in_env:
        return ENVIRONMENT
    return source if in_file else f"{source} or {ENVIRONMENT}"
