"""SSH execution of catalog argv tools on targets reached ``via: ssh``.

``SshRunner.run`` has ``tools.process.run_command``'s signature and returns its ``CommandResult``
(same bounded capture, same ``failure_message``), so a catalog tool built with
``command_runner=runner.run`` reads the same as a local one; only ``argv`` says where it ran.

Design, and why:

* **paramiko**, synchronous like the rest of the runtime: a tool runs on a worker thread, so a
  blocking client needs no event-loop bridge, and it lets us pin host-key checking to one file
  (the ``ssh`` binary would read ``~/.ssh/config`` and the system files too).
* **One connection per target**, reused by every call (each call is one channel on it) and
  opened again when it dropped; a lock makes concurrent calls share one connect.
* **Strict host keys.** Only the target's own ``known_hosts`` file is loaded (never
  ``~/.ssh/known_hosts`` nor the system files) and an unknown key is refused (a ``RejectPolicy``),
  as is a changed one: ``SshHostKeyError`` says which target, which ``host:port`` and which file.
  Nothing prompts and nothing is ever added. Only the configured key file is offered (no agent, no
  ``~/.ssh/id_*``).
* **The command is ``shlex.join(argv)``**: the remote user's shell parses it (SSH carries one
  string), and quoting every element keeps each value one argument with ``;``, ``$(...)``,
  backticks, quotes and newlines inert. A POSIX login shell (sh, bash, dash, zsh) is assumed.
  The wrapper around it, and the reading of its output, are ``tools.ssh_command``.
* **A timeout kills the remote processes, not just the channel.** sshd does not signal a
  session's processes when its channel closes (without a pty), so a closed channel leaves the
  command running. sshd starts each session's shell in a new session, hence its own process
  group; the wrapper prints the shell's pid (that group's id) first, and at the timeout a second
  channel runs ``kill -s KILL -- -PGID``: the command and its children die, as locally.
* ``env`` is ignored: passing variables needs the server's ``AcceptEnv``, which is not ours to
  rely on (the command sees the remote user's own environment).
"""

from __future__ import annotations

import contextlib
import logging
import shlex
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import paramiko

from tools.errors import SshConnectionError, SshHostKeyError, ToolCallError
from tools.process import DEFAULT_MAX_OUTPUT_BYTES, CommandResult, stderr_tail
from tools.ssh_command import ChannelOutput, new_marker, remaining, remote_command, shell_returncode

log = logging.getLogger(__name__)

_KEEPALIVE_SECONDS = 30  # a dead connection is noticed (and reopened) instead of hanging a call
_MIN_OPEN_SECONDS = 1.0  # opening a channel near the deadline still gets a moment
_PID_GRACE_SECONDS = 2.0  # at a timeout, how long to wait for a pid line that has not arrived yet
_KILL_SECONDS = 5.0  # how long the kill over a second channel may take
_READER_JOIN_SECONDS = 2.0


@dataclass(frozen=True)
class SshConfig:
    """How to reach one SSH target (from the inventory's ``ssh:`` block)."""

    host: str
    user: str
    key_file: Path
    known_hosts: Path
    port: int = 22
    connect_timeout: float = 10.0

    @property
    def address(self) -> str:
        """``host:port`` for messages (``[v6]:port`` for an IPv6 address)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


class SshRunner:
    """Runs argv commands on one SSH target; thread-safe, one reused connection."""

    def __init__(self, config: SshConfig, *, name: str) -> None:
        self._config = config
        self._name = name
        self._lock = threading.Lock()
        self._client: paramiko.SSHClient | None = None

    @property
    def name(self) -> str:
        return self._name

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> CommandResult:
        """Run ``argv`` on the target and wait at most ``timeout`` seconds (connecting included).

        ``env`` is ignored (see the module docstring); ``cwd`` becomes ``cd -- DIR &&``. Raises
        ``SshConnectionError`` (``SshHostKeyError`` for host keys) when the target cannot be
        reached, and ``ToolCallError`` when the command's fate is unknown (no exit status, or a
        timed-out command that could not be killed).
        """
        del env  # sshd's AcceptEnv decides what passes; the remote user's environment applies
        if not argv:
            raise ToolCallError("empty command")
        if any("\0" in element for element in [*argv, cwd or ""]):
            raise ToolCallError("an argument contains a NUL byte")
        started = time.monotonic()
        deadline = started + timeout
        marker = new_marker()
        channel = self._open_channel(deadline)
        try:
            streams = ChannelOutput(channel, marker.encode(), max_output_bytes)
            try:
                channel.exec_command(remote_command(argv, cwd, marker))
                channel.shutdown_write()  # stdin at EOF at once, like run_command's /dev/null
            except (paramiko.SSHException, EOFError, OSError) as exc:
                raise self._error(f"the server refused to run the command ({_describe(exc)})") from exc
            streams.start()
            finished = streams.wait(channel, deadline)
            if not finished:
                self._kill(argv, streams, timeout)
        finally:
            channel.close()
        streams.join(_READER_JOIN_SECONDS)
        returncode = None if not finished else shell_returncode(channel.exit_status)
        if finished and channel.exit_status < 0:
            raise ToolCallError(
                f"`{shlex.join(argv)}` on {self._where()} ended without an exit status (the remote shell "
                f"was killed by a signal, or the connection dropped){_stderr_note(streams.stderr.text())}"
            )
        return CommandResult(
            argv=tuple(argv),
            returncode=returncode,
            stdout=streams.stdout.text(),
            stderr=streams.stderr.text(),
            timed_out=not finished,
            duration=time.monotonic() - started,
            timeout=timeout,
        )

    def close(self) -> None:
        """Close the connection; a later ``run`` opens a new one."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    # -- the connection ------------------------------------------------------------------------

    def _open_channel(self, deadline: float) -> paramiko.Channel:
        """A session channel; a connection that died since its last use is reopened once."""
        for attempt in (1, 2):
            transport = self._transport(deadline)
            try:
                return transport.open_session(timeout=max(_MIN_OPEN_SECONDS, remaining(deadline)))
            except paramiko.ChannelException as exc:  # the connection is fine; the server said no
                raise self._error(
                    f"the server refused a new session ({exc}); sshd's MaxSessions (default 10) "
                    "limits the calls at once on one connection"
                ) from exc
            except (paramiko.SSHException, EOFError, OSError) as exc:
                # EOF or a socket error: the connection is dead even if paramiko has not noticed yet.
                # Otherwise drop only a dead one: closing a live one would cut other calls' channels.
                dead = isinstance(exc, EOFError | OSError) or not transport.is_active()
                if not dead or attempt == 2:
                    raise self._error(f"cannot open a session ({_describe(exc)})") from exc
                log.info(
                    "ssh target %s: the connection dropped (%s); reconnecting", self._name, _describe(exc)
                )
                self._drop(transport)
        raise AssertionError("unreachable")

    def _transport(self, deadline: float) -> paramiko.Transport:
        with self._lock:
            transport = self._client.get_transport() if self._client is not None else None
            if transport is not None and transport.is_active():
                return transport
            if self._client is not None:
                self._client.close()
                self._client = None
            self._client = self._connect(min(self._config.connect_timeout, remaining(deadline)))
            transport = self._client.get_transport()
            assert transport is not None, "a connected client has a transport"
            transport.set_keepalive(_KEEPALIVE_SECONDS)
            with contextlib.suppress(OSError, AttributeError):  # small requests, sent at once
                # Without it each channel open waits out a delayed ACK (about 40 ms a call).
                transport.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # type: ignore[union-attr]
            return transport

    def _drop(self, transport: paramiko.Transport) -> None:
        with self._lock:
            if self._client is not None and self._client.get_transport() is transport:
                self._client.close()
                self._client = None

    def _connect(self, timeout: float) -> paramiko.SSHClient:
        config = self._config
        if timeout <= 0:
            raise self._error("no time left to connect")
        key = self._load_key()
        client = paramiko.SSHClient()
        try:
            client.load_host_keys(str(config.known_hosts))  # only this file: no system or user files
        except OSError as exc:
            raise SshHostKeyError(
                self._name,
                f"{self._where()}: cannot read its known_hosts file {config.known_hosts} "
                f"({exc.strerror or exc}); refusing to connect without checking the host key",
            ) from exc
        client.set_missing_host_key_policy(_RefuseUnknownHost())
        try:
            client.connect(
                config.host,
                port=config.port,
                username=config.user,
                pkey=key,
                timeout=timeout,
                banner_timeout=timeout,
                auth_timeout=timeout,
                look_for_keys=False,
                allow_agent=False,
            )
        except Exception as exc:
            client.close()
            error = self._connect_error(exc, timeout)
            if error is None:
                raise  # not a connection problem: a bug shows as one
            raise error from exc
        return client

    def _load_key(self) -> paramiko.PKey:
        path = self._config.key_file
        try:
            return paramiko.PKey.from_path(path)
        except OSError as exc:
            raise self._error(f"cannot read its key file {path} ({exc.strerror or exc})") from exc
        except (TypeError, paramiko.PasswordRequiredException) as exc:  # cryptography: TypeError
            raise self._error(
                f"its key file {path} is encrypted; the bot needs a key without a passphrase"
            ) from exc
        except Exception as exc:  # ValueError, UnknownKeyType, UnsupportedAlgorithm...
            raise self._error(f"its key file {path} is not a private key the bot can read ({exc})") from exc

    def _connect_error(self, exc: Exception, timeout: float) -> SshConnectionError | None:
        """The message the model and the on-call engineer read, for what ``connect`` raised."""
        where, known_hosts = self._where(), self._config.known_hosts
        if isinstance(exc, _UnknownHostKey):
            return SshHostKeyError(
                self._name,
                f"{where}: its host key is not in {known_hosts}; refusing to connect. Check the key "
                f"({exc.key.get_name()} {exc.key.fingerprint}) out of band and add it to that file",
            )
        if isinstance(exc, paramiko.BadHostKeyException):
            return SshHostKeyError(
                self._name,
                f"{where}: its host key changed: the server offered {exc.key.get_name()} "
                f"{exc.key.fingerprint}, which does not match {known_hosts}; refusing to connect "
                "(a reinstalled host, or someone in the middle: check before updating that file)",
            )
        if isinstance(exc, paramiko.AuthenticationException):
            return self._error(
                f"authentication failed for user {self._config.user!r} with key file {self._config.key_file}"
            )
        if isinstance(exc, socket.gaierror):
            return self._error(f"cannot resolve host {self._config.host!r} ({exc.strerror or exc})")
        if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
            return self._error("connection refused")
        if isinstance(exc, TimeoutError):
            return self._error(f"no answer within {round(timeout, 1):g} s")
        if isinstance(exc, paramiko.SSHException | EOFError):
            return self._error(f"the SSH handshake failed ({_describe(exc)})")
        if isinstance(exc, OSError):
            return self._error(f"cannot connect ({exc.strerror or exc})")
        return None

    # -- the timeout ---------------------------------------------------------------------------

    def _kill(self, argv: Sequence[str], streams: ChannelOutput, timeout: float) -> None:
        """Kill the remote command's process group over a second channel, or say it may run on."""
        pid = streams.pid(_PID_GRACE_SECONDS)
        problem = "its process id never arrived" if pid is None else self._kill_group(pid)
        if problem is not None:
            log.warning("ssh target %s: a timed-out command could not be killed: %s", self._name, problem)
            raise ToolCallError(
                f"`{shlex.join(argv)}` on {self._where()} timed out after {round(timeout, 1):g} s and "
                f"could not be killed ({problem}): it may still be running there"
            )

    def _kill_group(self, pgid: int) -> str | None:
        """``None`` once the group is killed; otherwise why not."""
        # Closing the command's channel would not stop it (see the module docstring); the group
        # is its login shell's, which sshd made a session leader; the pid alone is the fallback.
        # A command that ended at the deadline leaves nothing to kill: that counts as killed.
        command = (
            f"kill -s KILL -- -{pgid} 2>/dev/null || kill -s KILL -- {pgid} 2>/dev/null"
            f" || ! kill -s 0 -- {pgid} 2>/dev/null"
        )
        try:
            channel = self._open_channel(time.monotonic() + _KILL_SECONDS)
        except ToolCallError as exc:
            return str(exc)
        try:
            channel.exec_command(command)
            if not channel.status_event.wait(_KILL_SECONDS):
                return "the kill command did not answer"
        except (paramiko.SSHException, EOFError, OSError) as exc:
            return f"the kill command failed ({_describe(exc)})"
        finally:
            channel.close()
        if channel.exit_status != 0:
            return f"kill exited with status {channel.exit_status}"
        return None

    def _where(self) -> str:
        return f"SSH target {self._name!r} ({self._config.address})"

    def _error(self, detail: str) -> SshConnectionError:
        return SshConnectionError(self._name, f"{self._where()}: {detail}")


class _UnknownHostKey(Exception):
    def __init__(self, hostname: str, key: paramiko.PKey) -> None:
        super().__init__(hostname)
        self.key = key


class _RefuseUnknownHost(paramiko.RejectPolicy):
    """``RejectPolicy`` with a typed exception, so the message can say exactly what happened."""

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> NoReturn:
        raise _UnknownHostKey(hostname, key)


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__  # EOFError() has no text


def _stderr_note(stderr: str) -> str:
    tail = stderr_tail(stderr)
    return f"\nstderr (last lines):\n{tail}" if tail else ""
