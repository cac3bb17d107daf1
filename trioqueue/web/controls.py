"""The operator's controls (docs/dashboard.rst, "Controls"): retry or delete every job that
matches a filter, switch schedules off and on and run them by hand, set a queue's limits;
as JSON endpoints and as the pages' plain form posts.

A bulk action names the filters of ``GET /api/jobs`` and the count the operator confirmed
(``expected``). It counts the matching jobs once more first, and refuses with 409 (saying
the count now) when more match than were confirmed: "delete all 40" never deletes 4,000
that arrived meanwhile. Fewer is fine (some finished or went meanwhile). The backend then
works in bounded batches (``retry_matching``, ``delete_matching``), so one click never holds
many row locks. A form post first answers with a confirmation page (as every page action
that changes jobs does, :mod:`trioqueue.web.pages`); its own post acts.

Every action is recorded in the audit log (:mod:`trioqueue.web.auditor`). Read-only mode and
the same-origin rule refuse each of them before it runs (:class:`~trioqueue.web.auth.Guard`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlencode

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

import trioqueue
from trioqueue.web.api import JobQuery, read_json, schedule_json, set_limits
from trioqueue.web.auditor import record
from trioqueue.web.auth import Guard, error, safe_next
from trioqueue.web.pages import Form, environment
from trioqueue.web.render import Renderer

__all__ = ["BulkResult", "describe", "routes", "run_bulk"]

Backend = trioqueue.MemoryBackend | trioqueue.PostgresBackend

BulkAction = Literal["retry", "delete"]
BULK_ACTIONS: tuple[BulkAction, ...] = ("retry", "delete")
ScheduleAction = Literal["enable", "disable", "run"]
SCHEDULE_ACTIONS: tuple[ScheduleAction, ...] = ("enable", "disable", "run")
#: The most jobs one confirmation may name (a bigint count).
MAX_EXPECTED = 2**63 - 1


@dataclass(frozen=True)
class BulkResult:
    """What a bulk action did: ``matching`` jobs counted before it, ``done`` acted on; or,
    with ``refused``, nothing (more matched than were confirmed)."""

    matching: int
    done: int
    refused: bool = False


def describe(query: JobQuery) -> str:
    """The filters as the audit log and the confirmation name them (``queue=mail
    status=failed q=timeout``), or ``all jobs``."""
    parts = [f"{name}={value}" for name, value in _filters(query).items() if value is not None]
    return " ".join(parts) or "all jobs"


def _status_of(action: BulkAction, query: JobQuery) -> trioqueue.JobStatus | None:
    """The status a bulk action counts and acts on; ValueError for a retry of jobs that
    cannot have failed."""
    if action == "delete":
        return query.status
    if query.status not in (None, "failed"):
        raise ValueError(f"only failed jobs can be retried, not {query.status} ones")
    return "failed"


async def run_bulk(
    backend: Backend, action: BulkAction, query: JobQuery, expected: int
) -> BulkResult:
    """Retry or delete every job ``query`` matches, unless more match than ``expected``.

    Raises:
        ValueError: a retry with a status other than failed.
    """
    status = _status_of(action, query)
    search, cancelled = query.search, query.cancelled  # the job list's filters, all of them
    matching = await backend.count_jobs(query.queue, status, search=search, cancelled=cancelled)
    if matching > expected:
        return BulkResult(matching, 0, refused=True)
    if action == "retry":
        done = await backend.retry_matching(query.queue, status, search=search, cancelled=cancelled)
    else:
        done = await backend.delete_matching(
            query.queue, status, search=search, cancelled=cancelled
        )
    return BulkResult(matching, done)


def parse_expected(raw: object) -> int:
    """The confirmed count: an integer from 0; ValueError with the one-line reason."""
    if type(raw) is not int or not 0 <= raw <= MAX_EXPECTED:
        raise ValueError(
            f"expected must be the count of jobs confirmed, an integer from 0, not {raw!r}"
        )
    return raw


def _expected_of_body(body: Any) -> int:
    if not isinstance(body, dict) or set(body) != {"expected"}:
        raise ValueError('the body must be {"expected": n}, the count of jobs confirmed')
    return parse_expected(body["expected"])


def _refused(result: BulkResult, expected: int) -> str:
    return (
        f"{result.matching} jobs match now, more than the {expected} confirmed: "
        "nothing was done; look again and confirm the new count"
    )


def _filters(query: JobQuery) -> dict[str, str | None]:
    """The job list's filters by their query-string names (``cancelled`` as ``true`` or
    ``false``): one list for the audit text, its detail and the way back to the list."""
    cancelled = None if query.cancelled is None else str(query.cancelled).lower()
    return {"queue": query.queue, "status": query.status, "q": query.search, "cancelled": cancelled}


def _bulk_detail(query: JobQuery, expected: int, result: BulkResult) -> dict[str, Any]:
    filters = _filters(query)
    return {
        "filters": {k: v for k, v in filters.items() if v is not None},
        "expected": expected,
        "matching": result.matching,
        "done": result.done,
    }


async def _schedule_action(
    backend: Backend, action: ScheduleAction, name: str
) -> dict[str, Any] | None:
    """Enable, disable or run a schedule: what to answer, or None when there is none.

    Raises:
        ValueError: not a schedule name.
    """
    if action == "run":
        job_id = await backend.run_schedule_now(name)
        return None if job_id is None else {"job_id": job_id}
    if not await backend.set_schedule_enabled(name, action == "enable"):
        return None
    found = [s for s in await backend.list_schedules() if s.name == name]
    return {"schedule": schedule_json(found[0])} if found else {}


def _form_query(form: Form) -> JobQuery:
    """The job list's filters from a form's fields (``queue``, ``status``, ``q``,
    ``cancelled``)."""
    fields = {name: form.get(name) or "" for name in ("queue", "status", "q", "cancelled")}
    return JobQuery.parse(QueryParams(fields))


def _form_limit(form: Form, name: str) -> int | float | None:
    raw = (form.get(name) or "").strip()
    if not raw:
        return None
    try:
        return int(raw) if name == "max_running" else float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number or empty (no limit), not {raw[:40]!r}") from None


def routes(backend: Backend, guard: Guard) -> list[Route]:
    renderer = Renderer(guard, environment())

    def bulk_api(action: BulkAction) -> Route:
        async def endpoint(request: Request) -> Response:
            try:
                query = JobQuery.parse(request.query_params)
                expected = _expected_of_body(await read_json(request))
                result = await run_bulk(backend, action, query, expected)
            except (TypeError, ValueError) as exc:
                return error(400, str(exc))
            if result.refused:
                refusal = {"error": _refused(result, expected), "matching": result.matching}
                return JSONResponse(refusal, status_code=409)
            detail = _bulk_detail(query, expected, result)
            await record(request, f"jobs.{action}_matching", describe(query), detail)
            return JSONResponse({"ok": True, "matching": result.matching, "done": result.done})

        return Route(f"/api/jobs/{action}", guard.api(endpoint), methods=["POST"])

    def schedule_api(action: ScheduleAction) -> Route:
        async def endpoint(request: Request) -> Response:
            name = request.path_params["name"]
            try:
                answer = await _schedule_action(backend, action, name)
            except (TypeError, ValueError) as exc:
                return error(400, str(exc))
            if answer is None:
                return error(404, f"no schedule {name}")
            await record(request, f"schedule.{_audit_verb(action)}", name, answer)
            return JSONResponse({"ok": True} | answer)

        path = f"/api/schedules/{{name:path}}/{action}"
        return Route(path, guard.api(endpoint), methods=["POST"])

    async def bulk_page(request: Request) -> Response:
        """Retry or delete all N matching jobs: the jobs list's form, confirmed first."""
        try:
            form = await Form.read(request)
            action = form.get("action")
            if action not in BULK_ACTIONS:
                raise ValueError(f"action must be one of {', '.join(BULK_ACTIONS)}")
            query = _form_query(form)
            status = _status_of(action, query)
            confirmed = form.get("confirmed") == "yes"
            if confirmed:
                raw = form.get("expected") or ""
                if not (raw.isascii() and raw.isdigit() and len(raw) < 20):
                    raise ValueError("expected must be the count of jobs confirmed")
                expected = parse_expected(int(raw))
        except ValueError as exc:
            return renderer.problem(request, 400, "Bad action", str(exc))
        back = _jobs_url(query)
        next_url = safe_next(form.get("next") or back)
        if not confirmed:
            # The confirmation names the count now, and the post it sends confirms that
            # count: more by then is refused.
            expected = await backend.count_jobs(query.queue, status, search=query.search)
            if not expected:
                return renderer.problem(
                    request, 409, "Nothing to do", f"No job matches {describe(query)} now."
                )
            noun = "failed job" if action == "retry" else "job"
            plural = "" if expected == 1 else "s"
            undo = " This cannot be undone." if action == "delete" else ""
            fields = [
                ("action", action),
                ("queue", query.queue or ""),
                ("status", query.status or ""),
                ("q", query.search or ""),
                ("cancelled", _filters(query)["cancelled"] or ""),
                ("expected", str(expected)),
                ("next", next_url),
            ]
            return renderer.confirm(
                request,
                f"{action.capitalize()} all {expected} {noun}{plural} matching "
                f"{describe(query)}?{undo}",
                f"Yes, {action} {expected} {noun}{plural}",
                fields,
                back,
            )
        result = await run_bulk(backend, action, query, expected)
        if result.refused:
            return renderer.problem(request, 409, "The count changed", _refused(result, expected))
        detail = _bulk_detail(query, expected, result)
        await record(request, f"jobs.{action}_matching", describe(query), detail)
        return RedirectResponse(next_url, status_code=303)

    async def schedule_page(request: Request) -> Response:
        """Enable, disable or run a schedule from the schedules page (disable and run are
        confirmed first)."""
        try:
            form = await Form.read(request)
            action = form.get("action")
            if action not in SCHEDULE_ACTIONS:
                raise ValueError(f"action must be one of {', '.join(SCHEDULE_ACTIONS)}")
            name = form.get("name") or ""
            if action != "enable" and form.get("confirmed") != "yes":
                question = (
                    f"Run schedule {name} now? One job is enqueued on its queue; its next "
                    "run stays as it is."
                    if action == "run"
                    else f"Disable schedule {name}? It enqueues nothing until enabled again, "
                    "and then starts at its next tick."
                )
                button = "Yes, run it now" if action == "run" else "Yes, disable it"
                fields = [("action", action), ("name", name)]
                return renderer.confirm(request, question, button, fields, "/schedules")
            answer = await _schedule_action(backend, action, name)
        except (TypeError, ValueError) as exc:
            return renderer.problem(request, 400, "Bad action", str(exc))
        if answer is None:
            return renderer.problem(
                request, 404, "No such schedule", f"There is no schedule {name}."
            )
        await record(request, f"schedule.{_audit_verb(action)}", name, answer)
        return RedirectResponse("/schedules", status_code=303)

    async def limits_page(request: Request) -> Response:
        """Set a queue's limits from the queue page's form (empty: no limit)."""
        try:
            form = await Form.read(request)
            queue = form.get("queue") or ""
            changes = {name: _form_limit(form, name) for name in ("max_running", "max_per_second")}
            await set_limits(backend, queue, changes)
        except (TypeError, ValueError) as exc:
            return renderer.problem(request, 400, "Bad limits", str(exc))
        await record(request, "queue.limits", queue, changes)
        return RedirectResponse(safe_next(form.get("next") or "/"), status_code=303)

    return [
        bulk_api("retry"),
        bulk_api("delete"),
        schedule_api("enable"),
        schedule_api("disable"),
        schedule_api("run"),
        Route("/jobs/matching", guard.page(bulk_page), methods=["POST"]),
        Route("/schedules/actions", guard.page(schedule_page), methods=["POST"]),
        Route("/queues/limits", guard.page(limits_page), methods=["POST"]),
    ]


def _audit_verb(action: ScheduleAction) -> str:
    return "run_now" if action == "run" else action


def _jobs_url(query: JobQuery) -> str:
    return "/jobs?" + urlencode({k: v for k, v in _filters(query).items() if v})
