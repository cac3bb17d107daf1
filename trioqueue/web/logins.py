"""Throttled logins over HTTP (docs/dashboard.rst, "Safety rules"): the ASGI side of
:mod:`trioqueue.web.throttle`.

A login attempt is a request that offers a token: ``POST /login`` (the form) or any request
with an ``Authorization`` header (``Bearer``). While its client is throttled, such a request
gets 429 with ``Retry-After`` before the token is even compared, so a guesser learns nothing
from it; otherwise the app answers, and its 401 counts as a failure. Nothing counts as a
success: a right token does not empty the bucket, which drains on its own (a status other than
401 cannot tell a right token from a request refused before its token was looked at, and a
guesser could send those between guesses). Requests that offer no token (a page visit, a request with the session cookie) are
never throttled: someone who is locked out of guessing can still use a session they have.

The client is the peer address hypercorn reports. Behind a proxy, every user shares the
proxy's address, so a guesser there locks the others out of logging in for a while (not out
of their sessions).
"""

from __future__ import annotations

import trio
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from trioqueue.web.auth import refusal
from trioqueue.web.throttle import LoginThrottle, client_key

__all__ = ["LoginLimit"]


class LoginLimit:
    """An ASGI middleware: 429 for a client with too many wrong tokens."""

    def __init__(self, app: ASGIApp, *, throttle: LoginThrottle) -> None:
        self.app = app
        self.throttle = throttle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _offers_token(scope):
            await self.app(scope, receive, send)
            return
        client = client_key((scope.get("client") or (None, 0))[0])
        wait = self.throttle.retry_after(client, trio.current_time())
        if wait is not None:
            await _too_many(scope, wait)(scope, receive, send)
            return

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 401:
                self.throttle.failed(client, trio.current_time())
            await send(message)

        await self.app(scope, receive, counting_send)


def _offers_token(scope: Scope) -> bool:
    if scope.get("method") == "POST" and scope.get("path") == "/login":
        return True
    return "authorization" in Headers(scope=scope)


def _too_many(scope: Scope, wait: int) -> Response:
    message = f"too many wrong tokens from this address: try again in {wait} s"
    return refusal(str(scope.get("path", "")), 429, message, {"retry-after": str(wait)})
