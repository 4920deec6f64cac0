"""``RunbookIndex``: the runbook folder, indexed at start and kept current without a restart.

Change detection is a stat scan (name, size, mtime of every ``*.md`` file), done on use at most
every ``rescan_seconds``: a scan of 1,000 files costs a few milliseconds, and only the files it
finds added or changed are read and parsed again (``bench/runbooks.py``). A worker builds the
index once at start; its forked work horses inherit it and rescan on use, so an edit is seen by
the next job after ``rescan_seconds``.

Bounded: at most ``MAX_FILES`` files, each at most ``MAX_FILE_BYTES``; symbolic links are not
followed (a link could name a file outside the folder), hidden directories (``.git``) skipped.
A file that cannot be read or whose front matter is malformed is a ``RunbookProblem`` (its id
and what is wrong), logged once per version and skipped; every other file stays indexed.

Ranking (``search``): a runbook naming the alert (``alerts``) first, then one whose ``labels``
matchers all match the given labels, then one naming the target, then full-text relevance
(BM25 over the words of the body, the title's words counted again), ties by id.
"""

from __future__ import annotations

import logging
import math
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tools.runbooks.document import Runbook, RunbookFormatError, parse_runbook, words

log = logging.getLogger(__name__)

MAX_FILES = 10_000
MAX_FILE_BYTES = 512 * 1024
RESCAN_SECONDS = 5.0
SUFFIXES = (".md", ".markdown")
_BM25_K1, _BM25_B = 1.2, 0.75
_LABEL_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)=("[^"]*"|[^\s,]+)')
_LINES_PER_HIT = 3
_LINE_CHARS = 160


@dataclass(frozen=True)
class RunbookProblem:
    id: str
    problem: str

    def __str__(self) -> str:
        return f"{self.id}: {self.problem}"


@dataclass(frozen=True)
class SearchHit:
    runbook: Runbook
    reasons: tuple[str, ...]
    """Why it ranks: ``alert HighDiskUsage``, ``labels service="api"``, ``target web-03``, ``text``."""
    score: tuple[int, int, int, float]
    lines: tuple[str, ...]
    """Its lines holding a query word (at most three, each shortened)."""


@dataclass(frozen=True)
class _Snapshot:
    runbooks: Mapping[str, Runbook] = field(default_factory=dict)
    problems: tuple[RunbookProblem, ...] = ()
    postings: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    lengths: Mapping[str, int] = field(default_factory=dict)
    average_length: float = 1.0


class RunbookIndex:
    """The runbooks of ``root``; ``refresh`` is called by every read, so reads are always current
    within ``rescan_seconds``. Safe to share between threads (a read sees one whole snapshot)."""

    def __init__(
        self,
        root: Path,
        *,
        rescan_seconds: float = RESCAN_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.root = root
        self._rescan_seconds = rescan_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._stats: dict[str, tuple[int, int]] = {}
        self._parsed: dict[str, Runbook | RunbookProblem] = {}
        self._snapshot = _Snapshot()
        self._scanned_at: float | None = None
        self.refresh(force=True)

    # -- reads -------------------------------------------------------------------------------------

    def get(self, runbook_id: str) -> Runbook | None:
        """The runbook whose id is exactly ``runbook_id``: a key lookup, never a path opened."""
        return self._current().runbooks.get(runbook_id)

    def ids(self) -> list[str]:
        return sorted(self._current().runbooks)

    def __len__(self) -> int:
        return len(self._current().runbooks)

    @property
    def problems(self) -> tuple[RunbookProblem, ...]:
        return self._current().problems

    def search(
        self,
        query: str = "",
        *,
        alertname: str = "",
        labels: Mapping[str, str] | None = None,
        target: str = "",
        limit: int = 5,
    ) -> list[SearchHit]:
        """The best ``limit`` runbooks for the query (``name=value`` pairs in it count as labels,
        a word equal to an alert name or target as those), best first; only runbooks with a reason."""
        snapshot = self._current()
        pairs = {name: value.strip('"') for name, value in _LABEL_PAIR.findall(query)}
        given = {**pairs, **(labels or {})}
        if alertname:
            given.setdefault("alertname", alertname)
        text = _LABEL_PAIR.sub(" ", query)
        terms = list(dict.fromkeys(words(text)))
        names = {term for term in terms} | ({alertname.lower()} if alertname else set())
        targets = {term for term in terms} | ({target.lower()} if target else set())
        relevance = _bm25(snapshot, terms)
        hits: list[SearchHit] = []
        for runbook in snapshot.runbooks.values():
            reasons: list[str] = []
            alert = next((a for a in runbook.alerts if a.lower() in names or a == given.get("alertname")), "")
            if alert:
                reasons.append(f"alert {alert}")
            labelled = bool(given) and runbook.matches_labels(given)
            if labelled:
                reasons.append("labels " + ", ".join(m.text() for m in runbook.matchers))
            named = next((t for t in runbook.targets if t.lower() in targets), "")
            if named:
                reasons.append(f"target {named}")
            text_score = relevance.get(runbook.id, 0.0)
            if text_score > 0:
                reasons.append("text")
            if not reasons:
                continue
            score = (int(bool(alert)), int(labelled), int(bool(named)), round(text_score, 6))
            hits.append(SearchHit(runbook, tuple(reasons), score, _matching_lines(runbook, set(terms))))
        hits.sort(key=lambda hit: (tuple(-part for part in hit.score), hit.runbook.id))
        return hits[: max(0, limit)]

    def best_for_alert(self, alertname: str, labels: Mapping[str, str], target: str = "") -> Runbook | None:
        """The runbook an alert's run is told about: one naming the alert or matching its labels
        (a target or text alone is not enough), the best ranked."""
        for hit in self.search(alertname=alertname, labels={**labels, "alertname": alertname}, target=target):
            if hit.score[0] or hit.score[1]:
                return hit.runbook
        return None

    # -- keeping it current ---------------------------------------------------------------------------

    def _current(self) -> _Snapshot:
        self.refresh()
        return self._snapshot

    def refresh(self, *, force: bool = False) -> bool:
        """Rescan the folder if ``rescan_seconds`` have passed (or ``force``); whether anything changed."""
        now = self._clock()
        if not force and self._scanned_at is not None and now - self._scanned_at < self._rescan_seconds:
            return False
        with self._lock:
            if not force and self._scanned_at is not None and now - self._scanned_at < self._rescan_seconds:
                return False  # another thread scanned while this one waited
            stats, too_many = self._scan()
            changed = stats != self._stats or too_many
            if changed or force:
                self._rebuild(stats, too_many)
            self._scanned_at = self._clock()
            return changed

    def _scan(self) -> tuple[dict[str, tuple[int, int]], bool]:
        stats: dict[str, tuple[int, int]] = {}
        root = str(self.root)
        for directory, subdirs, files in os.walk(root, followlinks=False):  # errors: skipped
            subdirs[:] = sorted(name for name in subdirs if not name.startswith("."))
            for name in sorted(files):
                if not name.lower().endswith(SUFFIXES) or name.startswith("."):
                    continue
                path = os.path.join(directory, name)
                try:
                    info = os.lstat(path)
                except OSError:
                    continue
                if not stat.S_ISREG(info.st_mode):  # a symbolic link, a FIFO: never opened
                    continue
                if len(stats) >= MAX_FILES:
                    return stats, True
                stats[Path(os.path.relpath(path, root)).as_posix()] = (info.st_mtime_ns, info.st_size)
        return stats, False

    def _rebuild(self, stats: dict[str, tuple[int, int]], too_many: bool) -> None:
        parsed: dict[str, Runbook | RunbookProblem] = {}
        for runbook_id, version in stats.items():
            known = self._parsed.get(runbook_id)
            if known is not None and self._stats.get(runbook_id) == version:
                parsed[runbook_id] = known
                continue
            parsed[runbook_id] = self._load(runbook_id, version[1])
            if isinstance(parsed[runbook_id], RunbookProblem):
                log.warning("runbook %s", parsed[runbook_id])
        self._stats, self._parsed = stats, parsed
        runbooks = {key: value for key, value in parsed.items() if isinstance(value, Runbook)}
        problems = [value for value in parsed.values() if isinstance(value, RunbookProblem)]
        if too_many:
            problems.append(RunbookProblem(".", f"more than {MAX_FILES} files: the rest are not indexed"))
        self._snapshot = _build_snapshot(runbooks, tuple(problems))

    def _load(self, runbook_id: str, size: int) -> Runbook | RunbookProblem:
        if size > MAX_FILE_BYTES:
            return RunbookProblem(runbook_id, f"larger than {MAX_FILE_BYTES // 1024} KiB: not indexed")
        path = self.root / runbook_id
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
            with os.fdopen(fd, "rb") as handle:
                if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                    return RunbookProblem(runbook_id, "not a regular file")
                text = handle.read(MAX_FILE_BYTES + 1).decode("utf-8")
        except OSError as exc:
            return RunbookProblem(runbook_id, f"cannot be read: {exc.strerror or exc}")
        except UnicodeDecodeError as exc:
            return RunbookProblem(runbook_id, f"not UTF-8 text (byte {exc.start})")
        try:
            return parse_runbook(runbook_id, text, default_title=Path(runbook_id).stem)
        except RunbookFormatError as exc:
            return RunbookProblem(runbook_id, f"{exc}; not indexed until fixed")


def _build_snapshot(runbooks: dict[str, Runbook], problems: tuple[RunbookProblem, ...]) -> _Snapshot:
    postings: dict[str, list[str]] = {}
    lengths: dict[str, int] = {}
    for runbook_id, runbook in runbooks.items():
        lengths[runbook_id] = sum(runbook.terms.values())
        for term in runbook.terms:
            postings.setdefault(term, []).append(runbook_id)
    average = (sum(lengths.values()) / len(lengths)) if lengths else 1.0
    return _Snapshot(
        runbooks,
        problems,
        {term: tuple(ids) for term, ids in postings.items()},
        lengths,
        max(average, 1.0),
    )


def _bm25(snapshot: _Snapshot, terms: list[str]) -> dict[str, float]:
    scores: dict[str, float] = {}
    total = len(snapshot.runbooks)
    for term in terms:
        ids = snapshot.postings.get(term, ())
        if not ids:
            continue
        idf = math.log(1 + (total - len(ids) + 0.5) / (len(ids) + 0.5))
        for runbook_id in ids:
            runbook = snapshot.runbooks[runbook_id]
            tf = runbook.terms[term]
            norm = 1 - _BM25_B + _BM25_B * snapshot.lengths[runbook_id] / snapshot.average_length
            boost = 1.0 if term in runbook.title_terms else 0.0
            scores[runbook_id] = scores.get(runbook_id, 0.0) + idf * (
                tf * (_BM25_K1 + 1) / (tf + _BM25_K1 * norm) + boost
            )
    return scores


def _matching_lines(runbook: Runbook, terms: set[str]) -> tuple[str, ...]:
    if not terms:
        return ()
    found: list[str] = []
    for line in runbook.lines:
        if terms & set(words(line)):
            text = " ".join(line.split())
            found.append(text if len(text) <= _LINE_CHARS else text[: _LINE_CHARS - 3] + "...")
            if len(found) >= _LINES_PER_HIT:
                break
    return tuple(found)
