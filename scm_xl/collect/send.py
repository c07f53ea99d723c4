"""The one way the collector sends a request: the `Sender` interface, and the senders it opens.

Every request of a run, the pre-flight included, goes `sender.prepare(request)` once per
experiment (whatever can be built before the clock starts), then `sender.send(prepared)` per
request, which returns a streaming `httpx.Response` (its body not yet read). Production and
tests go through `open_senders`; a test or a benchmark that wants another transport passes
its own factory of the same shape to `run_collection(senders=...)`.

    FastSender   scm-xl's HTTP/1.1 transport (collect/transport.py), no client layer
    HttpxSender  an httpx.AsyncClient: httpx's own transport, proxies honoured
"""

from __future__ import annotations

import http.cookiejar
import math
import urllib.request
from typing import Any, Callable, Protocol
from urllib.parse import urlsplit

import httpx

from scm_xl.collect.config import CollectConfig, is_loopback_url
from scm_xl.collect.transport import FastTransport


class Sender(Protocol):
    async def prepare(self, request: httpx.Request) -> Any:
        """What `send` needs, built once (before an experiment's clock starts)."""

    async def send(self, prepared: Any) -> httpx.Response:
        """Send once; the response's body is streamed (read it, then `aclose` it)."""

    async def aclose(self) -> None: ...


# (config, the most concurrent streams) -> senders; slots are sharded over them round-robin.
SenderFactory = Callable[[CollectConfig, int], "list[Sender]"]


class FastSender:
    """Straight to FastTransport with bytes serialized once per experiment: httpx.AsyncClient's
    auth, redirect, cookie and logging layers do nothing for a load generator but cost about
    half the CPU of a request, and serializing it each time the rest."""

    def __init__(self, transport: FastTransport) -> None:
        self.transport = transport

    async def prepare(self, request: httpx.Request) -> Any:
        return await FastTransport.prepare(request)

    async def send(self, prepared: Any) -> httpx.Response:
        return await self.transport.send_prepared(prepared)

    async def aclose(self) -> None:
        await self.transport.aclose()


class HttpxSender:
    """An httpx.AsyncClient (any transport; proxies from the environment when it trusts it)."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def prepare(self, request: httpx.Request) -> Any:
        return request  # httpx reads a request only when sending: one object serves them all

    async def send(self, prepared: Any) -> httpx.Response:
        return await self.client.send(prepared, stream=True)

    async def aclose(self) -> None:
        await self.client.aclose()


class _NoCookies(http.cookiejar.CookieJar):
    """A load generator keeps no cookies; parsing them costs CPU on every response."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None


def proxied(url: str) -> bool:
    """Whether the environment routes `url` through a proxy (HTTPS_PROXY, ALL_PROXY, NO_PROXY...)."""
    proxies = urllib.request.getproxies()
    host = urlsplit(url).hostname or ""
    scheme = urlsplit(url).scheme
    return bool(proxies.get(scheme) or proxies.get("all")) and not urllib.request.proxy_bypass(host)


def sender_count(config: CollectConfig, max_concurrency: int) -> int:
    """Streams are sharded over several senders: one httpx.AsyncClient stalls beyond about
    128 concurrent streams (../shared/notes/load-clients.md)."""
    return max(1, min(config.max_clients, math.ceil(max_concurrency / config.streams_per_client)))


def uses_fast_transport(config: CollectConfig) -> bool:
    """"auto" picks httpx's transport only when the environment sets a proxy for a remote URL."""
    if config.transport == "auto":
        return is_loopback_url(config.base_url) or not proxied(config.base_url)
    return config.transport == "fast"


def open_senders(config: CollectConfig, max_concurrency: int) -> list[Sender]:
    """The production senders for `config`: FastTransport, or httpx's own for proxies."""
    count = sender_count(config, max_concurrency)
    if uses_fast_transport(config):
        return [FastSender(FastTransport(ssl_context=config.ssl_context)) for _ in range(count)]
    loopback = is_loopback_url(config.base_url)
    per_client = math.ceil(max_concurrency / count) + 1
    # One SSL context for all clients: each costs milliseconds to build.
    ssl_context = config.ssl_context or httpx.create_ssl_context()
    return [HttpxSender(httpx.AsyncClient(
        limits=httpx.Limits(max_connections=per_client, max_keepalive_connections=per_client),
        timeout=httpx.Timeout(config.timeout_s, pool=None), verify=ssl_context,
        trust_env=not loopback,  # never send loopback traffic to a proxy
        cookies=_NoCookies(),
    )) for _ in range(count)]
