"""Helpers for the MCP tests: a module-scoped pool (a stdio server takes ~2 s to start, so each
module starts its servers once), temporary git repositories, and the HTTP test server's process.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.mcp import McpPool

ROOT = Path(__file__).resolve().parents[3]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def staged(repo: Path) -> list[str]:
    return git(repo, "diff", "--cached", "--name-only").split()


def make_repo(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    git(directory, "init", "-q")
    (directory / "README").write_text("hello\n")
    git(directory, "add", "README")
    git(directory, "commit", "-q", "-m", "init")
    (directory / "new.txt").write_text("staged\n")
    git(directory, "add", "new.txt")
    return directory


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def pool() -> Iterator[McpPool]:
    made = McpPool()
    yield made
    made.close()


def start_http_server(port: int, token: str, transport: str = "http") -> subprocess.Popen[bytes]:
    """``transport``: ``http`` (streamable HTTP at /mcp) or ``sse`` (HTTP+SSE at /sse)."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.mcp_servers", transport, str(port), token],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
