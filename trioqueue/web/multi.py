"""One dashboard over several databases: :func:`create_multi_app` (docs/dashboard.rst,
"Several databases").

Theory of operation. Each database gets the one-database app of :func:`create_app`, mounted
under its own prefix ``/db/NAME``: every page, API call and control of a database lives under
its prefix, so a URL says which database it reads or changes (a form left open in another tab
cannot act on a database switched to since). The pages know nothing of the prefix: they link
to absolute paths (``/jobs``). :class:`Prefixed` makes them right on the way out: in HTML
pages and live-event streams, every URL attribute holding a path of the site gets the prefix,
and so does a redirect's ``Location``; each page then says, at its top, which database it
reads. The root holds an overview listing each database and its queues, the login (one for
all: the apps share one table of sessions and one login throttle) and ``/healthz``.

Every rule of the one-database app holds under a prefix, because the mounted app is that app
with its own middleware: the ``Host`` check, the body bounds, the token or session, the
same-origin check of every state-changing request (the browser's ``Origin`` names a site, not
a path), read-only mode.
"""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from importlib.resources import files
from urllib.parse import quote

import trio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import trioqueue
from trioqueue.web.app import create_app
from trioqueue.web.auth import Guard, check_token
from trioqueue.web.headers import SecurityHeaders
from trioqueue.web.hosts import HostCheck, check_allowed_hosts
from trioqueue.web.limits import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_MAX_BODY,
    BodyLimit,
    check_body_limits,
)
from trioqueue.web.render import ROOT_DATABASES
from trioqueue.web.throttle import LoginThrottle
from trioqueue.web.visible import visible

__all__ = ["NAME_RULE", "Prefixed", "create_multi_app", "prefix_of"]

Backend = trioqueue.MemoryBackend | trioqueue.PostgresBackend

#: A database's name: it is part of its URLs, so it is of the characters a path keeps as they
#: are, and it is shown on every page of the database.
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,62}\Z")
NAME_RULE = "a letter, then up to 62 letters, digits, '_', '.' or '-'"


def prefix_of(name: str) -> str:
    """Where database ``name``'s pages live."""
    return f"/db/{name}"


def create_multi_app(
    backends: Mapping[str, Backend],
    *,
    read_only: bool = False,
    token: str | None = None,
    allowed_origins: Iterable[str] | None = None,
    events_interval: float = 1.0,
    allowed_hosts: Iterable[str] | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    login_throttle: LoginThrottle | None = None,
) -> Starlette:
    """The dashboard's ASGI app over several databases, each under ``/db/NAME``.

    Args:
        backends: ``{name: backend}``, in the order the overview lists them; the caller
            keeps them open. A name is part of the URLs: :data:`NAME_RULE`.
        read_only: as for :func:`~trioqueue.web.create_app`, and so are ``token``,
            ``allowed_origins``, ``events_interval``, ``allowed_hosts``, ``max_body``,
            ``body_timeout`` and ``login_throttle``, for every database alike. One login
            (one session cookie) serves them all, and wrong tokens count against one
            throttle, whichever database they were sent to.

    Raises:
        ValueError: no backend, a name that is not one (every bad name listed, each shown
            escaped), or any of :func:`~trioqueue.web.create_app`'s reasons.
    """
    _check_names(backends)
    check_token(token or None)
    hosts = check_allowed_hosts(allowed_hosts)
    check_body_limits(max_body, body_timeout)
    guard = Guard(token=token, read_only=read_only, allowed_origins=allowed_origins)
    sessions = guard.sessions
    throttle = login_throttle or LoginThrottle()
    apps: dict[str, Starlette] = {}
    for name, backend in backends.items():
        app = create_app(
            backend,
            read_only=read_only,
            token=token,
            allowed_origins=allowed_origins,
            events_interval=events_interval,
            allowed_hosts=allowed_hosts,
            max_body=max_body,
            body_timeout=body_timeout,
            login_throttle=throttle,
        )
        # One table of sessions for every database: a login at one is a login at all, and a
        # logout ends it everywhere. The app's endpoints read the guard's table per request.
        app.state.guard.sessions = sessions
        apps[name] = app
    first = next(iter(apps.values()))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # A mounted app's lifespan is not run by Starlette: each watches its backend's notices.
        async with AsyncExitStack() as stack:
            for each in apps.values():
                await stack.enter_async_context(each.router.lifespan_context(each))
            yield

    async def overview(request: Request) -> Response:
        return HTMLResponse(await _overview_html(backends, guard, request))

    async def healthz(request: Request) -> Response:
        answers = await _each_answers(backends)
        ok = all(answers.values())
        body = {
            "status": "ok" if ok else "unavailable",
            "databases": {name: "ok" if up else "unavailable" for name, up in answers.items()},
        }
        return JSONResponse(body, status_code=200 if ok else 503)

    static = StaticFiles(directory=str(files("trioqueue.web") / "static"))
    routes = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/", guard.page(overview), methods=["GET"]),
        # The login form and the logout are every database's: the first app's serve them,
        # at the root, where their navigation names the databases (_AtRoot).
        Route("/login", _AtRoot(first, backends), methods=["GET", "POST"]),
        Route("/logout", _AtRoot(first, backends), methods=["POST"]),
        Mount("/static", static, name="static"),
        *(Mount(prefix_of(name), Prefixed(app, name)) for name, app in apps.items()),
    ]
    middleware = [
        Middleware(SecurityHeaders),
        Middleware(HostCheck, hosts=hosts),
        Middleware(BodyLimit, max_bytes=max_body, timeout=body_timeout),
    ]
    multi = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    multi.state.guard = guard
    multi.state.apps = apps
    return multi


def _check_names(backends: Mapping[str, Backend]) -> None:
    if not backends:
        raise ValueError("create_multi_app needs at least one backend: {name: backend}")
    bad = [name for name in backends if not isinstance(name, str) or not _NAME.match(name)]
    if bad:
        shown = ", ".join(visible(repr(name)) for name in bad)
        raise ValueError(f"database names must be {NAME_RULE}; not {shown}")


async def _each_answers(backends: Mapping[str, Backend]) -> dict[str, bool]:
    """Whether each database answers a cheap read now (within 5 s), all at once."""
    answers = dict.fromkeys(backends, False)

    async def ask(name: str, backend: Backend) -> None:
        with trio.move_on_after(5):
            try:
                await backend.database_clock()
            except Exception:
                return
            answers[name] = True

    async with trio.open_nursery() as nursery:
        for name, backend in backends.items():
            nursery.start_soon(ask, name, backend)
    return answers


async def _queues_of(backend: Backend) -> dict[str, trioqueue.QueueStats] | str:
    """A database's queues, or why they cannot be read now (shown, escaped)."""
    try:
        with trio.fail_after(5):
            return await backend.queue_stats()
    except trio.TooSlowError:
        return "no answer within 5 s"
    except Exception as exc:
        return f"unavailable: {exc}"


async def _overview_html(backends: Mapping[str, Backend], guard: Guard, request: Request) -> str:
    """The overview: each database, its link, and its queues' counts."""
    found: dict[str, dict[str, trioqueue.QueueStats] | str] = {}

    async def read(name: str, backend: Backend) -> None:
        found[name] = await _queues_of(backend)

    async with trio.open_nursery() as nursery:
        for name, backend in backends.items():
            nursery.start_soon(read, name, backend)
    sections = [_database_html(name, found[name]) for name in backends]
    logout = ""
    if guard.token is not None and guard.authorised(request):
        logout = (
            '<form method="post" action="/logout" class="inline">'
            '<button type="submit" id="logout">Log out</button></form>'
        )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        "<title>trioqueue: databases</title>"
        '<link rel="stylesheet" href="/static/dashboard.css"></head>'
        f'<body><header><span class="brand">trioqueue</span> {logout}</header>'
        f"<main><h1>Databases</h1>{''.join(sections)}</main></body></html>"
    )


def _database_html(name: str, queues: dict[str, trioqueue.QueueStats] | str) -> str:
    shown = _text(name)
    link = f'<h2><a href="{prefix_of(name)}/" data-testid="database-link">{shown}</a></h2>'
    if isinstance(queues, str):
        return (
            f'<section class="card" data-database="{shown}">{link}<p>{_text(queues)}</p></section>'
        )
    if not queues:
        rows = '<tr><td colspan="3">no queues</td></tr>'
    else:
        rows = "".join(
            f'<tr data-testid="database-queue"><td><a href="{prefix_of(name)}/queues/'
            f'{_path_part(queue)}">{_text(queue)}</a></td>'
            f"<td>{stats.counts.get('ready', 0)}</td><td>{stats.counts.get('running', 0)}</td></tr>"
            for queue, stats in sorted(queues.items())
        )
    return (
        f'<section class="card" data-database="{shown}">{link}<table>'
        f"<tr><th>queue</th><th>ready</th><th>running</th></tr>{rows}</table></section>"
    )


def _text(value: str) -> str:
    """A string as HTML text: hidden characters as escapes, markup as text."""
    return html.escape(visible(value))


def _path_part(value: str) -> str:
    """A string as one segment of a path in an attribute: percent-encoded, then escaped."""
    return html.escape(quote(value, safe=""))


class _AtRoot:
    """A one-database app's page served at the multi app's root (the login form): the
    scope names the databases (:data:`~trioqueue.web.render.ROOT_DATABASES`), so the page's
    navigation links to the overview and to each database, not to pages of one database
    that the root does not have."""

    def __init__(self, app: ASGIApp, backends: Mapping[str, Backend]) -> None:
        self.app = app
        self.databases = tuple((name, prefix_of(name)) for name in backends)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app({**scope, ROOT_DATABASES: self.databases}, receive, send)


# -- the prefix ---------------------------------------------------------------------------

#: The attributes of the pages that hold a URL (htmx's among them).
_URL_ATTRIBUTE = re.compile(
    rb'(\s(?:href|src|action|formaction|hx-get|hx-post|hx-put|hx-patch|hx-delete|data-events)=")'
    rb"(/(?!/)[^\"]*)"
)


class Prefixed:
    """The one-database app ``app`` mounted at ``/db/NAME``: its site paths get the prefix on
    the way out (see the module's docstring), and each HTML page a line naming the database."""

    def __init__(self, app: ASGIApp, name: str) -> None:
        self.app = app
        self.name = name
        self.prefix = prefix_of(name).encode()
        label = _text(name)
        self.banner = (
            f'<div class="database-banner" data-testid="database-banner" data-database="{label}">'
            f'database <strong>{label}</strong> · <a href="/">all databases</a></div>'
        ).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.app(scope, receive, _Rewriter(self, send).send)

    def path(self, path: bytes) -> bytes:
        """``path`` under the prefix, unless it is there already."""
        if path == self.prefix or path.startswith(self.prefix + b"/"):
            return path
        return self.prefix + path

    def rewrite(self, body: bytes) -> bytes:
        return _URL_ATTRIBUTE.sub(lambda m: m.group(1) + self.path(m.group(2)), body)


class _Rewriter:
    """One response on its way out: the ``Location`` header; an HTML body whole (to insert
    the banner and set its length), an event stream chunk by chunk (each event is sent
    whole); anything else as it is."""

    def __init__(self, prefixed: Prefixed, send: Send) -> None:
        self.prefixed = prefixed
        self.inner = send
        self.start: Message | None = None
        self.kind = ""
        self.body = b""

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [self._header(key, value) for key, value in message.get("headers", [])]
            types = [value for key, value in headers if key.lower() == b"content-type"]
            kind = types[0].split(b";")[0].strip().decode() if types else ""
            self.kind = kind
            if kind == "text/html":
                self.start = {**message, "headers": headers}  # sent once the body is whole
                return
            headers = [(k, v) for k, v in headers if not self._length(k) or not self._streamed()]
            await self.inner({**message, "headers": headers})
        elif message["type"] == "http.response.body" and self.kind == "text/html":
            self.body += message.get("body", b"")
            if not message.get("more_body", False):
                await self._send_page()
        elif message["type"] == "http.response.body" and self._streamed():
            body = self.prefixed.rewrite(message.get("body", b""))
            await self.inner({**message, "body": body})
        else:
            await self.inner(message)

    def _streamed(self) -> bool:
        return self.kind == "text/event-stream"

    @staticmethod
    def _length(key: bytes) -> bool:
        return key.lower() == b"content-length"

    def _header(self, key: bytes, value: bytes) -> tuple[bytes, bytes]:
        if key.lower() == b"location" and value.startswith(b"/") and not value.startswith(b"//"):
            return key, self.prefixed.path(value)
        return key, value

    async def _send_page(self) -> None:
        assert self.start is not None
        body = self.prefixed.rewrite(self.body)
        body = re.sub(rb"(<body[^>]*>)", lambda m: m.group(1) + self.prefixed.banner, body, count=1)
        headers = [(k, v) for k, v in self.start["headers"] if not self._length(k)]
        headers.append((b"content-length", str(len(body)).encode()))
        await self.inner({**self.start, "headers": headers})
        await self.inner({"type": "http.response.body", "body": body, "more_body": False})
