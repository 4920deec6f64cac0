"""The in-memory chatops loop against the hand-written loop, and its cProfile, for the tree in argv[1].

``python bench/notes/loop_profile.py TREE``: 21 runs at K=200 for the ratio, then 5 profiled runs
sorted by own time (what bench/notes/loop_profile.md shows for before and after issue 29).
"""

from __future__ import annotations

import cProfile
import io
import pstats
import re
import statistics
import sys
import time

TREE = sys.argv[1] if len(sys.argv) > 1 else "."
sys.path.insert(0, TREE)

from agent.memory import InMemoryMemory  # noqa: E402  (the tree named on the command line first)
from agent.run import Run  # noqa: E402
from agent.types import Message  # noqa: E402
from bench.loop_overhead import _chatops_config  # noqa: E402
from bench.peer_loops import hand_written  # noqa: E402


def in_memory(k: int) -> float:
    config = _chatops_config(k, InMemoryMemory([Message.user("check web-03")]))
    started = time.perf_counter()
    Run(config).execute()
    return time.perf_counter() - started


def main() -> None:
    floor = hand_written()
    for _ in range(3):
        in_memory(200), floor(200)
    ours = [in_memory(200) / 200 * 1e6 for _ in range(21)]
    theirs = [floor(200) / 200 * 1e6 for _ in range(21)]
    a, b = statistics.median(ours), statistics.median(theirs)
    print(
        f"median of 21 runs at K=200: chatops in-memory {a:.1f} us/iter, hand-written {b:.2f} us/iter, ratio {a / b:.1f}x"
    )
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(5):
        in_memory(200)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(25)
    text = out.getvalue()
    text = text[text.find("   ncalls") :]
    text = re.sub(r"\S*/lib/python3\.\d+/(site-packages/)?", "", text).replace(TREE.rstrip("/") + "/", "")
    calls = stats.total_calls  # type: ignore[attr-defined]
    print(f"{calls} function calls for 5 runs of K=200 ({calls / 1000:.0f} per iteration)")
    print(text)


if __name__ == "__main__":
    main()
