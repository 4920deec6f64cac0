"""Runbooks (issue 32): what indexing a runbook folder and searching it cost.

A folder of ``FILES`` generated runbooks (front matter naming an alert and labels, six sections,
about 4 KB of text each, in ten sub-folders) is indexed from cold (``RunbookIndex``: walk, read,
parse the front matter and headings, count words, build the postings), ``REPEATS`` times; then the
stat scan every read makes once ``rescan_seconds`` have passed is timed with nothing changed, and
with one file changed (read and parsed again, postings rebuilt). Searches mix alert names, label
pairs and free text (``SEARCHES`` of them, seeded), timed one by one.

Targets: 1,000 runbooks indexed in at most 2 s; a search's p99 at most 20 ms; an unchanged rescan
at most 50 ms (it runs on use at most every 5 s).
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.common import OPS_WORDS, Result, median, parse_options, percentile, settle
from tools.runbooks import RunbookIndex

NAME = "runbooks"
FILES, QUICK_FILES = 1000, 50
REPEATS, QUICK_REPEATS = 5, 1
SEARCHES, QUICK_SEARCHES = 1000, 20
TARGET_INDEX_S = 2.0
TARGET_SEARCH_P99_MS = 20.0
TARGET_RESCAN_MS = 50.0
WORDS = OPS_WORDS
SERVICES = ("api", "web", "db", "cache", "queue", "auth", "search", "billing")


def alert_name(number: int) -> str:
    return f"Alert{number:04d}"


def runbook_text(number: int, rng: random.Random) -> str:
    service = SERVICES[number % len(SERVICES)]
    sections = []
    for heading in ("Summary", "Impact", "Diagnosis", "Mitigation", "Escalation", "References"):
        lines = [" ".join(rng.choices(WORDS, k=12)) for _ in range(5)]
        sections.append(f"## {heading}\n" + "\n".join(lines))
    front = (
        f"---\ntitle: Runbook {number}\nalerts: [{alert_name(number)}]\nlabels: {{service: {service}}}\n---\n"
    )
    return front + f"# Runbook {number}\n\n" + "\n\n".join(sections) + "\n"


def write_folder(root: Path, files: int) -> None:
    rng = random.Random(32)
    for number in range(files):
        folder = root / f"team{number % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"runbook-{number:04d}.md").write_text(runbook_text(number, rng))


def queries(count: int, files: int) -> list[str]:
    rng = random.Random(7)
    made = []
    for number in range(count):
        kind = number % 3
        if kind == 0:
            made.append(alert_name(rng.randrange(files)))
        elif kind == 1:
            made.append(f"service={rng.choice(SERVICES)} " + " ".join(rng.choices(WORDS, k=2)))
        else:
            made.append(" ".join(rng.choices(WORDS, k=3)))
    return made


def main(argv: Sequence[str] | None = None) -> int:
    options, _ = parse_options(__doc__ or NAME, argv)
    files = QUICK_FILES if options.quick else FILES
    repeats = QUICK_REPEATS if options.quick else REPEATS
    searches = QUICK_SEARCHES if options.quick else SEARCHES
    load = settle(options.settle)
    result = Result(NAME, "Runbooks: indexing and search", options.quick, load)
    root = Path(tempfile.mkdtemp(prefix="bench-runbooks-"))
    try:
        write_folder(root, files)
        index_s = []
        for _ in range(repeats):
            started = time.perf_counter()
            index = RunbookIndex(root)
            index_s.append(time.perf_counter() - started)
        assert len(index) == files and not index.problems, index.problems
        unchanged_ms = []
        for _ in range(repeats * 4):
            started = time.perf_counter()
            changed = index.refresh(force=True)
            unchanged_ms.append((time.perf_counter() - started) * 1000)
            assert not changed
        edited = root / "team0" / "runbook-0000.md"
        changed_ms = []
        for turn in range(repeats):
            edited.write_text(runbook_text(0, random.Random(turn)) + f"\nedit {turn}\n")
            os.utime(edited, ns=(turn + 1, turn + 1))
            started = time.perf_counter()
            assert index.refresh(force=True)
            changed_ms.append((time.perf_counter() - started) * 1000)
        search_ms = []
        for query in queries(searches, files):
            started = time.perf_counter()
            hits = index.search(query)
            search_ms.append((time.perf_counter() - started) * 1000)
            assert hits, query
        _report(result, files, index_s, unchanged_ms, changed_ms, search_ms)
        result.data = {
            "files": files,
            "index_s": index_s,
            "rescan_unchanged_ms": unchanged_ms,
            "rescan_one_changed_ms": changed_ms,
            "search_ms_p50": percentile(search_ms, 50),
            "search_ms_p99": percentile(search_ms, 99),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result.save(options)
    return 0


def _report(
    result: Result,
    files: int,
    index_s: list[float],
    unchanged_ms: list[float],
    changed_ms: list[float],
    search_ms: list[float],
) -> None:
    result.add_table(
        f"{files} runbooks (about 4 KB each, front matter with an alert and labels); medians of the repeats",
        ["step", "time", "unit"],
        [
            ["index from cold", median(index_s) * 1000, "ms"],
            ["rescan, nothing changed (stat scan)", median(unchanged_ms), "ms"],
            ["rescan, one file changed", median(changed_ms), "ms"],
            [f"search p50 ({len(search_ms)} queries)", percentile(search_ms, 50), "ms"],
            ["search p99", percentile(search_ms, 99), "ms"],
        ],
    )
    result.target(
        f"index {FILES} runbooks <= {TARGET_INDEX_S:g} s",
        f"{median(index_s):.2f} s for {files}",
        median(index_s) <= TARGET_INDEX_S,
    )
    p99 = percentile(search_ms, 99)
    result.target(f"search p99 <= {TARGET_SEARCH_P99_MS:g} ms", f"{p99:.2f} ms", p99 <= TARGET_SEARCH_P99_MS)
    rescan = median(unchanged_ms)
    result.target(
        f"unchanged rescan <= {TARGET_RESCAN_MS:g} ms", f"{rescan:.1f} ms", rescan <= TARGET_RESCAN_MS
    )


if __name__ == "__main__":
    raise SystemExit(main())
