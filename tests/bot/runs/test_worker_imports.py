"""A worker imports the functions it runs before it forks: a work horse forked from a worker that had
not imported them imported them again for every job (eleven modules, 22 ms of CPU a job)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.worker_process import ROOT

# In a fresh interpreter: which job modules are missing before the worker is built, and after.
SCRIPT = """
import json, sys
import redis
from bot.runs.queueing import WORKER_FUNCTIONS
from bot.runs.worker import ChatopsWorker

modules = {name.rsplit(".", 1)[0] for name in WORKER_FUNCTIONS}
before = sorted(modules - set(sys.modules))
def no_runtime():
    raise AssertionError("no job runs here")
ChatopsWorker(["imports"], connection=redis.Redis.from_url(sys.argv[1]), runtime_factory=no_runtime)
print(json.dumps({"before": before, "after": sorted(modules - set(sys.modules))}))
"""


def test_a_worker_has_imported_every_job_function_before_it_forks_a_work_horse(redis_url: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, redis_url], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    missing = json.loads(done.stdout.splitlines()[-1])
    assert missing["before"], "the job modules were imported already: this test would prove nothing"
    assert missing["after"] == [], f"a work horse would import {missing['after']} for every job"
