"""The steps of a run segment's report (the card's final state, the audit entry, the answer, a
stop notice, ...), run in order, each until it is done once.

A step that raised is not done: the run stays in ``runs:reporting`` and the recovery sweep has a
job report again, which skips the steps already done (``bot.runs.jobs`` keeps them in the run hash).
Three kinds of failure:

* ``NotDelivered`` (the card's final state did not get through in time): the next steps go on
  (the answer matters more than its order after the card); this one is tried again later;
* ``Undeliverable`` (Slack refused it for good): logged and counted as done, since trying again
  cannot help (the audit log keeps the run's output);
* anything else (Slack kept failing, Redis, a bug): the report stops there, so what follows
  (a notice after the answer) keeps its order when it is tried again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from bot.runs.presenter import NotDelivered, Undeliverable

log = logging.getLogger(__name__)

Step = tuple[str, Callable[[], object]]


def run_steps(run_id: str, steps: Sequence[Step], done: list[str], mark: Callable[[list[str]], None]) -> bool:
    """Run the steps whose name is not in ``done``; ``mark(done)`` after each. True: all are done."""
    complete = True
    for name, step in steps:
        if name in done:
            continue
        try:
            step()
        except NotDelivered as error:
            log.warning("run %s: %s; the report tries again later", run_id, error)
            complete = False
            continue
        except Undeliverable as error:
            log.error("run %s: the %s step cannot be shown in the thread: %s", run_id, name, error)
        except Exception:
            log.exception("run %s: the report's %s step failed; it is tried again later", run_id, name)
            return False
        done.append(name)
        mark(done)
    return complete
