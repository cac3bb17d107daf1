"""The security headers on every response (docs/dashboard.rst, "Safety rules").

- ``Content-Security-Policy``: scripts, styles, images and connections from this site only,
  no inline script or style (the templates have none: every script and style is a static
  file), forms post only here, and ``frame-ancestors 'none'``.
- ``X-Frame-Options: DENY`` too, for browsers older than ``frame-ancestors``: a page of the
  dashboard inside another site's frame (even a sandboxed one, whose scripts are off and with
  them the confirmation dialogs) could be clicked on by a user who cannot see it.
- ``X-Content-Type-Options: nosniff`` (the JSON API too: a JSON body is never run as script),
  ``Referrer-Policy: same-origin`` (job ids and filters in URLs do not leave the site).
- ``Cache-Control: no-store`` on everything but the static files: pages and API answers hold
  job data, which must not stay in a shared cache or on a disk after logout.

A middleware over the whole app, so refusals (400, 401, 413, 429) carry them too.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CONTENT_SECURITY_POLICY", "SecurityHeaders"]

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "form-action 'self'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    ]
)
ALWAYS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
}
STATIC_PREFIX = "/static/"


class SecurityHeaders:
    """An ASGI middleware adding the headers above to every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        data = not str(scope.get("path", "")).startswith(STATIC_PREFIX)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in ALWAYS.items():
                    headers[name] = value
                if data:
                    headers["cache-control"] = "no-store"
            await send(message)

        await self.app(scope, receive, send_with_headers)
