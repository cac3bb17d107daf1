"""The audit log's page and endpoint (docs/dashboard.rst, "Audit log"): ``/audit`` and
``GET /api/audit`` list the entries :mod:`trioqueue.web.auditor` recorded, newest first."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import trioqueue
from trioqueue.web.api import iso, parse_digits
from trioqueue.web.auth import Guard, error
from trioqueue.web.pages import environment
from trioqueue.web.render import Renderer

__all__ = ["audit_json", "routes"]

Backend = trioqueue.MemoryBackend | trioqueue.PostgresBackend

PAGE_SIZE = 50
MAX_ACTION = 100


def audit_json(entry: trioqueue.AuditEntry) -> dict[str, Any]:
    return {
        "id": entry.id,
        "at": iso(entry.at),
        "action": entry.action,
        "target": entry.target,
        "session": entry.session,
        "detail": entry.detail,
    }


def _page_params(request: Request, default_limit: int) -> tuple[int, int, str | None]:
    """``limit``, ``offset`` and ``action`` from the query string; ValueError when bad."""
    params = request.query_params
    raw_limit, raw_offset = params.get("limit") or "", params.get("offset") or ""
    limit = parse_digits("limit", raw_limit, 1, 1000) if raw_limit else default_limit
    offset = parse_digits("offset", raw_offset, 0, 10**9) if raw_offset else 0
    action = params.get("action") or None
    if action is not None and (len(action) > MAX_ACTION or "\x00" in action):
        raise ValueError(f"action must be at most {MAX_ACTION} characters, without NUL")
    return limit, offset, action


def routes(backend: Backend, guard: Guard) -> list[Route]:
    renderer = Renderer(guard, environment())

    async def api_audit(request: Request) -> Response:
        try:
            limit, offset, action = _page_params(request, 100)
        except ValueError as exc:
            return error(400, str(exc))
        entries = await backend.list_audit(limit, offset, action=action)
        return JSONResponse({"entries": [audit_json(e) for e in entries]})

    async def audit_page(request: Request) -> Response:
        try:
            limit, offset, action = _page_params(request, PAGE_SIZE)
        except ValueError as exc:
            return renderer.problem(request, 400, "Bad filter", str(exc))
        # One more than shown says whether there is a next page.
        entries = await backend.list_audit(limit + 1, offset, action=action)
        more = len(entries) > limit
        return renderer.page(
            request,
            "audit.html",
            page="audit",
            title="Audit log",
            entries=[
                (e, json.dumps(e.detail, sort_keys=True, ensure_ascii=False))
                for e in entries[:limit]
            ],
            action=action or "",
            prev_offset=max(offset - limit, 0) if offset else None,
            next_offset=offset + limit if more else None,
            limit=limit,
        )

    return [
        Route("/api/audit", guard.api(api_audit), methods=["GET"]),
        Route("/audit", guard.page(audit_page), methods=["GET"]),
    ]
