"""``chatops worker`` lowers its own CPU priority (``bot.ops.priority``): real worker subprocesses,
started the ways launchers start them, read back from ``/proc``.

Each worker runs in a session of its own, so lowering its scheduling group never touches pytest's.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.ops.priority import WORKER_NICE, lower_priority, parse_stat
from bot.settings import Settings
from tests.support.waiting import wait_for
from tests.support.worker_process import ROOT

PROC = Path("/proc")
AUTOGROUP = (PROC / "sys/kernel/sched_autogroup_enabled").exists() and (
    PROC / "sys/kernel/sched_autogroup_enabled"
).read_text().strip() == "1"
needs_autogroup = pytest.mark.skipif(not AUTOGROUP, reason="the kernel groups no processes by session")


def worker_command(env_file: Path, queue: str) -> list[str]:
    return [sys.executable, "-m", "bot.ops.cli", "--env-file", str(env_file), "worker", "--queue", queue]


def stat_fields(path: Path) -> list[str]:
    """The fields of a ``/proc`` stat file after the command name (state first)."""
    return path.read_text().rpartition(")")[2].split()


def nice_of_every_thread(pid: int) -> dict[int, int]:
    """tid -> nice value, for every thread of ``pid`` and of the processes it forked (RQ's scheduler)."""
    family = {pid}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                if int(stat_fields(entry / "stat")[1]) == pid:
                    family.add(int(entry.name))
    nices = {}
    for member in family:
        for task in (PROC / str(member) / "task").iterdir():
            with contextlib.suppress(OSError):
                nices[int(task.name)] = int(stat_fields(task / "stat")[16])
    return nices


def autogroup_nice(pid: int) -> int:
    return int((PROC / str(pid) / "autogroup").read_text().split()[-1])


@pytest.fixture
def started(redis_url: str, queue_name: str, tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts, each in a session (and process group) of its own, killed at the end."""
    processes: list[subprocess.Popen[bytes]] = []
    yield processes
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def launch(
    started: list[subprocess.Popen[bytes]],
    tmp_path: Path,
    redis_url: str,
    script: str,
    **env: str,
) -> tuple[int, Path]:
    """Run ``script`` with ``sh -c`` in a new session (as honcho starts a Procfile line); it starts a
    worker that writes its pid to ``$PIDFILE`` and logs to ``$LOG``. Returns (worker pid, log)."""
    pidfile, log = tmp_path / "worker.pid", tmp_path / "worker.log"
    environment = {**os.environ, "REDIS_URL": redis_url, "PIDFILE": str(pidfile), "LOG": str(log), **env}
    environment.pop("CHATOPS_WORKER_NICE", None)  # the test suite's own default (tests/conftest.py)
    environment.update(env)
    started.append(
        subprocess.Popen(["/bin/sh", "-c", script], cwd=ROOT, env=environment, start_new_session=True)
    )
    pid = int(wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), 60, "the worker's pid"))
    return pid, log


def listening(log: Path, queue: str) -> None:
    """Until the worker is listening on ``queue`` (its priority set, its threads and scheduler started)."""
    wait_for(lambda: log.exists() and f"Listening on {queue}" in log.read_text(errors="replace"), 60, "RQ")


def exec_worker(env_file: Path, queue: str) -> str:
    """A shell line that becomes the worker (same pid), writing that pid first."""
    return f'echo $$ > "$PIDFILE"; exec {shlex.join(worker_command(env_file, queue))} > "$LOG" 2>&1'


@pytest.fixture
def env_file(tmp_path: Path) -> Path:
    path = tmp_path / "empty.env"
    path.write_text("")
    return path


@needs_autogroup
def test_a_worker_in_a_session_of_its_own_lowers_itself_and_its_group(
    started: list[subprocess.Popen[bytes]], tmp_path: Path, redis_url: str, queue_name: str, env_file: Path
) -> None:
    # As honcho runs a Procfile line: `sh -c LINE` in a new session; the shell stays as the parent.
    inner = shlex.quote(exec_worker(env_file, queue_name))
    pid, log = launch(started, tmp_path, redis_url, f"/bin/sh -c {inner}; :")
    listening(log, queue_name)
    nices = nice_of_every_thread(pid)
    assert len(nices) > 1 and set(nices.values()) == {WORKER_NICE}, nices
    assert autogroup_nice(pid) == WORKER_NICE
    assert f"nice {WORKER_NICE} (was 0); scheduling group (autogroup) nice {WORKER_NICE} (was 0)" in (
        log.read_text()
    )


@needs_autogroup
def test_a_worker_sharing_its_session_with_another_process_leaves_the_group_alone(
    started: list[subprocess.Popen[bytes]], tmp_path: Path, redis_url: str, queue_name: str, env_file: Path
) -> None:
    # As foreman runs a Procfile: every line in one session. The sibling (standing for the web
    # process) names itself like the rest of a /proc stat line, to mislead a naive parser.
    ready = tmp_path / "sibling.ready"
    sibling = (
        "import pathlib, time; pathlib.Path('/proc/self/comm').write_text(') S 1 1 1 1'); "
        f"pathlib.Path({str(ready)!r}).touch(); time.sleep(600)"
    )
    script = (
        f"{shlex.join([sys.executable, '-c', sibling])} & "
        f"while [ ! -e {shlex.quote(str(ready))} ]; do sleep 0.05; done; "
        f"/bin/sh -c {shlex.quote(exec_worker(env_file, queue_name))}; wait"
    )
    pid, log = launch(started, tmp_path, redis_url, script)
    listening(log, queue_name)
    assert set(nice_of_every_thread(pid).values()) == {WORKER_NICE}
    assert autogroup_nice(pid) == 0  # lowering it would lower the sibling too
    assert "scheduling group (autogroup, nice 0) shared, left alone" in log.read_text()


def test_a_worker_started_lower_stays_lower(
    started: list[subprocess.Popen[bytes]], tmp_path: Path, redis_url: str, queue_name: str, env_file: Path
) -> None:
    pid, log = launch(
        started,
        tmp_path,
        redis_url,
        f"nice -n 15 /bin/sh -c {shlex.quote(exec_worker(env_file, queue_name))}",
    )
    listening(log, queue_name)
    assert set(nice_of_every_thread(pid).values()) == {15}


def test_nice_zero_leaves_the_worker_as_started(
    started: list[subprocess.Popen[bytes]], tmp_path: Path, redis_url: str, queue_name: str, env_file: Path
) -> None:
    pid, log = launch(
        started, tmp_path, redis_url, exec_worker(env_file, queue_name), CHATOPS_WORKER_NICE="0"
    )
    listening(log, queue_name)
    assert set(nice_of_every_thread(pid).values()) == {0}
    if AUTOGROUP:
        assert autogroup_nice(pid) == 0
    assert "worker CPU priority" not in log.read_text()


RATE_LIMITED = """
import errno, os
from bot.ops.priority import lower_priority

os.setsid()  # a scheduling group of its own

def write(value):
    descriptor = os.open("/proc/self/autogroup", os.O_WRONLY)
    try:
        os.write(descriptor, value)
    finally:
        os.close(descriptor)

write(b"3")
try:
    write(b"4")
    print("the kernel took a second write at once")
except OSError as error:
    print(errno.errorcode[error.errno])
print(lower_priority(10).describe())
"""


@needs_autogroup
def test_the_group_is_lowered_even_when_the_kernel_says_try_again() -> None:
    # Without CAP_SYS_ADMIN the kernel takes one autogroup write a tenth of a second, machine-wide
    # (EAGAIN meanwhile): workers started together must take turns, not give up.
    command = [sys.executable, "-c", RATE_LIMITED]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root without setpriv: the kernel would not limit these writes")
        command = ["setpriv", "--bounding-set=-sys_admin", *command]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    refused, result = done.stdout.splitlines()
    assert refused == "EAGAIN"
    assert result == "nice 10 (was 0); scheduling group (autogroup) nice 10 (was 3)"


@pytest.mark.parametrize("value", [-1, 20, 39])
def test_a_nice_value_out_of_range_is_refused(value: int) -> None:
    with pytest.raises(ValidationError, match="chatops_worker_nice"):
        Settings(_env_file=None, chatops_worker_nice=value)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="0-19"):
        lower_priority(value)


def test_stat_lines_are_read_from_the_last_parenthesis() -> None:
    # A process chooses its own name: spaces and parentheses in it must not shift the fields.
    assert parse_stat("4242 (worker) S 17 4242 4242 0 -1 4194560") == (17, 4242)
    assert parse_stat("4243 () S 1 1 1 1 1) S 99 100 101 0 -1") == (99, 101)
    assert parse_stat("4244 (a b\n(c)) R 5 6 7 8") == (5, 7)
    for broken in ("", "4245 worker S 1 2 3", "4246 (x) S 1"):
        with pytest.raises(ValueError):
            parse_stat(broken)
