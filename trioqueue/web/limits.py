"""Request bodies, bounded in size and in time (docs/dashboard.rst, "Safety rules").

The dashboard's bodies are small (a login form, a bulk action of at most 1,000 ids), so a body
past ``max_bytes`` is refused with 413 while it is read: at once when ``Content-Length`` says
so, else as soon as the chunks read so far pass the limit (chunked bodies have no length). A
body that has not arrived in whole ``timeout`` seconds after the request began is refused with
408: a client dripping a byte at a time cannot hold a request (and its memory) open for ever.
Both happen in an ASGI middleware that wraps ``receive``, before any endpoint runs, so before
the token is checked: an unauthenticated ``POST /login`` is bounded like the rest.

hypercorn's own ``read_timeout`` is no help here: it bounds each read of the connection, so a
slow drip passes it, and it would cut every open event stream, whose client sends nothing.
"""

from __future__ import annotations

from math import inf, isfinite

import trio
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from trioqueue.web.auth import refusal

__all__ = ["DEFAULT_BODY_TIMEOUT", "DEFAULT_MAX_BODY", "BodyLimit", "check_body_limits"]

DEFAULT_MAX_BODY = 64 * 1024
DEFAULT_BODY_TIMEOUT = 10.0


def check_body_limits(max_body: int, body_timeout: float) -> None:
    """Refuse bounds no body can meet, or none at all, when the app is made: Starlette builds
    its middleware at the first request, where a ValueError would be a 500 each time.

    Raises:
        ValueError: ``max_body`` is not a whole number of at least 0 (a bool is not), or
            ``body_timeout`` is not a positive finite number of seconds.
    """
    if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 0:
        raise ValueError(f"max_body must be a whole number of bytes, at least 0, not {max_body!r}")
    if not (isinstance(body_timeout, int | float) and isfinite(body_timeout) and body_timeout > 0):
        raise ValueError(
            f"body_timeout must be a positive finite number of seconds, not {body_timeout!r}"
        )


class BodyRefused(Exception):
    """Raised from ``receive`` into the endpoint, caught by :class:`BodyLimit`."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class BodyLimit:
    """An ASGI middleware: 413 past ``max_bytes``, 408 past ``timeout`` seconds."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, timeout: float) -> None:
        check_body_limits(max_bytes, timeout)
        self.app = app
        self.max_bytes = max_bytes
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_bytes:
            await _refusal(scope, 413, self._too_large())(scope, receive, send)
            return
        deadline = trio.current_time() + self.timeout if _may_have_body(scope, headers) else inf
        reader = _Reader(self, receive, deadline)
        started = False

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, reader.receive, watched_send)
        except BodyRefused as exc:
            if started:
                raise
            await _refusal(scope, exc.status, exc.message)(scope, receive, send)

    def _too_large(self) -> str:
        return f"the request body is larger than {self.max_bytes} bytes"


def _may_have_body(scope: Scope, headers: Headers) -> bool:
    """Whether a body may still come: not for a ``GET`` that declares none, whose ``receive``
    an event stream calls only to learn of the disconnect (the deadline would end it)."""
    if "transfer-encoding" in headers:
        return True
    length = headers.get("content-length")
    if length is not None:
        return length != "0"
    return scope.get("method") not in ("GET", "HEAD", "OPTIONS")


class _Reader:
    """``receive`` for one request: counts the body and bounds the time until it is whole;
    after that, messages (the disconnect an event stream waits for) pass untouched."""

    def __init__(self, limit: BodyLimit, receive: Receive, deadline: float) -> None:
        self.limit = limit
        self.inner = receive
        self.deadline = deadline
        self.read = 0
        self.whole = False

    async def receive(self) -> Message:
        if self.whole:
            return await self.inner()
        with trio.move_on_at(self.deadline):
            message = await self.inner()
            self._count(message)
            return message
        raise BodyRefused(408, f"the request body did not arrive within {self.limit.timeout:g} s")

    def _count(self, message: Message) -> None:
        if message["type"] != "http.request":
            self.whole = True  # a disconnect: nothing more comes
            return
        self.read += len(message.get("body", b""))
        if self.read > self.limit.max_bytes:
            raise BodyRefused(413, self.limit._too_large())
        self.whole = not message.get("more_body", False)


def _refusal(scope: Scope, status: int, message: str) -> Response:
    """JSON for the API, plain text elsewhere; the connection closes (the rest of the
    body is not read)."""
    return refusal(str(scope.get("path", "")), status, message, {"connection": "close"})
