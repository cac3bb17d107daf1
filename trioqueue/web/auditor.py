"""Recording what the dashboard's users do (docs/dashboard.rst, "Audit log"): every action
taken through the dashboard or its JSON API is appended to the backend's audit log
(``record_audit``) and logged in one line.

An entry names its session by a short id (:meth:`~trioqueue.web.sessions.Sessions.short_id`),
``token`` for a request that sent the token itself (``Authorization: Bearer``), and ``open``
when the dashboard has no token. Each endpoint that acts calls :func:`record` after the
action, with what it did: nothing is recorded for a request refused before it acted.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request

import trioqueue
from trioqueue.web.auth import SESSION_COOKIE, Guard
from trioqueue.web.visible import visible

__all__ = ["Auditor", "record"]

log = logging.getLogger("trioqueue.web")

Backend = trioqueue.MemoryBackend | trioqueue.PostgresBackend

#: Longest target recorded (a filter's text is cut to it; ``record_audit`` takes 2000).
MAX_TARGET = 2000


class Auditor:
    """Records the actions of one app's requests."""

    def __init__(self, backend: Backend, guard: Guard) -> None:
        self.backend = backend
        self.guard = guard

    def session(self, request: Request) -> str:
        """Who sent ``request``, as the audit log names them."""
        if self.guard.token is None:
            return "open"
        if "authorization" in request.headers:
            return "token"
        short = self.guard.sessions.short_id(request.cookies.get(SESSION_COOKIE))
        return "unknown" if short is None else short

    async def record(
        self, request: Request, action: str, target: str, detail: Mapping[str, Any]
    ) -> None:
        session = self.session(request)
        cut = target[:MAX_TARGET]
        await self.backend.record_audit(action, cut, session, detail)
        # One line, whatever the target holds: its hidden characters as escapes, and the
        # detail as JSON (which escapes every control character).
        log.info(
            "dashboard action %s on %s by session %s: %s",
            action,
            visible(cut),
            session,
            json.dumps(dict(detail), sort_keys=True),
        )


async def record(request: Request, action: str, target: str, detail: Mapping[str, Any]) -> None:
    """Record an action of ``request`` in its app's audit log (and log it)."""
    auditor: Auditor = request.app.state.auditor
    await auditor.record(request, action, target, detail)
