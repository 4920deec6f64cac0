"""What ``chatops web`` does once its app is built, before its first request.

``settle_garbage_collector``: everything built at start (the modules, the app, its clients: about
100,000 objects in ``chatops web``) is moved out of the cyclic garbage collector's reach with
``gc.freeze()``. Left in, those objects are traversed by every full collection, which holds the GIL
throughout: 22 ms on an idle 2-core VM, several times that with the CPU contended, and every
acknowledgement in flight waits for it (the burst benchmark's ack p99 went from 43-63 ms to 11-13 ms;
bench/notes/burst.md). The first full collections come early, while a burst's first mentions are
being acknowledged. (Tried in the forking worker too, before its first fork: its CPU per run did not
change measurably, 54 ms against 55-57 ms, so it is not done there.)

Objects frozen are never collected: only what is built once at start is, never per request or job.
"""

from __future__ import annotations

import gc


def settle_garbage_collector() -> None:
    """Collect what start-up left as garbage, then freeze the rest (``gc.freeze``)."""
    gc.collect()
    gc.freeze()
