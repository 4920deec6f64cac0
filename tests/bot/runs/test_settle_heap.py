"""``settle_heap``: what is alive when the worker starts is frozen out of the collector's walks,
and garbage of that moment is collected first, not frozen."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap


def test_the_objects_alive_at_start_are_frozen_and_garbage_is_not() -> None:
    # In a child: freezing is for the whole process, and a test must not change the suite's heap.
    program = textwrap.dedent(
        """
        import gc, weakref
        from bot.runs.worker import settle_heap

        class Node:
            pass

        garbage = Node(); garbage.me = garbage  # a cycle only the collector frees
        freed = weakref.ref(garbage)
        del garbage
        kept = Node()
        frozen = settle_heap()
        assert freed() is None, "garbage was frozen instead of collected"
        assert frozen == gc.get_freeze_count() > 10_000, frozen  # the imported modules' objects
        print(frozen)
        """
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 10_000
    assert gc.get_freeze_count() == 0  # this process's heap untouched
