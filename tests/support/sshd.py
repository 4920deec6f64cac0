"""A real OpenSSH server for the SSH tests: Debian's ``/usr/sbin/sshd`` as the current user.

``start_sshd(directory)`` generates a host key and a user key (``ssh-keygen -t ed25519``) in
``directory``, writes an ``sshd_config`` that lets only that key in, for only this user
(``StrictModes no`` and ``UsePAM no`` so a non-root sshd works; as root, sshd needs its privilege
separation directory, which is created when missing), and starts ``sshd -D -e -f CONFIG`` on a
free loopback port. sshd cannot bind port 0, so a port is picked by binding a socket and closing
it, and another is tried when sshd loses that race. It returns once sshd answers with its SSH
banner (polled with a deadline), with a ``known_hosts`` file holding the host key as
``[127.0.0.1]:PORT ssh-ed25519 ...``. When sshd is missing or does not start, the test is
skipped and says why (``make test`` installs openssh-server where it can).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.processes import stop_process
from tools.ssh import SshConfig

SSHD = os.environ.get("CHATOPS_SSHD", "/usr/sbin/sshd")
HOST = "127.0.0.1"
_PRIVSEP_DIR = Path("/run/sshd")  # Debian's sshd refuses to start as root without it
_START_ATTEMPTS = 5
_START_SECONDS = 10.0


@dataclass
class SshServer:
    """A running sshd and the files a client needs to log in to it."""

    port: int
    user: str
    key_file: Path
    known_hosts: Path
    host_public_key: str
    """``ssh-ed25519 AAAA...``: the host key as a known_hosts line carries it."""
    directory: Path
    process: subprocess.Popen[bytes]

    def config(self, **changes: object) -> SshConfig:
        """The ``SshConfig`` that reaches this server (fields in ``changes`` replaced)."""
        values: dict[str, object] = {
            "host": HOST,
            "port": self.port,
            "user": self.user,
            "key_file": self.key_file,
            "known_hosts": self.known_hosts,
            "connect_timeout": 5.0,
        }
        values.update(changes)
        return SshConfig(**values)  # type: ignore[arg-type]

    def known_hosts_line(self, public_key: str | None = None) -> str:
        return f"[{HOST}]:{self.port} {public_key or self.host_public_key}\n"

    def log(self) -> str:
        return (self.directory / "sshd.log").read_text(errors="replace")

    def stop(self) -> None:
        stop_process(self.process, 5)


def sshd_missing() -> str | None:
    """Why the SSH tests cannot run here, or None."""
    if not (os.path.isfile(SSHD) and os.access(SSHD, os.X_OK)):
        return (
            f"OpenSSH's server is not installed at {SSHD}: make test installs openssh-server with apt "
            "where it can; elsewhere install it or set CHATOPS_SSHD to its path"
        )
    if shutil.which("ssh-keygen") is None:
        return "ssh-keygen is not installed (openssh-client)"
    return None


def generate_key(path: Path) -> str:
    """A new ed25519 key pair at ``path`` (``path.pub`` too); its public line ``ssh-ed25519 AAAA...``."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "chatops-test", "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )
    kind, blob, *_ = path.with_name(path.name + ".pub").read_text().split()
    return f"{kind} {blob}"


def start_sshd(directory: Path) -> SshServer:
    """A running sshd with its keys in ``directory``; skips the test when that is not possible."""
    reason = sshd_missing() or _prepare_privsep_dir()
    if reason is not None:
        pytest.skip(reason)
    directory.mkdir(parents=True, exist_ok=True)
    host_public_key = generate_key(directory / "host_ed25519")
    user_public_key = generate_key(directory / "user_ed25519")
    (directory / "authorized_keys").write_text(user_public_key + "\n")
    user = pwd.getpwuid(os.getuid()).pw_name
    last_log = ""
    for _ in range(_START_ATTEMPTS):
        port = _free_port()
        config = directory / "sshd_config"
        config.write_text(_sshd_config(directory, port, user))
        process = _launch(directory, config)
        if _wait_for_banner(process, port):
            known_hosts = directory / "known_hosts"
            known_hosts.write_text(f"[{HOST}]:{port} {host_public_key}\n")
            return SshServer(
                port=port,
                user=user,
                key_file=directory / "user_ed25519",
                known_hosts=known_hosts,
                host_public_key=host_public_key,
                directory=directory,
                process=process,
            )
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait()
        last_log = (directory / "sshd.log").read_text(errors="replace")
        if "Address already in use" not in last_log:
            break  # not the port race: trying again would fail the same way
    pytest.skip(f"sshd did not start: {last_log.strip()[-500:] or 'no output'}")


def _sshd_config(directory: Path, port: int, user: str) -> str:
    return "\n".join(
        [
            f"Port {port}",
            f"ListenAddress {HOST}",
            f"HostKey {directory / 'host_ed25519'}",
            "PidFile none",
            f"AuthorizedKeysFile {directory / 'authorized_keys'}",
            "StrictModes no",
            "UsePAM no",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PubkeyAuthentication yes",
            "PermitRootLogin prohibit-password",
            f"AllowUsers {user}",
            "MaxStartups 100",
            "LogLevel VERBOSE",
            "",
        ]
    )


def _launch(directory: Path, config: Path) -> subprocess.Popen[bytes]:
    with (directory / "sshd.log").open("wb") as log:  # -e: the log goes to stderr, this file
        return subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )


def _wait_for_banner(process: subprocess.Popen[bytes], port: int) -> bool:
    """True once sshd answers ``SSH-2.0...`` on ``port``; False if it exits or the deadline passes."""
    deadline = time.monotonic() + _START_SECONDS
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with socket.create_connection((HOST, port), timeout=1.0) as connection:
                if connection.recv(64).startswith(b"SSH-2.0"):
                    return True
        except OSError:
            time.sleep(0.05)
    return False


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def _prepare_privsep_dir() -> str | None:
    if os.getuid() != 0 or _PRIVSEP_DIR.is_dir():
        return None
    try:
        _PRIVSEP_DIR.mkdir(mode=0o755, parents=True)
    except OSError as exc:
        return f"sshd runs as root here and needs {_PRIVSEP_DIR}, which cannot be created: {exc}"
    return None
