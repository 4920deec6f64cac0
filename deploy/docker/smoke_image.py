"""Smoke-test a built chatops image without starting a container (`make image`).

Where containers cannot be started, the image's filesystem is mounted read-only (``podman image
mount``) and its processes run in it with ``chroot`` as the image's user, with what a container
runtime would provide (``/proc``, ``/dev``, a tmpfs on ``/tmp``) and nothing else writable: the
read-only mount is what ``readOnlyRootFilesystem`` / ``read_only: true`` give in production.

Checked, each printed as one PASS line (the first failure stops with FAIL and exit 1):

* the image's config: non-root ``User``, ``chatops`` as entrypoint, ``web`` by default, a HEALTHCHECK;
* the filesystem: the user has no shell, no compiler, no pip, no apt lists, the manifest is in /app;
* ``chatops --help`` and every process's ``--help`` run as the image's user;
* ``chatops web`` starts, ``GET /healthz`` answers 200, the image's healthcheck says healthy, a
  forged Slack request is refused with 401;
* ``chatops worker`` starts and registers with RQ on its queue;
* SIGTERM stops both, with exit status 0.

It needs root (mounts), podman, and a Redis at ``REDIS_URL`` (default 127.0.0.1:6379); it uses a
key prefix and queue of its own there. Usage: ``python deploy/docker/smoke_image.py IMAGE``.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import redis

USER = "10001:10001"
COMPILERS = ("gcc", "cc", "c++", "g++", "clang", "make", "ld", "as")
CHATOPS = "/opt/chatops/bin/chatops"


class SmokeFailure(Exception):
    pass


def passed(what: str) -> None:
    print(f"PASS  {what}", flush=True)


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, check=check, capture_output=True, text=True)


def wait_for(what: str, predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise SmokeFailure(f"{what}: not within {timeout:.0f} s")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def mounted(image: str) -> Iterator[Path]:
    """The image's root, read-only, with /proc, /dev and a tmpfs /tmp mounted in it."""
    root = Path(run("podman", "image", "mount", image).stdout.strip())
    mounts: list[Path] = []
    try:
        for argv, where in (
            (["-t", "proc", "proc"], root / "proc"),
            (["--bind", "/dev"], root / "dev"),
            (["-t", "tmpfs", "-o", "size=64m,mode=1777", "tmpfs"], root / "tmp"),
        ):
            run("mount", *argv, str(where))
            mounts.append(where)
        yield root
    finally:
        for where in reversed(mounts):
            run("umount", "--lazy", str(where), check=False)
        run("podman", "image", "unmount", image, check=False)


def in_image(root: Path, env: dict[str, str], *argv: str) -> list[str]:
    base = {"PATH": "/opt/chatops/bin:/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}
    assignments = [f"{name}={value}" for name, value in {**base, **env}.items()]
    return ["chroot", f"--userspec={USER}", str(root), "/usr/bin/env", "-i", *assignments, *argv]


def check_config(image: str) -> None:
    (info,) = json.loads(run("podman", "image", "inspect", image).stdout)
    config = info.get("Config", {})
    if config.get("User") != USER:
        raise SmokeFailure(f"image user is {config.get('User')!r}, not {USER}")
    if config.get("Entrypoint") != ["chatops"] or config.get("Cmd") != ["web"]:
        raise SmokeFailure(f"entrypoint {config.get('Entrypoint')} cmd {config.get('Cmd')}")
    health = info.get("Healthcheck") or config.get("Healthcheck") or {}
    if health.get("Test") != ["CMD", "chatops-healthcheck"]:
        raise SmokeFailure(f"no HEALTHCHECK (build with --format docker): {health}")
    secretish = [
        e for e in config.get("Env", []) if any(w in e.split("=")[0] for w in ("TOKEN", "SECRET", "KEY"))
    ]
    if secretish:
        raise SmokeFailure(f"secrets baked into the image's environment: {secretish}")
    passed(
        f"config: user {USER}, entrypoint chatops, cmd web, HEALTHCHECK chatops-healthcheck, no secrets in Env"
    )


def check_filesystem(root: Path) -> None:
    passwd = (root / "etc/passwd").read_text()
    entry = next((line for line in passwd.splitlines() if line.startswith("chatops:")), "")
    fields = entry.split(":")
    if len(fields) < 7 or fields[2:4] != ["10001", "10001"] or not fields[6].endswith("nologin"):
        raise SmokeFailure(f"/etc/passwd has no non-login chatops user 10001: {entry!r}")
    path_dirs = ["usr/bin", "usr/local/bin", "bin", "usr/sbin", "sbin", "opt/chatops/bin"]
    found = [f"/{d}/{c}" for d in path_dirs for c in COMPILERS if (root / d / c).exists()]
    found += [f"/{d}/{p}" for d in path_dirs for p in ("pip", "pip3") if (root / d / p).exists()]
    if found:
        raise SmokeFailure(f"build tools in the final image: {found}")
    site = next((root / "opt/chatops/lib").glob("python3.*/site-packages"))
    if (site / "pip").exists():
        raise SmokeFailure("pip is installed in the venv")
    lists = [
        p.name
        for p in (root / "var/lib/apt/lists").glob("*")
        if p.name not in ("lock", "partial", "auxfiles")
    ]
    if lists:
        raise SmokeFailure(f"apt lists left in the image: {lists[:3]}")
    if not (root / "app/manifest.json").is_file():
        raise SmokeFailure("/app/manifest.json is missing (chatops doctor compares scopes with it)")
    probe = root / "smoke-write-probe"
    try:
        probe.touch()
    except OSError:
        pass
    else:
        probe.unlink()
        raise SmokeFailure("the mounted image is writable: the read-only checks below would mean nothing")
    passed(
        "filesystem: chatops user 10001 with nologin, no compiler, no pip, no apt lists, /app/manifest.json, root read-only"
    )


def check_help(root: Path) -> None:
    for argv in ([CHATOPS, "--help"], *([CHATOPS, name, "--help"] for name in ("web", "worker", "runner"))):
        done = subprocess.run(in_image(root, {}, *argv), capture_output=True, text=True, timeout=60)
        if done.returncode != 0 or "usage: chatops" not in done.stdout:
            raise SmokeFailure(f"{' '.join(argv)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    passed("chatops --help, web --help, worker --help, runner --help as user 10001")


def get(
    port: int, path: str, method: str = "GET", body: bytes = b"", headers: dict[str, str] | None = None
) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=3)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        status: int = connection.getresponse().status
        return status
    except OSError:
        return 0
    finally:
        connection.close()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _kill_if_running(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()


def stop(process: subprocess.Popen[bytes], name: str, log: Path) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        status = process.wait(timeout=40)
    except subprocess.TimeoutExpired:
        process.kill()
        raise SmokeFailure(f"{name} did not stop within 40 s of SIGTERM") from None
    if status != 0:
        raise SmokeFailure(f"{name} exited {status} after SIGTERM\n{log.read_text()[-3000:]}")


def check_processes(root: Path, redis_url: str, workdir: Path) -> None:
    tag = secrets.token_hex(4)
    port = free_port()
    env = {
        "REDIS_URL": redis_url,
        "CHATOPS_REDIS_PREFIX": f"imagesmoke{tag}:",
        "CHATOPS_QUEUE": f"imagesmoke{tag}",
        "SLACK_BOT_TOKEN": "xoxb-image-smoke",
        "SLACK_SIGNING_SECRET": secrets.token_hex(16),
        "SLACK_API_URL": "http://127.0.0.1:9/api/",  # nothing leaves the machine
        "LLM_BASE_URL": "http://127.0.0.1:9/v1",
        "PORT": str(port),
        "WEB_WORKERS": "1",
        "CHATOPS_LOG_FORMAT": "json",
    }
    client = redis.Redis.from_url(redis_url)
    client.ping()
    web_log, worker_log = workdir / "web.log", workdir / "worker.log"
    with ExitStack() as stack:
        web_out = stack.enter_context(web_log.open("wb"))
        web = subprocess.Popen(in_image(root, env, CHATOPS, "web"), stdout=web_out, stderr=subprocess.STDOUT)
        stack.callback(_kill_if_running, web)
        wait_for(f"GET /healthz on port {port} (log: {web_log})", lambda: get(port, "/healthz") == 200)
        health = subprocess.run(
            in_image(root, {"PORT": str(port)}, "chatops-healthcheck"),
            capture_output=True,
            text=True,
            timeout=30,
        )
        if health.returncode != 0:
            raise SmokeFailure(
                f"chatops-healthcheck: exit {health.returncode}: {health.stdout}{health.stderr}"
            )
        forged = get(
            port,
            "/slack/events",
            "POST",
            b'{"type":"url_verification","challenge":"x"}',
            {
                "Content-Type": "application/json",
                "X-Slack-Request-Timestamp": str(int(time.time())),
                "X-Slack-Signature": "v0=" + "0" * 64,
            },
        )
        if forged != 401:
            raise SmokeFailure(f"a forged Slack request got {forged}, not 401")
        passed(
            f"web: GET /healthz 200 on port {port}, chatops-healthcheck: {health.stdout.strip()!r}, forged POST /slack/events 401"
        )

        worker_out = stack.enter_context(worker_log.open("wb"))
        name = f"imagesmoke-{tag}"
        worker = subprocess.Popen(
            in_image(root, env, CHATOPS, "worker", "--name", name),
            stdout=worker_out,
            stderr=subprocess.STDOUT,
        )
        stack.callback(_kill_if_running, worker)
        key = f"rq:workers:{env['CHATOPS_QUEUE']}"
        wait_for(
            f"worker {name} registered in {key} (log: {worker_log})",
            lambda: any(_text(member).endswith(name) for member in client.smembers(key)),
        )
        # Slack is unreachable here: wait until the worker's start-up scan of Slack (bot/runs/lost_runs.py)
        # has given up, since a SIGTERM during that scan is not honoured (reported: its ``except
        # Exception`` swallows RQ's StopRequested).
        wait_for(
            f"the worker's start-up Slack scan to finish (log: {worker_log})",
            lambda: (
                b"Listening on" in worker_log.read_bytes()
                and b"the scan for cards of lost runs failed" in worker_log.read_bytes()
            ),
        )
        passed(f"worker: registered with RQ as {name} on queue {env['CHATOPS_QUEUE']}")
        stop(worker, "chatops worker", worker_log)
        stop(web, "chatops web", web_log)
        passed("SIGTERM: worker and web exited 0")
    for pattern in (f"{env['CHATOPS_REDIS_PREFIX']}*", f"rq:*{env['CHATOPS_QUEUE']}*", f"rq:*{name}*"):
        keys = list(client.scan_iter(pattern))
        if keys:
            client.delete(*keys)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: smoke_image.py IMAGE", file=sys.stderr)
        return 2
    image = argv[1]
    redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    started = time.monotonic()
    workdir = Path(os.environ.get("TMPDIR", "/tmp")) / f"chatops-image-smoke-{os.getpid()}"
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        check_config(image)
        with mounted(image) as root:
            check_filesystem(root)
            check_help(root)
            check_processes(root, redis_url, workdir)
    except (SmokeFailure, subprocess.CalledProcessError, redis.RedisError, OSError) as error:
        detail = error.stderr if isinstance(error, subprocess.CalledProcessError) else ""
        print(f"FAIL  {error}{detail}", flush=True)
        return 1
    print(f"image {image}: every check passed in {time.monotonic() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
