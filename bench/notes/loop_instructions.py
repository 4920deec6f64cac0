"""Instructions per iteration of the in-memory chatops loop, of its scripted model and of the
hand-written loop, for the tree in argv[1], counted by valgrind's callgrind.

``python bench/notes/loop_instructions.py TREE``. A shared VM's speed drifts 2-4x within minutes and
other processes evict the caches; the number of instructions an iteration executes does not
change with either, so it compares two trees where timings cannot. Each figure is the count of
5 runs at K=200 minus the count of 1 run, per iteration: instrumentation starts after a warm-up
run (``callgrind_control -i on``), with the cyclic garbage collector off so that a collection does
not land in one of the two counts only (bench/notes/loop_profile.md says what it costs). Needs
``valgrind``; about a minute per figure.
"""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
import time

K = 200
RUNS = 5


def child(tree: str, which: str, runs: int) -> None:
    """Under callgrind: warm up, switch instrumentation on, run ``runs`` times."""
    sys.path.insert(0, tree)
    from agent.memory import InMemoryMemory
    from agent.run import Run
    from agent.types import Message, Request
    from bench.loop_overhead import ScriptedModel, _chatops_config
    from bench.peer_loops import hand_written

    floor = hand_written()
    request = Request(model="scripted", messages=[])

    def model_alone() -> None:
        model = ScriptedModel(K)
        for _ in range(K):
            model.complete(request)

    runners = {
        "loop": lambda: Run(_chatops_config(K, InMemoryMemory([Message.user("check web-03")]))).execute(),
        "model": model_alone,
        "floor": lambda: floor(K),
    }
    run = runners[which]
    run()
    gc.collect()
    gc.disable()
    subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], capture_output=True, check=False)
    time.sleep(0.5)  # callgrind polls for the command
    for _ in range(runs):
        run()


def count(tree: str, which: str, runs: int) -> int:
    command = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        __file__,
        "--child",
        tree,
        which,
        str(runs),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    assert found is not None, done.stderr[-2000:]
    return int(found.group(1).replace(",", ""))


def main() -> None:
    if sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    tree = sys.argv[1]
    figures = {}
    for which in ("loop", "model", "floor"):
        figures[which] = (count(tree, which, RUNS) - count(tree, which, 1)) / ((RUNS - 1) * K)
    loop, model, floor = figures["loop"], figures["model"], figures["floor"]
    print(
        f"instructions per iteration at K={K}: chatops in-memory {loop:,.0f} (its scripted model "
        f"{model:,.0f}, the runtime {loop - model:,.0f}), hand-written loop {floor:,.0f}; "
        f"ratio {loop / floor:.1f}x"
    )


if __name__ == "__main__":
    main()
