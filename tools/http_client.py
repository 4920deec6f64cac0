"""One bounded HTTP request, shared by ``http_check`` and catalog ``http`` tools.

Every connection goes through the egress policy (``tools.egress``): the transport below resolves
the host once, checks the name and every address, and connects to a vetted address (TLS still
verifies the certificate against the host name). Redirects open new connections, so each hop is
checked the same way. The whole exchange, headers trickling in included, ends at one deadline.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

from tools.egress import Destination, EgressPolicy
from tools.errors import ToolCallError

DEFAULT_MAX_BODY_BYTES = 64 * 1024
MAX_REDIRECTS = 5
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class HttpResponse:
    status: int
    reason: str
    elapsed: float
    """Seconds until the response headers arrived."""
    body: str
    body_bytes: int
    """How many body bytes were read (at most the limit)."""
    truncated: bool
    location: str | None


def check_url(url: str) -> None:
    """Only absolute http(s) URLs with a host; raises ``ToolCallError`` otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ToolCallError(f"not an http(s) URL with a host: {url!r}")


def url_destination(url: str) -> Destination | None:
    """The host and port a request to ``url`` connects to, read as httpx reads it (``None``: no
    http(s) URL with a host). The same parse the transport's connection gets, so an approval for
    this destination is an approval for the connection the request makes."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError):
        return None
    default = _DEFAULT_PORTS.get(parsed.scheme)
    port = parsed.port or default
    if port is None or not parsed.raw_host or not 0 < port < 65536:
        return None
    return Destination.of(parsed.raw_host.decode("ascii", errors="replace"), port)


def request(
    method: str,
    url: str,
    *,
    timeout: float,
    egress: EgressPolicy,
    headers: Mapping[str, str] | None = None,
    body: str | None = None,
    follow_redirects: bool = False,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> HttpResponse:
    """Send one request through ``egress`` and read at most ``max_body_bytes`` of the answer.

    Proxy variables are ignored (``trust_env=False``): health checks target hosts directly.
    A host the policy refuses raises ``EgressRefusedError`` (a ``ToolCallError``); network
    failures raise ``httpx.HTTPError`` for the caller to describe. ``timeout`` bounds the whole
    exchange, not each read.
    """
    check_url(url)
    started = time.perf_counter()
    transport = VettedTransport(egress, deadline=time.monotonic() + timeout)
    with (
        httpx.Client(
            transport=transport,
            timeout=timeout,
            follow_redirects=follow_redirects,
            max_redirects=MAX_REDIRECTS,
            trust_env=False,
        ) as client,
        client.stream(method, url, headers=dict(headers or {}), content=body) as response,
    ):
        elapsed = time.perf_counter() - started
        collected = bytearray()
        truncated = False
        for chunk in response.iter_bytes():
            collected += chunk
            if len(collected) >= max_body_bytes:
                truncated = True
                del collected[max_body_bytes:]
                break
        encoding = response.encoding or "utf-8"
        return HttpResponse(
            status=response.status_code,
            reason=response.reason_phrase,
            elapsed=elapsed,
            body=collected.decode(encoding, errors="replace"),
            body_bytes=len(collected),
            truncated=truncated,
            location=response.headers.get("location"),
        )


def describe_http_error(exc: httpx.HTTPError, timeout: float) -> str:
    """A short reason a person reads: refused, timed out, TLS, DNS..."""
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect: {exc}"
    if isinstance(exc, httpx.TooManyRedirects):
        return f"more than {MAX_REDIRECTS} redirects"
    return f"{type(exc).__name__}: {exc}"


# -- the transport: connect only to vetted addresses, within one deadline ---------------------------


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every read and write waits at most until the request's deadline."""

    def __init__(self, inner: httpcore.NetworkStream, deadline: float) -> None:
        self._inner = inner
        self._deadline = deadline

    def _left(self, timeout: float | None, error: type[Exception]) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise error("the request's time is up")
        return left if timeout is None else min(timeout, left)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        # server_hostname is the URL's host name, not the address: the certificate is checked for it.
        left = self._left(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, left), self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _VettedBackend(httpcore.NetworkBackend):
    """Resolves a host once through the egress policy and connects to one of its vetted addresses."""

    def __init__(self, egress: EgressPolicy, deadline: float) -> None:
        self._egress = egress
        self._deadline = deadline
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        left = max(0.0, self._deadline - time.monotonic())
        wait = left if timeout is None else min(timeout, left)
        try:
            addresses = self._egress.vet(host, port, wait)
        except socket.gaierror as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc.strerror}") from None
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"the resolver did not answer for {host}") from None
        failure: Exception | None = None
        for address in addresses:
            try:
                stream = self._inner.connect_tcp(
                    address,
                    port,
                    timeout=max(0.001, self._deadline - time.monotonic()),
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
                continue
            return _DeadlineStream(stream, self._deadline)
        assert failure is not None  # vet returns at least one address
        raise failure

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are not reachable through tools")


# httpcore's errors as httpx's, so callers handle one family (the order matters: subclasses first).
_ERRORS: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


@contextlib.contextmanager
def _as_httpx_errors() -> Iterator[None]:
    try:
        yield
    except tuple(core for core, _ in _ERRORS) as exc:
        mapped = next(ours for core, ours in _ERRORS if isinstance(exc, core))
        raise mapped(str(exc)) from exc


class _Body(httpx.SyncByteStream):
    def __init__(self, stream: Iterable[bytes]) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx_errors():
            yield from self._stream

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            close()


class VettedTransport(httpx.BaseTransport):
    """An httpx transport whose connections are all checked by an ``EgressPolicy``."""

    def __init__(self, egress: EgressPolicy, *, deadline: float) -> None:
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            network_backend=_VettedBackend(egress, deadline),
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.SyncByteStream)
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx_errors():
            response = self._pool.handle_request(core_request)
        assert isinstance(response.stream, Iterable)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response.stream),
            extensions=response.extensions,
        )

    def close(self) -> None:
        self._pool.close()
