"""Reachability checks: HTTP health, TCP port, DNS lookup.

A check that ran answers ``OK: ...`` or ``FAIL: ...`` (not a tool error: a failing service is a
finding); bad arguments and hosts the egress policy refuses (``tools.egress``) are ``Error: ...``.
Under ``CHATOPS_EGRESS_UNLISTED=approve`` a check of an unlisted host is a mutating call that
waits for a card (``tools.egress_approval``), and the approved one reaches exactly that host.
Latencies are decoration (``stable_output`` leaves them out), so loop detection sees a repeated
finding as repeated.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import httpx
from pydantic import BaseModel, ConfigDict, Field

from agent.tooling import ToolCategory, ToolResult
from tools import http_client
from tools.base import FunctionTool, ToolContext
from tools.egress import Destination, EgressPolicy, parse_address
from tools.egress_approval import categorizer, policy_for
from tools.placement import WORKER
from tools.text import shorten

_HOST_PATTERN = r"^[A-Za-z0-9._:\[\]-]+$"
_BODY_EXCERPT_CHARS = 300
ArgsT = TypeVar("ArgsT", bound=BaseModel)


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


def network_tools(egress: EgressPolicy) -> list[FunctionTool[Any]]:
    """``http_check``, ``tcp_check`` and ``dns_lookup``, reaching only what ``egress`` allows."""
    return [
        _network_tool(
            egress,
            _http_check,
            HttpCheckArgs,
            _http_destination,
            name="http_check",
            description="Check a URL: status, latency, and optionally whether the body contains some text.",
            timeout=15,
        ),
        _network_tool(
            egress,
            _tcp_check,
            TcpCheckArgs,
            _tcp_destination,
            name="tcp_check",
            description="Check whether a TCP port accepts connections.",
            timeout=10,
        ),
        _network_tool(
            egress,
            _dns_lookup,
            DnsLookupArgs,
            _dns_destination,
            name="dns_lookup",
            description="Resolve a host name to its addresses (system resolver), or an IP address to its name.",
            timeout=10,
        ),
    ]


def _network_tool(
    egress: EgressPolicy,
    check: Callable[[ArgsT, ToolContext, EgressPolicy], ToolResult],
    args_model: type[ArgsT],
    destination_of: Callable[[ArgsT], Destination | None],
    *,
    name: str,
    description: str,
    timeout: float,
) -> FunctionTool[ArgsT]:
    """A read-only check of ``destination_of(args)``: a call to an unlisted destination is raised to
    a mutating one (``categorizer``), and its approved execution connects through ``policy_for``."""

    def run(args: ArgsT, ctx: ToolContext) -> ToolResult:
        return check(args, ctx, policy_for(egress, destination_of(args), ctx))

    return FunctionTool(
        run,
        args_model,
        name=name,
        description=description,
        category=ToolCategory.READ_ONLY,
        parallel=True,
        timeout=timeout,
        categorize=categorizer(egress, destination_of),
        placement=WORKER,  # it reaches the network from the worker, through the egress policy
    )


# Where each call goes, from its arguments alone (nothing resolved): what approve mode judges, and
# what an approved execution may reach.


def _http_destination(args: HttpCheckArgs) -> Destination | None:
    return http_client.url_destination(args.url)


def _tcp_destination(args: TcpCheckArgs) -> Destination:
    return Destination.of(args.host, args.port)


def _dns_destination(args: DnsLookupArgs) -> Destination:
    return Destination.of(args.name)  # a lookup: no port


def _timed(line: str, elapsed_ms: float, template: str = "{line} ({ms:.0f} ms)") -> ToolResult:
    """A result whose latency is decoration: loop detection hashes the line without it."""
    return ToolResult(output=template.format(line=line, ms=elapsed_ms), stable_output=line)


def _http_check(args: HttpCheckArgs, ctx: ToolContext, egress: EgressPolicy) -> ToolResult:
    http_client.check_url(args.url)
    target = f"{args.method} {args.url}"
    timeout = max(0.1, ctx.remaining())
    try:
        response = http_client.request(
            args.method, args.url, timeout=timeout, egress=egress, follow_redirects=args.follow_redirects
        )
    except httpx.HTTPError as exc:
        return ToolResult(f"FAIL: {target}: {http_client.describe_http_error(exc, ctx.timeout)}")
    summary = f"{target} -> {response.status} {response.reason}"
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
    verdict = "FAIL" if problems else "OK"
    notes = f" ({'; '.join(problems + details)})" if problems or details else ""
    excerpt = ""
    if problems and response.body.strip():
        excerpt = f"\nbody: {shorten(' '.join(response.body.split()), _BODY_EXCERPT_CHARS)}"
    latency = f" in {response.elapsed * 1000:.0f} ms"
    return ToolResult(
        output=f"{verdict}: {summary}{latency}{notes}{excerpt}",
        stable_output=f"{verdict}: {summary}{notes}{excerpt}",
    )


def _tcp_check(args: TcpCheckArgs, ctx: ToolContext, egress: EgressPolicy) -> ToolResult:
    host = args.host.strip("[]")
    target = f"{host}:{args.port}"
    started = time.perf_counter()
    try:
        addresses = egress.vet(host, args.port, max(0.1, ctx.remaining()))
    except TimeoutError:
        return ToolResult(f"FAIL: {target}: the resolver did not answer within {ctx.timeout:g} s")
    except socket.gaierror as exc:
        return ToolResult(f"FAIL: {target}: cannot resolve {host}: {exc.strerror}")
    failure = ""
    for address in addresses:  # only vetted addresses: the name is never resolved again
        try:
            with socket.create_connection((address, args.port), timeout=max(0.1, ctx.remaining())):
                pass
        except TimeoutError:
            failure = f"no answer within {ctx.timeout:g} s (filtered or down)"
        except OSError as exc:
            failure = str(exc.strerror or exc)
        else:
            via = f" ({address})" if address != host else ""
            elapsed = (time.perf_counter() - started) * 1000
            return _timed(f"OK: {target}{via} accepts TCP connections", elapsed)
        if ctx.expired():
            break
    return ToolResult(f"FAIL: {target}: {failure}")


def _dns_lookup(args: DnsLookupArgs, ctx: ToolContext, egress: EgressPolicy) -> ToolResult:
    name = args.name.strip("[]")
    # Checked before any query leaves: the query itself would carry a name built from log text.
    egress.check_lookup(name)
    started = time.perf_counter()
    try:
        if parse_address(name) is not None:
            host, aliases = egress.resolver.reverse(name, ctx.remaining())
            answer = f"{name} is {host}" + (f" (aliases: {', '.join(aliases)})" if aliases else "")
        else:
            resolution = egress.resolver.resolve(name, ctx.remaining())
            canonical = resolution.canonical_name
            alias = f" (canonical name {canonical})" if canonical and canonical != name else ""
            answer = f"{name}{alias} resolves to {', '.join(resolution.addresses)}"
    except TimeoutError:
        return ToolResult(f"FAIL: {name}: the resolver did not answer within {ctx.timeout:g} s")
    except (socket.gaierror, socket.herror) as exc:
        return ToolResult(f"FAIL: {name} does not resolve: {exc.strerror}")
    return _timed(f"OK: {answer}", (time.perf_counter() - started) * 1000)
