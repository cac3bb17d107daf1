"""Table health (docs/dashboard.rst, "Table health"): the store's tables and indexes, their
sizes, dead rows and last automatic vacuum, and its oldest running and ready jobs, on
``/tables`` and ``GET /api/tables``. What an operator watches for bloat: a jobs table whose
dead rows keep growing is not being vacuumed, and a ready job that stays oldest means no
pool claims from its queue."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import trioqueue
from trioqueue.web.api import iso
from trioqueue.web.auth import Guard
from trioqueue.web.pages import environment
from trioqueue.web.render import Renderer

__all__ = ["human_bytes", "routes", "table_health_json"]

Backend = trioqueue.MemoryBackend | trioqueue.PostgresBackend


def size_json(size: trioqueue.TableSize) -> dict[str, Any]:
    return {
        "name": size.name,
        "total_bytes": size.total_bytes,
        "live_rows": size.live_rows,
        "dead_rows": size.dead_rows,
        "last_autovacuum": iso(size.last_autovacuum),
        "last_autoanalyze": iso(size.last_autoanalyze),
    }


def table_health_json(health: trioqueue.TableHealth) -> dict[str, Any]:
    return {
        "tables": [size_json(t) for t in health.tables],
        "indexes": [size_json(i) for i in health.indexes],
        "oldest_running": {
            "id": health.oldest_running_id,
            "since": iso(health.oldest_running_since),
        },
        "oldest_ready": {"id": health.oldest_ready_id, "since": iso(health.oldest_ready_since)},
    }


def human_bytes(n: int) -> str:
    """``n`` bytes in binary units, three significant digits at most (``8.0 KiB``)."""
    value, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"


def dead_share(size: trioqueue.TableSize) -> str:
    """Dead rows as a share of all rows (``12%``), or an empty string without any."""
    live, dead = size.live_rows or 0, size.dead_rows or 0
    if live + dead == 0:
        return ""
    return f"{100 * dead / (live + dead):.0f}%"


def routes(backend: Backend, guard: Guard) -> list[Route]:
    renderer = Renderer(guard, environment())

    async def api_tables(request: Request) -> Response:
        return JSONResponse(table_health_json(await backend.table_health()))

    async def tables_page(request: Request) -> Response:
        health = await backend.table_health()
        now = datetime.now(UTC)
        return renderer.page(
            request,
            "tables.html",
            page="tables",
            title="Table health",
            health=health,
            size=human_bytes,
            dead_share=dead_share,
            running_for=None
            if health.oldest_running_since is None
            else (now - health.oldest_running_since).total_seconds(),
            ready_for=None
            if health.oldest_ready_since is None
            else (now - health.oldest_ready_since).total_seconds(),
        )

    return [
        Route("/api/tables", guard.api(api_tables), methods=["GET"]),
        Route("/tables", guard.page(tables_page), methods=["GET"]),
    ]
