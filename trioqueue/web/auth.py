"""Who may use the dashboard, and from where (docs/dashboard.rst, "Safety rules").

Three checks, in this order, before a request reaches the backend: the token (bearer header,
or the session cookie that logging in with it gave), read-only mode for state-changing
requests, and the same-origin rule for state-changing requests (a page on another site cannot
make a browser act). The cookie never holds the token: it names a session
(:mod:`trioqueue.web.sessions`) that logging out ends. The checks that come before these (the
``Host``, the body's size, the login throttle) are middlewares, see
:func:`trioqueue.web.app.create_app`.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, Iterable
from urllib.parse import quote

import trio
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response

from trioqueue.web.hosts import check_allowed_origins, same_origin
from trioqueue.web.sessions import Sessions

__all__ = [
    "MIN_TOKEN_LENGTH",
    "OLD_TOKEN_COOKIE",
    "SESSION_COOKIE",
    "Guard",
    "check_bind",
    "check_token",
    "refusal",
    "safe_next",
]

SESSION_COOKIE = "trioqueue_session"
#: The cookie that held the raw token before sessions; logging out clears it too.
OLD_TOKEN_COOKIE = "trioqueue_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: ``Sec-Fetch-Site`` of a request the dashboard's own pages, or the user, made.
OWN_SITE = frozenset({"same-origin", "none"})
#: 22 characters of ``secrets.token_urlsafe`` carry 132 bits; 32 hex digits, 128.
MIN_TOKEN_LENGTH = 22
MAKE_TOKEN = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"

Handler = Callable[[Request], Awaitable[Response]]


def check_token(token: str | None) -> None:
    """Refuse a token a guesser could find (docs/dashboard.rst, "Safety rules"): shorter than
    :data:`MIN_TOKEN_LENGTH` characters, or with whitespace or control characters (which a
    ``Bearer`` header cannot carry at its ends: such a token could never be sent), or with
    characters outside ASCII (a client sends them as UTF-8, a header is read as Latin-1:
    it would never match as ``Bearer``). None (no token at all) passes.

    Raises:
        ValueError: one line saying how long a token must be and how to make one.
    """
    if token is None:
        return
    plain = token.isascii() and token.isprintable() and " " not in token
    if len(token) < MIN_TOKEN_LENGTH or not plain:
        raise ValueError(
            f"the dashboard token must be at least {MIN_TOKEN_LENGTH} characters (128 bits) "
            f"of random ASCII without spaces or control characters (this one has {len(token)}"
            f"{'' if plain else ', not all printable ASCII'}); make one with: {MAKE_TOKEN}"
        )


def check_bind(host: str, token: str | None) -> None:
    """Refuse to serve on a non-loopback address without a token, and a weak token anywhere
    (docs/dashboard.rst).

    Raises:
        ValueError: ``host`` is not a loopback address and ``token`` is empty, or ``token``
            is too weak (:func:`check_token`).
    """
    check_token(token or None)
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


def refusal(
    path: str, status: int, message: str, headers: dict[str, str] | None = None
) -> Response:
    """A one-line refusal for a request to ``path``, before or outside any endpoint: JSON
    (:func:`error`) for the API and ``/metrics``, plain text for the pages."""
    if path.startswith(("/api/", "/metrics")):
        return JSONResponse({"error": message}, status_code=status, headers=headers)
    return PlainTextResponse(message + "\n", status_code=status, headers=headers)


def safe_next(value: str | None) -> str:
    """A redirect target that stays on this site: a plain path, else ``/``.

    Plain: it starts with one ``/`` and holds only printable ASCII without spaces or
    backslashes. Browsers drop tabs and newlines from a URL, so ``/\t/attacker.test`` is
    ``//attacker.test`` to them, another site; CR and LF would break the header it goes in.
    """
    if (
        not value
        or not value.startswith("/")
        or value.startswith("//")
        or not all("!" <= c <= "~" and c != "\\" for c in value)
    ):
        return "/"
    return value


class Guard:
    """The token, read-only and same-origin checks, wrapped around endpoints."""

    def __init__(
        self,
        *,
        token: str | None,
        read_only: bool,
        allowed_origins: Iterable[str] | None,
        sessions: Sessions | None = None,
    ) -> None:
        self.token = token or None
        self.read_only = read_only
        self.allowed = check_allowed_origins(allowed_origins)
        # "is None", not "or": a Sessions is falsy while empty, and a shared one must stay shared.
        self.sessions = sessions if sessions is not None else Sessions()

    def token_matches(self, given: str | None) -> bool:
        """Constant-time comparison with the configured token."""
        if self.token is None or given is None:
            return False
        return hmac.compare_digest(given.encode(), self.token.encode())

    def authorised(self, request: Request) -> bool:
        if self.token is None:
            return True
        header = request.headers.get("authorization")
        if header is not None:
            scheme, _, given = header.partition(" ")
            return scheme.lower() == "bearer" and self.token_matches(given.strip())
        return self.sessions.valid(request.cookies.get(SESSION_COOKIE), trio.current_time())

    def same_site(self, request: Request) -> bool:
        origin = request.headers.get("origin")
        if origin is None:
            return request.headers.get("sec-fetch-site") == "same-origin"
        return same_origin(origin, request.url.scheme, request.headers.get("host"), self.allowed)

    def other_site_read(self, request: Request) -> bool:
        """Whether a read was sent by another site's page, through its visitor's browser.

        Without CORS that page reads nothing back, but the request would still run (a list
        read, a metrics sample, an event stream holding one of the client's slots). The
        browser says where a request comes from in ``Sec-Fetch-Site`` (Fetch Metadata):
        only the dashboard's own pages (``same-origin``) and the user (``none``: a typed
        address, a bookmark) may read, and other sites only by a top-level navigation (a
        link followed). A browser without Fetch Metadata sends ``Origin`` on another site's
        ``fetch``, which must then be this site."""
        headers = request.headers
        site = headers.get("sec-fetch-site")
        if site is not None and site not in OWN_SITE:
            navigation = headers.get("sec-fetch-mode") == "navigate"
            return not (navigation and headers.get("sec-fetch-dest") in ("document", None))
        return "origin" in headers and not self.same_site(request)

    def refusal(self, request: Request) -> tuple[int, str] | None:
        """Why a request is refused (status, message), or None when it may go on."""
        if request.method in SAFE_METHODS and self.other_site_read(request):
            return 403, "cross-site request refused (another site's page may not read this one)"
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
        """An HTML endpoint: without the token, a redirect to the login form (a wrong
        ``Bearer`` header gets its 401, which the login throttle counts)."""

        async def endpoint(request: Request) -> Response:
            refused = self.refusal(request)
            if refused is None:
                return await handler(request)
            status, message = refused
            offered = "authorization" in request.headers
            if status == 401 and request.method in SAFE_METHODS and not offered:
                target = request.url.path
                if request.url.query:
                    target += "?" + request.url.query
                return RedirectResponse(f"/login?next={quote(target)}", status_code=303)
            return Response(message + "\n", status_code=status, media_type="text/plain")

        return endpoint

    def log_in(self, request: Request, response: Response) -> None:
        """Start a session and set its cookie: HttpOnly (no script reads it), SameSite=Strict
        (no other site's request carries it), Secure when served over https."""
        cookie = self.sessions.start(trio.current_time())
        response.set_cookie(
            SESSION_COOKIE,
            cookie,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )

    def log_out(self, request: Request, response: Response) -> None:
        """End the request's session, and clear its cookie (and a token cookie left by an
        older version)."""
        self.sessions.end(request.cookies.get(SESSION_COOKIE))
        for name in (SESSION_COOKIE, OLD_TOKEN_COOKIE):
            response.delete_cookie(name, path="/", httponly=True, samesite="strict")
