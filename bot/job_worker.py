"""The one kind of RQ worker chatops runs: allow-listed jobs, each with its context bound around it.

Workers (``bot.runs.worker``: a job's ``Runtime``) and runners (``bot.fleet.runner``: the
runner's context) both run jobs that another process wrote into Redis, and a process that can
write RQ's keys (a runner's Redis user, say) must not choose what runs:

* jobs are read as JSON, never pickle (a forged pickle would run code while it is loaded, before
  any check);
* a job's function is imported only when its import path is on the job class's allow-list
  (``AllowListedJob.functions``); any other name is refused with ``RefusedJobError`` before
  anything is imported;
* what a job needs is bound by the worker's ``bind`` around each job, in the process that runs it
  (a forking worker's work horse, after the fork), and unbound when the job ends;
* the allowed functions are imported by the worker when it is built, before it forks anything: a
  work horse forked from a worker that had not imported them imported them again for every job
  (the run job's eleven modules: 22 ms of CPU a job, a third of a run's in the burst benchmark),
  and a name on the list that does not import stops the worker at start instead of failing jobs.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, ClassVar

from rq.executions import Execution
from rq.job import Job
from rq.queue import Queue
from rq.serializers import JSONSerializer
from rq.utils import import_attribute
from rq.worker.base import BaseWorker

from bot.errors import RefusedJobError

Bind = Callable[[], AbstractContextManager[object]]  # one job's context, entered around it


class AllowListedJob(Job):
    """A job that calls only the functions its class allows; a subclass names them."""

    functions: ClassVar[frozenset[str]] = frozenset()  # import paths, as RQ stores them with a job
    refusal: ClassVar[str] = "this worker runs no jobs"  # what a refusal says, before the name

    @property
    def func(self) -> Any:
        name = self.func_name
        if name not in self.functions:
            raise RefusedJobError(f"{self.refusal}, not {name!r}")
        # By its path only: RQ's ``instance`` (a method's object) never chooses what is called.
        return import_attribute(name)


class AllowListedWorker(BaseWorker):
    """RQ's worker with ``job_class``'s allow-list, JSON jobs and ``bind()`` around every job.

    A mix-in: combined with RQ's ``Worker`` (a work horse forked per job) or ``SimpleWorker``
    (jobs in the worker's own process)."""

    def __init__(self, *args: Any, job_class: type[AllowListedJob], bind: Bind, **kwargs: Any) -> None:
        kwargs.update(job_class=job_class, serializer=JSONSerializer)
        super().__init__(*args, **kwargs)
        self.bind = bind
        for name in sorted(job_class.functions):  # in this process, once (the module docstring)
            import_attribute(name)

    def perform_job(self, job: Job, queue: Queue, execution: Execution) -> bool:
        with self.bind():
            return super().perform_job(job, queue, execution)
