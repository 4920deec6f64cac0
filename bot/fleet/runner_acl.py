"""A runner's Redis user: its own target's queue, jobs, executions and heartbeat, and nothing else.

A compromised host holds its runner's Redis credentials, so they must not reach another target:
not its queue (reading it shows that host's calls; writing it commands that host), not its
execution marks or results. RQ names most of a queue's keys after the queue
(``rq:queue:Q``, ``rq:wip:Q``, ``rq:workers:Q``...), but a job's keys after the job's id
(``rq:job:ID``, ``rq:results:ID``, ``rq:executions:ID``) and a worker's after its name: the
dispatcher therefore chooses every job id, and the runner its worker name, to start with its queue
(``job_id_prefix``), so one glob per family covers exactly one target's keys. RQ allows only
letters, digits, ``_`` and ``-`` in a job id, so the queue name is spelled with every other
character as ``_`` and two hex digits (``chatops_2etarget_2eweb-03__...``): two ``_`` never
follow each other inside it, so ``...__`` ends one target's prefix and no other's.

``runner_acl_rules`` is the ACL (docs/OPERATIONS.md prints it with ``chatops runner --print-acl``);
``tests/bot/fleet/test_runner_acl.py`` checks it against a real Redis ACL user.
"""

from __future__ import annotations

import re
import uuid

from bot.keys import Keys

_PLAIN = re.compile(r"[a-z0-9-]")
_GLOB = re.compile(r"([*?\[\]\\])")


def target_queue_name(base: str, target: str) -> str:
    """The RQ queue of one target's runner: ``chatops.target.web-03``."""
    return f"{base}.target.{target}"


def _spelled(name: str) -> str:
    """``name`` in RQ's job-id alphabet, without ``__`` (which ends a prefix)."""
    return "".join(c if _PLAIN.fullmatch(c) else "".join(f"_{b:02x}" for b in c.encode()) for c in name)


def job_id_prefix(queue_name: str) -> str:
    """How every job id (and worker name) of one queue starts."""
    return f"{_spelled(queue_name)}__"


def new_job_id(queue_name: str) -> str:
    return f"{job_id_prefix(queue_name)}{uuid.uuid4().hex}"


def runner_worker_name(queue_name: str, name: str | None = None) -> str:
    """The runner's RQ worker name: its queue's prefix, then ``name`` (``--name``) or a random one."""
    return f"{job_id_prefix(queue_name)}{_spelled(name) if name else uuid.uuid4().hex}"


def _glob(text: str) -> str:
    return _GLOB.sub(r"\\\1", text)


def runner_acl_rules(keys: Keys, queue_base: str, target: str) -> list[str]:
    """The ``ACL SETUSER`` rules of ``target``'s runner (after ``reset`` and its password)."""
    queue = _glob(target_queue_name(queue_base, target))
    own = _glob(job_id_prefix(target_queue_name(queue_base, target)))
    return [
        "on",
        "resetkeys",
        f"~rq:queue:{queue}",  # its queue
        f"~rq:queue:{queue}:*",  # RQ's intermediate queue of it
        f"~rq:*:{queue}",  # its registries (wip, finished, failed...) and its set of workers
        f"~rq:*:{own}*",  # its jobs, their results and executions, its worker's record
        "%W~rq:workers",  # the set of all workers: it adds and removes itself, it reads no one's
        "%R~rq:suspended",  # ``rq suspend`` pauses it
        "%R~rq:rl-keys",  # RQ's rate-limited queues (chatops has none), which its maintenance reads
        f"~{_glob(keys.runner_heartbeat(target))}",
        f"~{_glob(keys.executions_of(target))}*",
        f"~{_glob(keys.changes(target))}",  # its change journal (its scans write it)
        "resetchannels",
        f"&rq:pubsub:{own}*",  # commands to its worker (``rq`` shutdown, kill-horse)
        "+@all",
        "-@dangerous",
        "-scan",  # key patterns do not filter SCAN: it would list every key name (run ids, targets)
        "-randomkey",
    ]


def runner_acl_command(keys: Keys, queue_base: str, target: str, user: str = "") -> str:
    """The one line an operator runs in ``redis-cli`` (with the password filled in)."""
    rules = " ".join(runner_acl_rules(keys, queue_base, target))
    return f"ACL SETUSER {user or 'chatops-runner-' + target} reset >RUNNER_PASSWORD {rules}"
