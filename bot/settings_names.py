"""Which variable names are chatops's settings: a mistyped, renamed or retired one is said, never dropped.

The settings model reads with ``extra="ignore"`` (the environment is shared with every other program),
so without this a ``CHATOPS_APROVERS=U123`` would be dropped without a word, and with no approver list
every full member of the workspace may approve. ``review_names`` looks at every name with a prefix the
settings own (``CHATOPS_``, ``SLACK_``, ``REDIS_``, ``LLM_``, ``WEB_``: derived from the model's fields):

* in the settings file (``.env`` or ``--env-file``), which holds chatops's settings only, a name no
  setting knows is an error naming the closest setting;
* in the process environment, where orchestrators add variables of their own, only a likely typo of a
  setting (a small edit distance for its length) is an error; any other unknown name is a warning, and
  Kubernetes' service-link variables (``REDIS_PORT=tcp://10.0.0.1:6379``, ``CHATOPS_WEB_SERVICE_HOST``,
  ... for a Service named ``redis`` or ``chatops-web``) are recognised by name *and* value and ignored;
* a renamed setting's old name works (``bot.settings.RENAMED``: the field's alias) with a warning naming
  the new one; both names set at once is an error; a retired setting (``RETIRED``) is a warning
  naming what became of it (most are constants now, with their value), in the file as in the
  environment: an upgrade with an old ``.env`` still starts, and says what no longer applies.

Names the settings themselves point at (the fallback models' key variables, ``${NAME}`` in headers, every
``CHATOPS_REDACT_ENV`` entry) and the names chatops's deploy files read are known too.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Final

from bot.settings import RENAMED, RETIRED, Settings

ENVIRONMENT = "the environment"

# Read by chatops's own deploy files, not by chatops: docker-compose.yml's image and port (docs/DEPLOY.md),
# and the worker count Heroku's Python buildpack sets for the Procfile's web process.
ELSEWHERE: Final = frozenset({"CHATOPS_IMAGE", "REDIS_IMAGE", "CHATOPS_WEB_PORT", "WEB_CONCURRENCY"})


def setting_names() -> tuple[str, ...]:
    """Every setting's variable name, in the model's order."""
    return tuple(name.upper() for name in Settings.model_fields)


def owned_prefixes() -> tuple[str, ...]:
    """``CHATOPS_``, ``SLACK_``, ...: the first word of every field that has more than one."""
    words = [name.split("_", 1)[0] for name in Settings.model_fields if "_" in name]
    return tuple(f"{word.upper()}_" for word in dict.fromkeys(words))


@dataclass(frozen=True)
class NameProblem:
    """One name found in ``source`` (the settings file's path, or ``ENVIRONMENT``)."""

    name: str
    source: str
    message: str
    fatal: bool

    def line(self) -> str:
        return f"{self.name} (in {self.source}): {self.message}"


# -- Kubernetes service links --------------------------------------------------------------------------
# For every Service in the namespace, the kubelet adds {NAME}_SERVICE_HOST, {NAME}_SERVICE_PORT[_{PORT}],
# {NAME}_PORT and {NAME}_PORT_{n}_{PROTO}[_PROTO|_PORT|_ADDR] to each container (enableServiceLinks).

_ADDRESS = r"(\d{1,3}(\.\d{1,3}){3}|[0-9a-fA-F:]*:[0-9a-fA-F:]*)"
_URL = rf"(tcp|udp|sctp)://({_ADDRESS}|\[[0-9a-fA-F:]+\]):\d+"
_LINK = r"[A-Z0-9_]+?"
_PORT_N = rf"{_LINK}_PORT_\d+_(TCP|UDP|SCTP)"
_SERVICE_LINKS: Final = tuple(
    (re.compile(f"^{name}$"), re.compile(f"^{value}$"))
    for name, value in (
        (rf"{_LINK}_SERVICE_HOST", _ADDRESS),
        (rf"{_LINK}_SERVICE_PORT(_[A-Z0-9_]+)?", r"\d+"),
        (rf"{_LINK}_PORT", _URL),
        (_PORT_N, _URL),
        (rf"{_PORT_N}_PROTO", r"(tcp|udp|sctp)"),
        (rf"{_PORT_N}_PORT", r"\d+"),
        (rf"{_PORT_N}_ADDR", _ADDRESS),
    )
)


def is_service_link(name: str, value: str) -> bool:
    """Kubernetes made this variable for a Service: its name *and* its value have the kubelet's form
    (``REDIS_PORT=6379`` someone wrote is no service link, and is reported like any unknown name)."""
    return any(n.match(name) and v.match(value) for n, v in _SERVICE_LINKS)


# -- near misses ---------------------------------------------------------------------------------------


def distance(a: str, b: str) -> int:
    """Edits (insert, delete, substitute, swap two neighbours) that turn ``a`` into ``b``."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], previous2[j - 2] + 1)
        previous2, previous = previous, row
    return previous[len(b)]


def closest(name: str, names: Collection[str]) -> tuple[str, int]:
    """The nearest of ``names`` and its distance (the first in order among equals)."""
    return min(((candidate, distance(name, candidate)) for candidate in names), key=lambda pair: pair[1])


def is_typo(name: str, edits: int) -> bool:
    """Likely a mistyped setting: at most 2 edits, and at most one per 8 characters (``LLM_MODLE``,
    ``CHATOPS_APROVERS``), so a different word that happens to share a prefix is not one."""
    return edits <= 2 and edits * 8 <= len(name)


# -- the review ----------------------------------------------------------------------------------------


def review_names(
    file_values: Mapping[str, str | None],
    file_source: str,
    environ: Mapping[str, str],
    also_known: Collection[str] = (),
) -> list[NameProblem]:
    """Every problem with the names in the settings file and the environment, errors first."""
    settings = setting_names()
    known = {*settings, *ELSEWHERE, *(name.upper() for name in also_known)}
    prefixes = owned_prefixes()
    problems: list[NameProblem] = []
    for source, values, in_file in ((file_source, file_values, True), (ENVIRONMENT, environ, False)):
        for raw, value in values.items():
            name = raw.upper()
            if name in known or not name.startswith(prefixes):
                continue
            problem = _unknown(name, value or "", source, settings, in_file=in_file)
            if problem is not None:
                problems.append(problem)
    problems += _renamed_twice(file_values, file_source, environ)
    return sorted(problems, key=lambda problem: not problem.fatal)


def _unknown(
    name: str, value: str, source: str, settings: Collection[str], *, in_file: bool
) -> NameProblem | None:
    if name in RENAMED:
        new, until = RENAMED[name]
        message = f"deprecated: renamed {new} (the old name works until chatops {until}); rename it"
        return NameProblem(name, source, message, fatal=False)
    if name in RETIRED:
        return NameProblem(name, source, f"{RETIRED[name]}; remove it", fatal=False)
    if not in_file and is_service_link(name, value):
        return None
    nearest, edits = closest(name, settings)
    if is_typo(name, edits):
        return NameProblem(name, source, f"unknown setting; did you mean {nearest}?", fatal=True)
    if not in_file:  # someone else's variable, or a setting too far from any to guess
        return NameProblem(name, source, "not a chatops setting: ignored", fatal=False)
    hint = f"; the closest is {nearest}" if edits * 3 <= len(name) else ""
    return NameProblem(name, source, f"unknown setting{hint} (.env.example lists every setting)", fatal=True)


def _renamed_twice(
    file_values: Mapping[str, str | None], file_source: str, environ: Mapping[str, str]
) -> list[NameProblem]:
    """An old and a new name both set: which one was meant cannot be guessed."""
    present = {name.upper() for name in [*file_values, *environ]}
    return [
        NameProblem(
            old,
            file_source if old in {n.upper() for n in file_values} else ENVIRONMENT,
            f"{new} is set too, and wins; remove {old}",
            fatal=True,
        )
        for old, (new, _) in RENAMED.items()
        if old in present and new in present
    ]
