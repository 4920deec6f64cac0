"""SSH targets against a real sshd: catalog tools run remotely, host keys are strict, values stay
one argument, a timeout kills the remote processes, and connection failures read clearly."""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.support.sshd import SshServer, generate_key, start_sshd
from tests.support.waiting import wait_until
from tools.base import FunctionTool
from tools.catalog import load_catalog
from tools.errors import SshConnectionError, SshHostKeyError, ToolCallError
from tools.ssh import SshRunner

TARGET = "web-1"
# Prints its arguments as JSON, so a test sees exactly how many arrived and what each holds.
ARGV_ECHO = [sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))"]
HOSTILE_VALUES = [
    "; rm -rf x",
    "$(touch pwned)",
    "`touch pwned`",
    "a' ; touch pwned; echo '",
    'a" ; touch pwned; echo "',
    "line one\ntouch pwned",
    "x && touch pwned || touch pwned",
    "$HOME ${PATH} * ?",
    "> pwned",
    "\\' \\\" \\",
    "",
]

CATALOG = """
tools:
  - name: where_am_i
    description: Shows the SSH connection the command runs over.
    category: read_only
    targets: [runner, ssh]
    run: ["printenv", "SSH_CONNECTION"]
  - name: echo_note
    description: Echo a note.
    category: mutating
    targets: [ssh]
    params:
      note: {type: string}
    run: [ARGV_ECHO, "--by={confirmed_by}", "{note}"]
"""


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture
def runner(sshd: SshServer) -> Iterator[SshRunner]:
    runner = SshRunner(sshd.config(), name=TARGET)
    yield runner
    runner.close()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    directory = tmp_path / "work"
    directory.mkdir()
    return directory


def catalog_tools(tmp_path: Path, runner: SshRunner) -> dict[str, FunctionTool[Any]]:
    path = tmp_path / "tools.yaml"
    text = textwrap.dedent(CATALOG).replace("ARGV_ECHO", ", ".join(json.dumps(part) for part in ARGV_ECHO))
    path.write_text(text)
    catalog = load_catalog(path, env={"PATH": "/usr/bin:/bin"})
    return {spec.name: catalog.build_for_runner(spec, runner.run) for spec in catalog.specs_for("ssh")}


def test_a_catalog_tool_runs_on_the_target(tmp_path: Path, sshd: SshServer, runner: SshRunner) -> None:
    tool = catalog_tools(tmp_path, runner)["where_am_i"]
    result = tool.execute("{}", timeout=10)
    assert not result.is_error, result.output
    first, output = result.output.splitlines()
    assert first.startswith("`printenv SSH_CONNECTION` succeeded in ")
    # sshd sets SSH_CONNECTION to "client-ip client-port server-ip server-port": ours.
    assert output.startswith("127.0.0.1 ") and output.endswith(f" 127.0.0.1 {sshd.port}")


def test_the_approval_card_shows_exactly_the_argv_that_runs_remotely(
    tmp_path: Path, runner: SshRunner
) -> None:
    tool = catalog_tools(tmp_path, runner)["echo_note"]
    arguments = json.dumps({"note": "disk full; $(reboot)"})
    described = tool.describe(arguments)
    assert described is not None
    assert described.splitlines()[0] == shlex.join([*ARGV_ECHO, "--by=<approver>", "disk full; $(reboot)"])
    result = tool.execute(json.dumps({"note": "disk full; $(reboot)", "confirmed_by": "U42"}), timeout=10)
    assert not result.is_error, result.output
    assert result.output.splitlines()[0].startswith(
        f"`{shlex.join([*ARGV_ECHO, '--by=U42', 'disk full; $(reboot)'])}`"
    )
    assert json.loads(result.output.splitlines()[1]) == ["--by=U42", "disk full; $(reboot)"]


@pytest.mark.parametrize("value", HOSTILE_VALUES)
def test_shell_metacharacters_stay_one_argument_and_run_nothing(
    runner: SshRunner, workdir: Path, value: str
) -> None:
    result = runner.run([*ARGV_ECHO, value, "after"], timeout=10, cwd=str(workdir))
    assert result.ok, result.failure_message()
    assert json.loads(result.stdout) == [value, "after"]
    assert list(workdir.iterdir()) == []  # no pwned, no x


def test_a_hostile_working_directory_is_one_cd_argument(runner: SshRunner, workdir: Path) -> None:
    hostile = workdir / "-d; touch pwned $(touch pwned) 'q'"
    hostile.mkdir()
    result = runner.run(["pwd"], timeout=10, cwd=str(hostile))
    assert result.ok, result.failure_message()
    assert result.stdout == f"{hostile}\n"
    assert sorted(path.name for path in workdir.iterdir()) == [hostile.name]


def test_a_catalog_value_with_metacharacters_reaches_the_remote_program_verbatim(
    tmp_path: Path, runner: SshRunner
) -> None:
    tool = catalog_tools(tmp_path, runner)["echo_note"]
    # A few shapes (the runner test above takes every one): values the catalog accepts (no newline).
    for value in ["; rm -rf x", "$(touch pwned) `touch pwned`", "a' ; touch pwned; echo \"b"]:
        result = tool.execute(json.dumps({"note": value, "confirmed_by": "U1"}), timeout=10)
        assert not result.is_error, result.output
        assert json.loads(result.output.splitlines()[1]) == ["--by=U1", value]


def test_an_unknown_host_key_is_refused_and_never_added(tmp_path: Path, sshd: SshServer) -> None:
    for contents in ["", f"[127.0.0.1]:{sshd.port + 1} {sshd.host_public_key}\n"]:
        known_hosts = tmp_path / "known_hosts"
        known_hosts.write_text(contents)
        runner = SshRunner(sshd.config(known_hosts=known_hosts), name=TARGET)
        with pytest.raises(SshHostKeyError) as caught:
            runner.run(["true"], timeout=10)
        message = str(caught.value)
        assert f"SSH target {TARGET!r} (127.0.0.1:{sshd.port})" in message
        assert f"its host key is not in {known_hosts}; refusing to connect" in message
        assert "ssh-ed25519 SHA256:" in message  # the fingerprint to check out of band
        assert known_hosts.read_text() == contents  # nothing was added
        assert caught.value.target == TARGET


def test_a_changed_host_key_is_refused(tmp_path: Path, sshd: SshServer) -> None:
    other_key = generate_key(tmp_path / "other_host_key")
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(sshd.known_hosts_line(other_key))
    runner = SshRunner(sshd.config(known_hosts=known_hosts), name=TARGET)
    with pytest.raises(SshHostKeyError) as caught:
        runner.run(["true"], timeout=10)
    message = str(caught.value)
    assert f"SSH target {TARGET!r} (127.0.0.1:{sshd.port}): its host key changed" in message
    assert f"does not match {known_hosts}; refusing to connect" in message


def test_a_missing_known_hosts_file_is_refused(tmp_path: Path, sshd: SshServer) -> None:
    missing = tmp_path / "no_such_known_hosts"
    with pytest.raises(SshHostKeyError, match=r"cannot read its known_hosts file .*no_such_known_hosts"):
        SshRunner(sshd.config(known_hosts=missing), name=TARGET).run(["true"], timeout=10)


def test_a_timeout_kills_the_remote_command_and_its_children(runner: SshRunner, workdir: Path) -> None:
    # The shell records its pid and a background child's, then waits: both must die at the timeout.
    script = "echo $$ > shell.pid; sleep 60 & echo $! > child.pid; wait"
    started = time.monotonic()
    result = runner.run(["sh", "-c", script], timeout=1.0, cwd=str(workdir))
    assert time.monotonic() - started < 30  # not the child's 60 s (a bound for that alone)
    assert result.timed_out and result.returncode is None and not result.ok
    assert "timed out after 1 s; its process group was killed" in result.failure_message()
    pids = [int((workdir / name).read_text()) for name in ("shell.pid", "child.pid")]
    wait_until(lambda: all(_gone(pid) for pid in pids), what=f"remote processes {pids} to be gone")


def test_a_dropped_connection_is_reopened_for_the_next_call(sshd: SshServer, runner: SshRunner) -> None:
    before = runner.run(["printenv", "SSH_CONNECTION"], timeout=10).stdout
    for session in psutil.Process(sshd.process.pid).children(recursive=True):
        session.kill()  # every connection to this sshd drops; the listener stays
    after = runner.run(["printenv", "SSH_CONNECTION"], timeout=10)
    assert after.ok, after.failure_message()
    assert after.stdout.split()[1] != before.split()[1]  # a new client port: a new connection


def test_concurrent_calls_share_one_connection(runner: SshRunner) -> None:
    results: list[str] = []

    def call() -> None:
        results.append(runner.run(["printenv", "SSH_CONNECTION"], timeout=10).stdout)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(15)
    assert len(results) == 4
    assert len(set(results)) == 1  # the same client port: one connection, four channels


def test_a_failing_remote_command_reads_like_a_local_one(runner: SshRunner) -> None:
    failed = runner.run(["sh", "-c", "echo oops >&2; exit 3"], timeout=10)
    assert (failed.returncode, failed.ok) == (3, False)
    assert (
        failed.failure_message()
        == "`sh -c 'echo oops >&2; exit 3'` failed with exit status 3\nstderr (last lines):\noops"
    )
    killed = runner.run(["sh", "-c", "kill -TERM $$"], timeout=10)
    assert killed.returncode == -15
    assert killed.failure_message().startswith("`sh -c 'kill -TERM $$'` was killed by SIGTERM")
    missing = runner.run(["no-such-program-chatops"], timeout=10)
    assert missing.returncode == 127 and "no-such-program-chatops" in missing.stderr


def test_env_is_not_passed_and_output_is_bounded(runner: SshRunner) -> None:
    result = runner.run(["printenv", "CHATOPS_SSH_MARKER"], timeout=10, env={"CHATOPS_SSH_MARKER": "x"})
    assert result.returncode == 1 and result.stdout == ""
    big = runner.run(["head", "-c", "300000", "/dev/zero"], timeout=10, max_output_bytes=1000)
    assert big.ok
    assert "[... 299000 bytes of output not kept ...]" in big.stdout


def test_a_key_the_server_does_not_accept_fails_authentication(tmp_path: Path, sshd: SshServer) -> None:
    generate_key(tmp_path / "stranger")
    runner = SshRunner(sshd.config(key_file=tmp_path / "stranger"), name=TARGET)
    with pytest.raises(SshConnectionError) as caught:
        runner.run(["true"], timeout=10)
    assert str(caught.value) == (
        f"SSH target {TARGET!r} (127.0.0.1:{sshd.port}): authentication failed for user "
        f"{sshd.user!r} with key file {tmp_path / 'stranger'}"
    )


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"host": "no-such-host.invalid"}, "cannot resolve host 'no-such-host.invalid'"),
        ({"key_file": Path("/nonexistent/key")}, "cannot read its key file /nonexistent/key"),
    ],
)
def test_connection_failures_name_the_target(
    sshd: SshServer, changes: dict[str, object], expected: str
) -> None:
    runner = SshRunner(sshd.config(**changes), name=TARGET)
    with pytest.raises(SshConnectionError, match=f"^SSH target '{TARGET}' .*{expected}"):
        runner.run(["true"], timeout=10)


def test_a_refused_connection_names_the_target(tmp_path: Path, sshd: SshServer) -> None:
    closed_port = _closed_port()
    runner = SshRunner(sshd.config(port=closed_port), name=TARGET)
    with pytest.raises(SshConnectionError) as caught:
        runner.run(["true"], timeout=10)
    assert str(caught.value) == f"SSH target {TARGET!r} (127.0.0.1:{closed_port}): connection refused"


def test_an_encrypted_key_is_refused_with_a_clear_message(tmp_path: Path, sshd: SshServer) -> None:
    key = tmp_path / "encrypted"
    key.write_text(sshd.key_file.read_text())
    key.chmod(0o600)
    subprocess.run(
        ["ssh-keygen", "-q", "-p", "-N", "secret-pass", "-f", str(key)], check=True, capture_output=True
    )
    with pytest.raises(SshConnectionError, match="is encrypted; the bot needs a key without a passphrase"):
        SshRunner(sshd.config(key_file=key), name=TARGET).run(["true"], timeout=10)


def test_an_empty_or_nul_argv_is_refused(runner: SshRunner) -> None:
    with pytest.raises(ToolCallError, match="empty command"):
        runner.run([], timeout=5)
    with pytest.raises(ToolCallError, match="NUL"):
        runner.run(["echo", "a\0b"], timeout=5)


def _gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (a zombie waiting for its reaper counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_remote_stdin_is_at_end_of_file(runner: SshRunner) -> None:
    result = runner.run(["cat"], timeout=5)  # would wait for input until the timeout otherwise
    assert result.ok and result.stdout == "" and result.duration < 4
