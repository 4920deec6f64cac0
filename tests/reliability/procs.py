"""Entry point of the suite's worker subprocesses: ``python -m tests.reliability.procs``.

The same as ``chatops worker`` (``bot.ops.worker.run_worker``: a forking RQ worker with its
scheduler, the recovery sweep and the runtime named by ``CHATOPS_RUNTIME``), with settings from
the environment only, so the suite does not depend on the CLI's other subcommands.
"""

from __future__ import annotations

import logging
import sys

from bot.ops.worker import run_worker
from bot.settings import Settings


def main() -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"
    )
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    run_worker(settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
