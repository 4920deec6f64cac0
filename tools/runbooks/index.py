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

import heapq
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

from tools.errors import RunbookFormatError
from tools.runbooks.document import Runbook, parse_runbook, words

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
    postings: Mapping[str, tuple[tuple[str, float, float], ...]] = field(default_factory=dict)
    """word -> (id, BM25's term weight of the word in it, its title bonus) for each runbook with it."""
    alerts: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # lower-cased alert name -> ids
    targets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # lower-cased target -> ids
    labelled: tuple[Runbook, ...] = ()  # the runbooks with label matchers


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
        terms = list(dict.fromkeys(words(_LABEL_PAIR.sub(" ", query))))
        names = {*terms, alertname.lower(), given.get("alertname", "").lower()} - {""}
        by_alert = {rid: name for name in names for rid in snapshot.alerts.get(name, ())}
        by_target = {
            rid: name for name in {*terms, target.lower()} - {""} for rid in snapshot.targets.get(name, ())
        }
        labelled = {rb.id for rb in snapshot.labelled if rb.matches_labels(given)} if given else set()
        relevance = _bm25(snapshot, terms)

        def rank(rid: str) -> tuple[int, int, int, float, str]:
            return (
                -(rid in by_alert),
                -(rid in labelled),
                -(rid in by_target),
                -relevance.get(rid, 0.0),
                rid,
            )

        candidates = by_alert.keys() | labelled | by_target.keys() | relevance.keys()
        wanted = set(terms)
        hits = []
        for rid in heapq.nsmallest(max(0, limit), candidates, key=rank):
            runbook = snapshot.runbooks[rid]
            reasons = [f"alert {a}" for a in runbook.alerts if a.lower() in names][:1]
            if rid in labelled:
                reasons.append("labels " + ", ".join(m.text() for m in runbook.matchers))
            reasons += [f"target {t}" for t in runbook.targets if t.lower() == by_target.get(rid)][:1]
            if relevance.get(rid, 0.0) > 0:
                reasons.append("text")
            score = (
                int(rid in by_alert),
                int(rid in labelled),
                int(rid in by_target),
                round(relevance.get(rid, 0.0), 6),
            )
            hits.append(SearchHit(runbook, tuple(reasons), score, _matching_lines(runbook, wanted)))
        return hits

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
            if changed or self._scanned_at is None:  # the first scan builds even an empty index
                self._rebuild(stats, too_many)
            self._scanned_at = self._clock()
            return changed

    def _scan(self) -> tuple[dict[str, tuple[int, int]], bool]:
        """Every runbook file's (mtime, size) by id: ``scandir`` without following links (its
        entries know their type, so only the Markdown files are stat'ed)."""
        stats: dict[str, tuple[int, int]] = {}
        pending = [(str(self.root), "")]
        while pending:
            directory, prefix = pending.pop()
            try:
                entries = list(os.scandir(directory))
            except OSError:
                continue  # unreadable or gone: its runbooks are not served until it is back
            for entry in entries:
                name = entry.name
                if name.startswith("."):
                    continue
                try:
                    if entry.is_dir(follow_symlinks=False):
                        pending.append((entry.path, f"{prefix}{name}/"))
                        continue
                    # A symbolic link, a FIFO: never opened.
                    if not name.lower().endswith(SUFFIXES) or not entry.is_file(follow_symlinks=False):
                        continue
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if len(stats) >= MAX_FILES:
                    return stats, True
                stats[prefix + name] = (info.st_mtime_ns, info.st_size)
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
    """The postings with each word's BM25 weight in each runbook computed once, here: a search
    then only sums them (times the word's idf) over the runbooks that have its words."""
    lengths = {rid: sum(runbook.terms.values()) for rid, runbook in runbooks.items()}
    average = max((sum(lengths.values()) / len(lengths)) if lengths else 1.0, 1.0)
    postings: dict[str, list[tuple[str, float, float]]] = {}
    alerts: dict[str, list[str]] = {}
    targets: dict[str, list[str]] = {}
    for rid, runbook in runbooks.items():
        norm = 1 - _BM25_B + _BM25_B * lengths[rid] / average
        for term, tf in runbook.terms.items():
            weight = tf * (_BM25_K1 + 1) / (tf + _BM25_K1 * norm)
            postings.setdefault(term, []).append((rid, weight, 1.0 if term in runbook.title_terms else 0.0))
        for name in runbook.alerts:
            alerts.setdefault(name.lower(), []).append(rid)
        for name in runbook.targets:
            targets.setdefault(name.lower(), []).append(rid)
    return _Snapshot(
        runbooks,
        problems,
        {term: tuple(entries) for term, entries in postings.items()},
        {name: tuple(ids) for name, ids in alerts.items()},
        {name: tuple(ids) for name, ids in targets.items()},
        tuple(runbook for runbook in runbooks.values() if runbook.matchers),
    )


def _bm25(snapshot: _Snapshot, terms: list[str]) -> dict[str, float]:
    scores: dict[str, float] = {}
    total = len(snapshot.runbooks)
    for term in terms:
        entries = snapshot.postings.get(term, ())
        if not entries:
            continue
        idf = math.log(1 + (total - len(entries) + 0.5) / (len(entries) + 0.5))
        for rid, weight, bonus in entries:
            scores[rid] = scores.get(rid, 0.0) + idf * (weight + bonus)
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
