import tempfile

import psutil
import redis

from emulator.embedded_redis import ensure_redis, redis_answers


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
    assert not psutil.pid_exists(pid)  # stop() returns only once the server process is gone


def test_uses_the_given_url_when_it_answers(redis_url: str) -> None:
    assert redis_answers(redis_url)
    server = ensure_redis(redis_url)
    assert server.url == redis_url and server.embedded is None
