"""Who may use the dashboard, and from where (docs/dashboard.rst, "Safety rules").

Three checks, in this order, before a request reaches the backend: the token (bearer header
or the login cookie), read-only mode for state-changing requests, and the same-origin rule
for state-changing requests (a page on another site cannot make a browser act).
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, Iterable
from urllib.parse import quote, urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

__all__ = ["TOKEN_COOKIE", "Guard", "check_bind", "safe_next"]

TOKEN_COOKIE = "trioqueue_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

Handler = Callable[[Request], Awaitable[Response]]


def check_bind(host: str, token: str | None) -> None:
    """Refuse to serve on a non-loopback address without a token (docs/dashboard.rst).

    Raises:
        ValueError: ``host`` is not a loopback address and ``token`` is empty.
    """
    if token:
        return
    if host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(
            f"refusing to serve the dashboard on {host!r} without a token: "
            "bind to a loopback address or set a token (TRIOQUEUE_DASHBOARD_TOKEN)"
        )


def error(status: int, message: str) -> JSONResponse:
    """The API's one-line refusal."""
    return JSONResponse({"error": message}, status_code=status)


def safe_next(value: str | None) -> str:
    """A redirect target that stays on this site: a path, never ``//host`` or a URL."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return value


class Guard:
    """The token, read-only and same-origin checks, wrapped around endpoints."""

    def __init__(
        self, *, token: str | None, read_only: bool, allowed_origins: Iterable[str] | None
    ) -> None:
        self.token = token or None
        self.read_only = read_only
        self.allowed = frozenset(o.rstrip("/") for o in (allowed_origins or ()))

    def token_matches(self, given: str | None) -> bool:
        """Constant-time comparison with the configured token."""
        if self.token is None or given is None:
            return False
        return hmac.compare_digest(given.encode(), self.token.encode())

    def authorised(self, request: Request) -> bool:
        if self.token is None:
            return True
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() == "bearer" and self.token_matches(given.strip()):
            return True
        return self.token_matches(request.cookies.get(TOKEN_COOKIE))

    def same_site(self, request: Request) -> bool:
        origin = request.headers.get("origin")
        if origin is None:
            return request.headers.get("sec-fetch-site") == "same-origin"
        if origin.rstrip("/") in self.allowed:
            return True
        host = request.headers.get("host")
        return host is not None and (urlsplit(origin).netloc or None) == host

    def refusal(self, request: Request) -> tuple[int, str] | None:
        """Why a request is refused (status, message), or None when it may go on."""
        if not self.authorised(request):
            return 401, "a valid token is required (Authorization: Bearer ... or log in)"
        if request.method not in SAFE_METHODS:
            if self.read_only:
                return 403, "the dashboard is read-only"
            if not self.same_site(request):
                return 403, "cross-site request refused (Origin does not match)"
        return None

    def api(self, handler: Handler) -> Handler:
        """An API endpoint: refusals are JSON (401, 403)."""

        async def endpoint(request: Request) -> Response:
            refused = self.refusal(request)
            if refused is not None:
                return error(*refused)
            return await handler(request)

        return endpoint

    def page(self, handler: Handler) -> Handler:
        """An HTML endpoint: without the token, a redirect to the login form."""

        async def endpoint(request: Request) -> Response:
            refused = self.refusal(request)
            if refused is None:
                return await handler(request)
            status, message = refused
            if status == 401 and request.method in SAFE_METHODS:
                target = request.url.path
                if request.url.query:
                    target += "?" + request.url.query
                return RedirectResponse(f"/login?next={quote(target)}", status_code=303)
            return Response(message + "\n", status_code=status, media_type="text/plain")

        return endpoint

    def login_cookie(self, response: Response) -> None:
        """Set the token cookie: HttpOnly (no script reads it) and SameSite=Strict (no
        other site's request carries it)."""
        assert self.token is not None
        response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="strict", path="/")
