"""Which names the dashboard answers to, and which origins may change things
(docs/dashboard.rst, "Safety rules").

DNS rebinding: a web page on ``attacker.test`` whose name the attacker then points at
127.0.0.1 is, to the browser, same-origin with the dashboard, so the browser lets it read
and post at will; only the ``Host`` header (``attacker.test``) gives it away. So every request
must name one of the allowed hosts: by default the loopback names, plus the address the
dashboard is bound to, plus those an operator adds for a proxy (``--allowed-host``). And a
state-changing request's ``Origin`` must be this site exactly, scheme included: the request's
own scheme and (allowed) host, or one named by ``--allowed-origin`` (a proxy that rewrites
``Host`` makes the browser's origin differ from what reaches the app).

The host check is an ASGI middleware over the whole app (static files and event streams
too). Starlette's ``TrustedHostMiddleware`` does the same check, but is not used: its
refusal says only "Invalid host header", where an operator behind a new proxy needs to read
which host was refused and which option lets it in; and the Starlette versions this package
accepts (0.37 on) differ in how it reads an IPv6 literal (older ones cut ``[::1]:8080`` at
its first colon). The header is parsed here as RFC 9110 §7.2 writes it.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "ANY_HOST",
    "LOOPBACK_NAMES",
    "HostCheck",
    "bind_hosts",
    "check_allowed_hosts",
    "check_allowed_origins",
    "normal_host",
    "normal_origin",
    "parse_host",
    "same_origin",
]

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
#: ``--allowed-host '*'``: answer to any name (only behind a proxy that checks it).
ANY_HOST = "*"
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", "[::]", ""})
#: ``Host``: a registered name or an IP literal in brackets, then an optional port.
_HOST_HEADER = re.compile(
    r"(?P<host>[a-z0-9._~%!$&'()*+,;=-]+|\[[0-9a-f:.]+\])(?::(?P<port>[0-9]+))?", re.IGNORECASE
)


def parse_host(header: str | None) -> tuple[str, str | None] | None:
    """A ``Host`` header's host (lower case, an IPv6 literal compressed, in brackets) and
    port; None for no header or one that is not a host."""
    found = _HOST_HEADER.fullmatch(header or "")
    if found is None:
        return None
    host = found["host"].lower()
    if host.startswith("["):
        try:
            host = f"[{ipaddress.IPv6Address(host[1:-1]).compressed}]"
        except ValueError:
            return None
    return host, found["port"]


def normal_host(text: str) -> str:
    """A host name as the ``Host`` header names it (lower case, IPv6 in brackets, no port).

    Raises:
        ValueError: ``text`` is not a host name (a URL, a port, spaces, ...).
    """
    if text == ANY_HOST:
        return text
    bare = text.strip("[]")
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        address = None
    if address is not None and address.version == 6:
        return f"[{address.compressed}]"
    parsed = parse_host(text)
    if parsed is None or parsed[1] is not None:
        raise ValueError(f"not a host name (no scheme, no port): {text!r}")
    return parsed[0]


def normal_origin(text: str) -> str:
    """An origin as browsers send it in ``Origin``: ``scheme://host[:port]``, lower case.

    Raises:
        ValueError: ``text`` is not an http(s) origin (a path, a query, no host, ...).
    """
    parts = urlsplit(text.strip().rstrip("/"))
    if (
        parts.scheme not in ("http", "https")
        or not parts.netloc
        or parts.path
        or parts.query
        or parts.fragment
        or "@" in parts.netloc
        or parse_host(parts.netloc) is None
    ):
        raise ValueError(f"not an origin (scheme://host[:port]): {text!r}")
    return f"{parts.scheme}://{parts.netloc.lower()}"


def check_allowed_hosts(hosts: Iterable[str] | None) -> list[str]:
    """``create_app``'s ``allowed_hosts``, written as ``Host`` headers give them; None: the
    loopback names.

    Raises:
        ValueError: one string rather than a list of them, no host at all (every request
            would get 400), or one that is not a host name.
    """
    if hosts is None:
        return list(LOOPBACK_NAMES)
    names = [normal_host(h) for h in _listed("allowed_hosts", hosts)]
    if not names:
        raise ValueError(
            "allowed_hosts is empty: the dashboard would refuse every request; name at least "
            "one host ('*' for any), or leave it None for the loopback names"
        )
    return names


def check_allowed_origins(origins: Iterable[str] | None) -> frozenset[str]:
    """``create_app``'s ``allowed_origins``, written as browsers send them (none: only the
    request's own).

    Raises:
        ValueError: one string rather than a list of them, or one that is not an origin.
    """
    return frozenset(normal_origin(o) for o in _listed("allowed_origins", origins or ()))


def _listed(option: str, values: Iterable[str]) -> Iterable[str]:
    # A str is an iterable of str too: "dash.example" would allow the hosts "d", "a", ...
    if isinstance(values, str):
        raise ValueError(f"{option} must be a list of names, not one string: {values!r}")
    return values


def bind_hosts(bind: str, extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The hosts a dashboard bound to ``bind`` answers to: the bound address, the loopback
    names for a loopback or wildcard bind, this machine's own names for a wildcard bind
    (``0.0.0.0``), and ``extra`` (``--allowed-host``).

    Raises:
        ValueError: one of ``extra`` is not a host name.
    """
    hosts = [normal_host(h) for h in extra]
    if bind in WILDCARD_BINDS:
        hosts += [*LOOPBACK_NAMES, *_own_names()]
    else:
        hosts.append(normal_host(bind))
        if _is_loopback(bind):
            hosts += LOOPBACK_NAMES
    return tuple(dict.fromkeys(hosts))


def _own_names() -> list[str]:
    names = []
    for name in (socket.gethostname(), socket.getfqdn()):
        try:
            names.append(normal_host(name))
        except ValueError:
            continue
    return names


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def same_origin(
    origin: str, scheme: str, host: str | None, allowed_origins: frozenset[str]
) -> bool:
    """Whether a request's ``Origin`` is this site: one of ``allowed_origins``, or exactly the
    request's own ``scheme://host`` (the host already checked by :class:`HostCheck`)."""
    try:
        given = normal_origin(origin)
    except ValueError:
        return False  # "null" (a sandboxed frame, a file), or garbage
    if given in allowed_origins:
        return True
    return host is not None and given == f"{scheme}://{host.lower()}"


class HostCheck:
    """An ASGI middleware: a request whose ``Host`` is not one of ``hosts`` gets 400.

    ``hosts`` as :func:`check_allowed_hosts` gives them (already written as ``Host``
    headers give them), so they are not normalised again here.
    """

    def __init__(self, app: ASGIApp, hosts: Iterable[str]) -> None:
        self.app = app
        self.hosts = frozenset(hosts)
        self.any = ANY_HOST in self.hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.any or scope["type"] not in ("http", "websocket") or self.allows(scope):
            await self.app(scope, receive, send)
            return
        given = Headers(scope=scope).get("host")
        shown = "none" if given is None else ascii(given)
        message = (
            f"this dashboard does not answer to the host {shown}: if it is yours (a proxy, "
            "a name of this machine), start the dashboard with --allowed-host NAME "
            "(or TRIOQUEUE_DASHBOARD_ALLOWED_HOSTS)\n"
        )
        await PlainTextResponse(message, status_code=400)(scope, receive, send)

    def allows(self, scope: Scope) -> bool:
        parsed = parse_host(Headers(scope=scope).get("host"))
        return parsed is not None and parsed[0] in self.hosts
