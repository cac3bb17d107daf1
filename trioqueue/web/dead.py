"""Dead letters on the dashboard (docs/dashboard.rst, "Dead letters"; docs/protocol.rst
§19): ``/dead`` and ``GET /api/dead`` show the jobs that failed for good, counted per queue
and per error type among the newest ``sample`` that match (bounded on a big table), a page
of them newest first (paged by id: ``after``); ``POST /api/dead/redrive`` and the page's
form put the matching ones back on their queues.

A redrive is a bulk action as the job list's (:mod:`trioqueue.web.controls`): it names the
filters and the count the operator confirmed (``expected``), counts the matches once more,
exactly, and refuses with 409 when more match than were confirmed; the backend then works in
bounded batches (``retry_matching`` with the dead-letter filters). The page's form post
first answers with a confirmation page; its own post acts. Each redrive is recorded in the
audit log (``dead.redrive``); read-only mode and the same-origin rule refuse it before it
runs (:class:`~trioqueue.web.auth.Guard`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

import trioqueue
from trioqueue.web.api import (
    MAX_QUEUE,
    MAX_SEARCH,
    iso,
    parse_digits,
    parse_flag,
    parse_text,
    read_json,
)
from trioqueue.web.auditor import record
from trioqueue.web.auth import Guard, error
from trioqueue.web.controls import parse_expected
from trioqueue.web.pages import Form, environment
from trioqueue.web.render import Renderer

__all__ = ["DeadQuery", "dead_json", "routes", "summary_json"]

Backend = trioqueue.MemoryBackend | trioqueue.PostgresBackend

PAGE_SIZE = 50
DEFAULT_SAMPLE = 10_000
MAX_ERROR_TYPE = 300
#: ``error_type=-``: the dead letters with no error type recorded (the backend's ``""``;
#: an empty field is no filter, as every filter's is). No qualified class name is ``-``.
NO_ERROR_TYPE = "-"
#: The query-string names of the filters, in the order the audit text names them.
FILTER_NAMES = ("queue", "error", "error_type", "since", "before", "cancelled")


@dataclass(frozen=True)
class DeadQuery:
    """The dead letters' filters, page and sample (``/api/dead`` and ``/dead``)."""

    queue: str | None = None
    error: str | None = None
    error_type: str | None = None
    since: datetime | None = None
    before: datetime | None = None
    cancelled: bool | None = None
    limit: int = PAGE_SIZE
    after: int | None = None
    sample: int = DEFAULT_SAMPLE

    @classmethod
    def parse(cls, params: QueryParams, *, default_limit: int = PAGE_SIZE) -> DeadQuery:
        """Raises ValueError with a one-line reason for a bad parameter (what only the
        backend can judge, it judges: one error naming every problem)."""
        raw_limit, raw_after = params.get("limit") or "", params.get("after") or ""
        raw_sample = params.get("sample") or ""
        return cls(
            queue=parse_text(params, "queue", MAX_QUEUE),
            error=parse_text(params, "error", MAX_SEARCH),
            error_type=_error_type(params),
            since=_moment(params, "since"),
            before=_moment(params, "before"),
            cancelled=parse_flag(params, "cancelled"),
            limit=parse_digits("limit", raw_limit, 1, 1000) if raw_limit else default_limit,
            after=parse_digits("after", raw_after, 1, 2**63 - 1) if raw_after else None,
            sample=parse_digits("sample", raw_sample, 1, 10**7) if raw_sample else DEFAULT_SAMPLE,
        )

    def filters(self) -> dict[str, Any]:
        """The backend's keyword arguments of these filters."""
        return {
            "queue": self.queue,
            "error": self.error,
            "error_type": self.error_type,
            "failed_since": self.since,
            "failed_before": self.before,
            "cancelled": self.cancelled,
        }

    def fields(self) -> dict[str, str]:
        """The filters given, by their query-string names, as text."""
        values: dict[str, str | None] = {
            "queue": self.queue,
            "error": self.error,
            "error_type": None if self.error_type is None else self.error_type or NO_ERROR_TYPE,
            "since": iso(self.since),
            "before": iso(self.before),
            "cancelled": None if self.cancelled is None else str(self.cancelled).lower(),
        }
        return {name: value for name, value in values.items() if value is not None}

    def url(self, **changes: Any) -> str:
        """The page of these filters (and ``changes``)."""
        query = replace(self, **changes)
        fields = query.fields()
        if query.after is not None:
            fields["after"] = str(query.after)
        return "/dead" + ("?" + urlencode(fields) if fields else "")

    def describe(self) -> str:
        """The filters as the audit log and the confirmation name them."""
        return " ".join(f"{k}={v}" for k, v in self.fields().items()) or "all dead letters"


def _error_type(params: QueryParams) -> str | None:
    """An error type, exactly; ``-`` (:data:`NO_ERROR_TYPE`): none recorded, ``""``."""
    raw = parse_text(params, "error_type", MAX_ERROR_TYPE)
    return "" if raw == NO_ERROR_TYPE else raw


def _moment(params: QueryParams, name: str) -> datetime | None:
    """An ISO 8601 time; without an offset, UTC (a browser's ``datetime-local`` field
    names no zone)."""
    raw = params.get(name) or None
    if raw is None:
        return None
    try:
        at = datetime.fromisoformat(raw[:40])
    except ValueError:
        raise ValueError(f"{name} must be an ISO 8601 time, not {raw[:40]!r}") from None
    return at if at.utcoffset() is not None else at.replace(tzinfo=UTC)


def dead_json(dead: trioqueue.DeadLetter) -> dict[str, Any]:
    return {
        "id": dead.id,
        "queue": dead.queue,
        "attempts": dead.attempts,
        "max_attempts": dead.max_attempts,
        "priority": dead.priority,
        "last_error": dead.last_error,
        "error_type": dead.error_type,
        "cancelled": dead.cancelled,
        "created_at": iso(dead.created_at),
        "finished_at": iso(dead.finished_at),
    }


def summary_json(summary: trioqueue.DeadLetterSummary) -> dict[str, Any]:
    return {
        "total": summary.total,
        "capped": summary.capped,
        "by_queue": [{"queue": name, "count": n} for name, n in summary.by_queue],
        "by_error_type": [{"error_type": name, "count": n} for name, n in summary.by_error_type],
    }


async def read_dead(
    backend: Backend, query: DeadQuery
) -> tuple[trioqueue.DeadLetterSummary, list[trioqueue.DeadLetter]]:
    """The summary and the page ``query`` asks for."""
    filters = query.filters()
    summary = await backend.dead_letter_summary(**filters, sample=query.sample)
    page = await backend.list_dead_letters(**filters, limit=query.limit, after=query.after)
    return summary, page


@dataclass(frozen=True)
class Redriven:
    """What a redrive did: ``matching`` counted before it, ``done`` redriven; or, with
    ``refused``, nothing (more matched than were confirmed)."""

    matching: int
    done: int
    refused: bool = False


async def redrive(backend: Backend, query: DeadQuery, expected: int) -> Redriven:
    """Redrive every dead letter ``query`` matches, unless more match than ``expected``."""
    filters = query.filters()
    matching = (await backend.dead_letter_summary(**filters, sample=None)).total
    if matching > expected:
        return Redriven(matching, 0, refused=True)
    queue = filters.pop("queue")
    done = await backend.retry_matching(queue, "failed", **filters)
    return Redriven(matching, done)


def _refusal(result: Redriven, expected: int) -> str:
    return (
        f"{result.matching} dead letters match now, more than the {expected} confirmed: "
        "nothing was done; look again and confirm the new count"
    )


def _detail(query: DeadQuery, expected: int, result: Redriven) -> dict[str, Any]:
    return {
        "filters": query.fields(),
        "expected": expected,
        "matching": result.matching,
        "done": result.done,
    }


def _expected_of_body(body: Any) -> int:
    if not isinstance(body, dict) or set(body) != {"expected"}:
        raise ValueError('the body must be {"expected": n}, the count of dead letters confirmed')
    return parse_expected(body["expected"])


def _form_query(form: Form) -> DeadQuery:
    fields = {name: form.get(name) or "" for name in FILTER_NAMES}
    return DeadQuery.parse(QueryParams(fields))


def _form_expected(form: Form) -> int:
    raw = form.get("expected") or ""
    if not (raw.isascii() and raw.isdigit() and len(raw) < 20):
        raise ValueError("expected must be the count of dead letters confirmed")
    return parse_expected(int(raw))


def routes(backend: Backend, guard: Guard) -> list[Route]:
    renderer = Renderer(guard, environment())

    async def api_dead(request: Request) -> Response:
        try:
            query = DeadQuery.parse(request.query_params, default_limit=100)
            summary, page = await read_dead(backend, query)
        except (TypeError, ValueError) as exc:
            return error(400, str(exc))
        full = len(page) == query.limit
        return JSONResponse(
            {
                "summary": summary_json(summary),
                "dead": [dead_json(d) for d in page],
                "next_after": page[-1].id if full else None,
            }
        )

    async def api_redrive(request: Request) -> Response:
        try:
            query = DeadQuery.parse(request.query_params)
            expected = _expected_of_body(await read_json(request))
            result = await redrive(backend, query, expected)
        except (TypeError, ValueError) as exc:
            return error(400, str(exc))
        if result.refused:
            refusal = {"error": _refusal(result, expected), "matching": result.matching}
            return JSONResponse(refusal, status_code=409)
        await record(request, "dead.redrive", query.describe(), _detail(query, expected, result))
        return JSONResponse({"ok": True, "matching": result.matching, "done": result.done})

    async def dead_page(request: Request) -> Response:
        try:
            query = DeadQuery.parse(request.query_params)
            summary, page = await read_dead(backend, query)
        except (TypeError, ValueError) as exc:
            return renderer.problem(request, 400, "Bad filter", str(exc))
        full = len(page) == query.limit
        return renderer.page(
            request,
            "dead.html",
            page="dead",
            title="Dead letters",
            query=query,
            summary=summary,
            dead=page,
            next_url=query.url(after=page[-1].id) if full else None,
            first_url=query.url(after=None) if query.after is not None else None,
            here=query.url(),
        )

    async def redrive_page(request: Request) -> Response:
        """Redrive all N matching dead letters: the page's form, confirmed first."""
        try:
            form = await Form.read(request)
            query = _form_query(form)
            confirmed = form.get("confirmed") == "yes"
            expected = _form_expected(form) if confirmed else 0
            if not confirmed:
                # The confirmation names the count now; its post confirms that count.
                filters = query.filters()
                expected = (await backend.dead_letter_summary(**filters, sample=None)).total
        except (TypeError, ValueError) as exc:
            return renderer.problem(request, 400, "Bad action", str(exc))
        back = query.url()
        if not confirmed:
            if not expected:
                return renderer.problem(
                    request, 409, "Nothing to do", f"No dead letter matches {query.describe()}."
                )
            plural = "" if expected == 1 else "s"
            fields = [*query.fields().items(), ("expected", str(expected))]
            return renderer.confirm(
                request,
                f"Redrive all {expected} dead letter{plural} matching {query.describe()}? "
                "Each goes back on its queue for one more attempt.",
                f"Yes, redrive {expected} job{plural}",
                fields,
                back,
            )
        result = await redrive(backend, query, expected)
        if result.refused:
            return renderer.problem(request, 409, "The count changed", _refusal(result, expected))
        await record(request, "dead.redrive", query.describe(), _detail(query, expected, result))
        return RedirectResponse(back, status_code=303)

    return [
        Route("/api/dead", guard.api(api_dead), methods=["GET"]),
        Route("/api/dead/redrive", guard.api(api_redrive), methods=["POST"]),
        Route("/dead", guard.page(dead_page), methods=["GET"]),
        Route("/dead/redrive", guard.page(redrive_page), methods=["POST"]),
    ]
