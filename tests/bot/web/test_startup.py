"""``settle_garbage_collector``: start-up's objects frozen, later garbage still collected."""

from __future__ import annotations

import gc
import weakref

from bot.web.startup import settle_garbage_collector


class Node:
    def __init__(self) -> None:
        self.me: Node | None = None


def test_what_start_up_built_is_frozen_and_later_cyclic_garbage_is_still_collected() -> None:
    built_at_start = Node()
    built_at_start.me = built_at_start  # a cycle: only the cyclic collector could free it
    try:
        settle_garbage_collector()
        assert gc.get_freeze_count() > 0
        assert not any(o is built_at_start for o in gc.get_objects())  # out of every generation
        later = Node()
        later.me = later
        gone = weakref.ref(later)
        del later
        gc.collect()
        assert gone() is None  # a request's garbage is collected as before
    finally:
        gc.unfreeze()
