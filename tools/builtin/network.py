"""Reachability checks: HTTP health, TCP port, DNS lookup.

A check that ran answers ``OK: ...`` or ``FAIL: ...`` (not a tool error: a failing service is a
finding); only bad arguments are ``Error: ...``.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import httpx
from pydantic import BaseModel, ConfigDict, Field

from agent.tooling import ToolCategory
from tools import http_client
from tools.base import FunctionTool, ToolContext, tool
from tools.text import shorten

_HOST_PATTERN = r"^[A-Za-z0-9._:\[\]-]+$"
_BODY_EXCERPT_CHARS = 300
T = TypeVar("T")


class HttpCheckArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(max_length=2000, description="The http:// or https:// URL to check.")
    method: Literal["GET", "HEAD"] = "GET"
    expect_status: int | None = Field(
        default=None, ge=100, le=599, description="The status a healthy answer has; default: any below 400."
    )
    expect_text: str | None = Field(
        default=None, max_length=200, description="Text a healthy body contains (first 64 KiB searched)."
    )
    follow_redirects: bool = False


class TcpCheckArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str = Field(max_length=253, pattern=_HOST_PATTERN, description="Host name or IP address.")
    port: int = Field(ge=1, le=65535)


class DnsLookupArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        max_length=253,
        pattern=_HOST_PATTERN,
        description="A host name, or an IP address for a reverse lookup.",
    )


@tool(category=ToolCategory.READ_ONLY, parallel=True, timeout=15)
def http_check(args: HttpCheckArgs, ctx: ToolContext) -> str:
    """Check a URL: status, latency, and optionally whether the body contains some text."""
    http_client.check_url(args.url)
    target = f"{args.method} {args.url}"
    timeout = max(0.1, ctx.remaining())
    try:
        response = http_client.request(
            args.method, args.url, timeout=timeout, follow_redirects=args.follow_redirects
        )
    except httpx.HTTPError as exc:
        return f"FAIL: {target}: {http_client.describe_http_error(exc, ctx.timeout)}"
    summary = f"{target} -> {response.status} {response.reason} in {response.elapsed * 1000:.0f} ms"
    problems = []
    if args.expect_status is not None and response.status != args.expect_status:
        problems.append(f"expected status {args.expect_status}")
    elif args.expect_status is None and response.status >= 400:
        problems.append("error status")
    if args.expect_text is not None and args.expect_text not in response.body:
        problems.append(f"body does not contain {args.expect_text!r}")
    details = []
    if response.location:
        details.append(f"redirects to {response.location}")
    if args.expect_text is not None and not problems:
        details.append(f"body contains {args.expect_text!r}")
    line = f"{'FAIL' if problems else 'OK'}: {summary}"
    if problems or details:
        line += f" ({'; '.join(problems + details)})"
    if problems and response.body.strip():
        line += f"\nbody: {shorten(' '.join(response.body.split()), _BODY_EXCERPT_CHARS)}"
    return line


@tool(category=ToolCategory.READ_ONLY, parallel=True, timeout=10)
def tcp_check(args: TcpCheckArgs, ctx: ToolContext) -> str:
    """Check whether a TCP port accepts connections."""
    host = args.host.strip("[]")
    target = f"{host}:{args.port}"
    started = time.perf_counter()
    try:
        with socket.create_connection((host, args.port), timeout=max(0.1, ctx.remaining())) as sock:
            peer = sock.getpeername()[0]
    except TimeoutError:
        return f"FAIL: {target}: no answer within {ctx.timeout:g} s (filtered or down)"
    except socket.gaierror as exc:
        return f"FAIL: {target}: cannot resolve {host}: {exc.strerror}"
    except OSError as exc:
        return f"FAIL: {target}: {exc.strerror or exc}"
    elapsed = (time.perf_counter() - started) * 1000
    via = f" ({peer})" if peer != host else ""
    return f"OK: {target}{via} accepts TCP connections ({elapsed:.0f} ms)"


@tool(category=ToolCategory.READ_ONLY, parallel=True, timeout=10)
def dns_lookup(args: DnsLookupArgs, ctx: ToolContext) -> str:
    """Resolve a host name to its addresses (system resolver), or an IP address to its name."""
    name = args.name.strip("[]")
    started = time.perf_counter()
    try:
        ipaddress.ip_address(name)
        is_address = True
    except ValueError:
        is_address = False
    try:
        if is_address:
            host, aliases, _ = _with_timeout(lambda: socket.gethostbyaddr(name), ctx.remaining())
            answer = f"{name} is {host}" + (f" (aliases: {', '.join(aliases)})" if aliases else "")
        else:
            answer = _forward(name, ctx)
    except TimeoutError:
        return f"FAIL: {name}: the resolver did not answer within {ctx.timeout:g} s"
    except (socket.gaierror, socket.herror) as exc:
        return f"FAIL: {name} does not resolve: {exc.strerror}"
    return f"OK: {answer} ({(time.perf_counter() - started) * 1000:.0f} ms)"


def _forward(name: str, ctx: ToolContext) -> str:
    infos = _with_timeout(
        lambda: socket.getaddrinfo(name, None, type=socket.SOCK_STREAM, flags=socket.AI_CANONNAME),
        ctx.remaining(),
    )
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    canonical = next((info[3] for info in infos if info[3]), "")
    alias = f" (canonical name {canonical})" if canonical and canonical != name else ""
    return f"{name}{alias} resolves to {', '.join(addresses)}"


def _with_timeout(func: Callable[[], T], timeout: float) -> T:
    """Run a blocking call (the resolver has no timeout of its own) and give up after ``timeout``."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = func()
        except BaseException as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(max(0.0, timeout))
    if worker.is_alive():
        raise TimeoutError
    if "error" in outcome:
        raise outcome["error"]
    value: T = outcome["value"]
    return value


def network_tools() -> list[FunctionTool[Any]]:
    return [http_check, tcp_check, dns_lookup]
