"""The dashboard's JSON API (docs/dashboard.rst, "JSON API").

The parsing of the job list's parameters and the job actions live here too: the HTML pages
(:mod:`trioqueue.web.pages`) share them, so a page and the API refuse the same things.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import trioqueue
from trioqueue.web.attempts import attempt_json, bucket_json, timings_json
from trioqueue.web.auditor import record
from trioqueue.web.auth import Guard, error

__all__ = [
    "ACTIONS",
    "LIST_PREVIEW",
    "QUEUE_ACTIONS",
    "ActionResult",
    "JobQuery",
    "apply_action",
    "apply_queue_action",
    "job_detail_json",
    "job_json",
    "routes",
    "worker_json",
]

#: Job ids are PostgreSQL bigints.
MAX_JOB_ID = 2**63 - 1
STATUSES: tuple[trioqueue.JobStatus, ...] = ("scheduled", "ready", "running", "succeeded", "failed")
SORTS: tuple[trioqueue.JobSort, ...] = (
    "id", "-id", "priority", "-priority", "created_at", "-created_at", "finished_at", "-finished_at"
)  # fmt: skip
Action = Literal["cancel", "retry", "delete"]
ACTIONS: tuple[Action, ...] = ("cancel", "retry", "delete")
#: The most ids one bulk action takes (a page holds at most 1000 jobs).
MAX_BULK = 1000
MAX_SEARCH = 200
#: How many characters of each payload, result and error a job list carries (the list
#: shows 80; the job's own page and ``GET /api/jobs/{id}`` carry them whole).
LIST_PREVIEW = 200
#: A cursor's longest text (trioqueue's are under 100 characters).
MAX_CURSOR = 200
#: A search of the job list looks at this many of the newest jobs (by id), not at every
#: job: no index serves a substring of a payload, so an unbounded search on a big table
#: reads all of it (docs/dashboard.rst, "Big tables").
SEARCH_WINDOW = 10_000
#: The deepest ``offset`` the job list takes: an offset page reads every row before it (a
#: second at 500,000); past this, the pages' cursors (``after``/``before``) page on.
MAX_OFFSET = 10_000
#: The longest queue name a backend takes (``enqueue`` refuses longer ones).
MAX_QUEUE = 128
#: The longest window the timings and history of a queue look back over: a week.
MAX_WINDOW = 7 * 24 * 3600
#: The most buckets a history answers (``attempt_history`` takes at most 1000).
MAX_BUCKETS = 1000

Backend = trioqueue.MemoryBackend | trioqueue.PostgresBackend


def iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def job_json(info: trioqueue.JobInfo) -> dict[str, Any]:
    """A JobInfo as the API's JSON object (the job list's entries).

    A payload, result or error the list read cut (:class:`trioqueue.TruncatedText`) is
    its prefix as a string, and ``"truncated"`` maps each cut field to its whole length.
    """
    undecodable = isinstance(info.payload, trioqueue.UndecodablePayload)
    out: dict[str, Any] = {
        "id": info.id,
        "queue": info.queue,
        "payload": _plain(info.payload),
        "status": info.status,
        "attempts": info.attempts,
        "max_attempts": info.max_attempts,
        "priority": info.priority,
        "progress": info.progress,
        "last_error": _plain(info.last_error),
        "created_at": iso(info.created_at),
        "finished_at": iso(info.finished_at),
        "group": info.group,  # enqueue(..., group=): one job of the group at a time
        # A failed job whose last attempt ended on a cancel (its status stays "failed").
        "cancelled": info.cancelled,
        # When a scheduled job (a delay, or a retry's backoff) becomes ready; else null.
        "next_attempt_at": iso(info.next_attempt_at),
        "finished_by": info.finished_by,  # the pool that ran its last attempt
        # What the handler returned (None: nothing, or not succeeded); a stored result this
        # process cannot decode is its JSON text, like a payload.
        "result": _plain(info.result),
    }
    if undecodable:
        out["undecodable"] = True
    cut = {
        name: value.length
        for name, value in (
            ("payload", info.payload),
            ("result", info.result),
            ("last_error", info.last_error),
        )
        if isinstance(value, trioqueue.TruncatedText)
    }
    if cut:
        out["truncated"] = cut
    return out


def _plain(value: Any) -> Any:
    """A decoded value as it is; the text of one that could not be decoded or was cut."""
    if isinstance(value, trioqueue.UndecodablePayload | trioqueue.TruncatedText):
        return str(value)
    return value


def job_detail_json(info: trioqueue.JobInfo) -> dict[str, Any]:
    """One job with its lease details (``GET /api/jobs/{id}``)."""
    return job_json(info) | {
        "lease_expires_at": iso(info.lease_expires_at),
        "last_renewed_at": iso(info.last_renewed_at),
        "cancel_requested": info.cancel_requested_at is not None,
        "cancel_requested_at": iso(info.cancel_requested_at),
        "cancel_acknowledged_at": iso(info.cancel_acknowledged_at),
        "worker": info.worker_id,
        # The latest checkpoint an attempt stored (null: none), and when (null: never):
        # get_job reads it, a list does not (docs/protocol.rst §16).
        "checkpoint": _plain(info.checkpoint),
        "checkpointed_at": iso(info.checkpointed_at),
        # How many times the job snoozed (a handler's Snooze), across its attempts (§17).
        "snoozes": info.snoozes,
    }


def worker_json(info: trioqueue.WorkerInfo) -> dict[str, Any]:
    return {
        "worker_id": info.worker_id,
        "host": info.host,
        "pid": info.pid,
        "queue": info.queue,
        "concurrency": info.concurrency,
        "in_flight": info.in_flight,
        "abandoned_renewals": info.abandoned_renewals,
        "last_beat_at": iso(info.last_beat_at),
        "started_at": iso(info.started_at),
        "stale": info.stale,
        # Seconds ahead of the database's clock and the verdict, null until measured
        # (docs/protocol.rst §8): the workers page's Clock column.
        "clock_skew": info.clock_skew,
        "clock_verdict": info.clock_verdict,
    }


def schedule_json(info: trioqueue.ScheduleInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "queue": info.queue,
        "cron": info.cron,
        "timezone": info.timezone,
        "payload": info.payload,
        "priority": info.priority,
        "max_attempts": info.max_attempts,
        "next_run_at": iso(info.next_run_at),
        "last_run_at": iso(info.last_run_at),
        "enabled": info.enabled,  # set_schedule_enabled (docs/dashboard.rst, "Controls")
    }


def queues_json(stats: dict[str, trioqueue.QueueStats]) -> list[dict[str, Any]]:
    """Every queue with jobs or flow control (``GET /api/queues``), by name."""
    return [queue_json(name, s) for name, s in sorted(stats.items())]


def queue_json(name: str, stats: trioqueue.QueueStats | None) -> dict[str, Any]:
    """One queue: its counts, oldest ready age and flow control (None: a queue with no
    jobs and no settings, which runs unpaused and unlimited)."""
    if stats is None:
        stats = trioqueue.QueueStats({}, None)
    return {
        "queue": name,
        "counts": dict(stats.counts),
        "oldest_ready_age": stats.oldest_ready_age,
        # The finished counts are the planner's estimates (docs/dashboard.rst, "Big tables").
        "estimated": stats.estimated,
    } | flow_json(stats)


def flow_json(stats: trioqueue.QueueStats) -> dict[str, Any]:
    """A queue's ``paused``, ``max_running`` and ``max_per_second`` (None: no limit)."""
    return {
        "paused": stats.paused,
        "max_running": stats.max_running,
        "max_per_second": stats.max_per_second,
    }


QueueAction = Literal["pause", "resume"]
QUEUE_ACTIONS: tuple[QueueAction, ...] = ("pause", "resume")


async def apply_queue_action(backend: Backend, action: QueueAction, queue: str) -> dict[str, Any]:
    """Pause or resume ``queue``: its JSON after (ValueError: not a queue name)."""
    if action == "pause":
        await backend.pause_queue(queue)
    else:
        await backend.resume_queue(queue)
    return queue_json(queue, (await backend.queue_stats()).get(queue))


def parse_limits(body: Any) -> dict[str, Any]:
    """``{"max_running": n or null, "max_per_second": r or null}``, each key optional (an
    absent one stays as it is); ValueError with a one-line reason. Ranges are the backend's
    to check."""
    if not isinstance(body, dict) or not body or not set(body) <= {"max_running", "max_per_second"}:
        raise ValueError('the body must be {"max_running": n or null, "max_per_second": r or null}')
    running = body.get("max_running")
    if running is not None and type(running) is not int:
        raise ValueError(f"max_running must be an integer or null, not {running!r}")
    rate = body.get("max_per_second")
    if rate is not None and type(rate) not in (int, float):
        raise ValueError(f"max_per_second must be a number or null, not {rate!r}")
    return dict(body)


async def set_limits(backend: Backend, queue: str, changes: dict[str, Any]) -> dict[str, Any]:
    """Apply ``changes`` to ``queue``'s limits, keeping those not named (the backend sets
    both at once: read, merge, set); the queue's JSON after."""
    current = queue_json(queue, (await backend.queue_stats()).get(queue))
    limits = {name: current[name] for name in ("max_running", "max_per_second")}
    await backend.set_queue_limits(queue, **(limits | changes))
    return queue_json(queue, (await backend.queue_stats()).get(queue))


def parse_digits(name: str, raw: str, low: int, high: int) -> int:
    """A number from a path, a query string or a form: ASCII digits only, from ``low`` to
    ``high``; ValueError with the one-line reason.

    ``int()`` alone would also take a sign, spaces, underscores and the digits of other
    scripts (``+1``, `` 1``, ``1_000``, ``\u0661``): many spellings of one id in URLs.
    """
    if not (raw.isascii() and raw.isdigit()):
        raise ValueError(f"{name} must be ASCII digits, not {raw!r}")
    # Longer than the bound's digits is out of range (and int() refuses over 4300 digits).
    value = int(raw) if len(raw.lstrip("0")) <= len(str(high)) else high + 1
    if not low <= value <= high:
        raise ValueError(f"{name} must be between {low} and {high}, not {raw[:40]}")
    return value


def parse_job_id(raw: str) -> int:
    """A job id from a path, a query string or a form; ValueError with the one-line reason."""
    return parse_digits("job id", raw, 1, MAX_JOB_ID)


def _int(params: QueryParams, name: str, default: int, low: int, high: int) -> int:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    return parse_digits(name, raw, low, high)


def parse_text(params: QueryParams, name: str, maximum: int) -> str | None:
    """A text filter (``queue``, ``q``): None when absent or empty; ValueError when it is
    longer than ``maximum`` or holds a NUL, which no database column can hold."""
    raw = params.get(name) or None
    if raw is None:
        return None
    if len(raw) > maximum:
        raise ValueError(f"{name} must be at most {maximum} characters, not {len(raw)}")
    if "\x00" in raw:
        raise ValueError(f"{name} must not contain a NUL character")
    return raw


def parse_flag(params: QueryParams, name: str) -> bool | None:
    """``true`` or ``false``; None when absent or empty; ValueError for anything else."""
    raw = params.get(name) or None
    if raw is None:
        return None
    if raw not in ("true", "false"):
        raise ValueError(f"{name} must be true or false, not {raw[:40]!r}")
    return raw == "true"


def parse_queue(raw: str) -> str:
    """A queue name from a path, bounded as the filters' ``queue`` is; ValueError with the
    one-line reason (so a read never sends the database what no queue can be called)."""
    if not raw:
        raise ValueError("the queue name is empty")
    if len(raw) > MAX_QUEUE:
        raise ValueError(f"a queue name is at most {MAX_QUEUE} characters, not {len(raw)}")
    if "\x00" in raw:
        raise ValueError("a queue name must not contain a NUL character")
    return raw


def parse_window(params: QueryParams) -> tuple[int, int]:
    """``window`` (seconds, default an hour) and ``buckets`` (default 60) of a queue's
    timings or history; ValueError with the one-line reason."""
    window = _int(params, "window", 3600, 1, MAX_WINDOW)
    return window, _int(params, "buckets", 60, 1, MAX_BUCKETS)


@dataclass(frozen=True)
class JobQuery:
    """The job list's filters, order and page (``/api/jobs`` and the jobs page)."""

    queue: str | None = None
    status: trioqueue.JobStatus | None = None
    search: str | None = None
    sort: trioqueue.JobSort = "id"
    limit: int = 100
    offset: int = 0
    #: Failed jobs' cancellations: True keeps only them, False leaves them out.
    cancelled: bool | None = None
    #: Keyset paging: the page right after (before) this job's cursor (``job_cursor``).
    after: str | None = None
    before: str | None = None

    @classmethod
    def parse(cls, params: QueryParams, *, default_limit: int = 100) -> JobQuery:
        """Raises ValueError with a one-line reason for a bad parameter."""
        status = params.get("status") or None
        if status is not None and status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}, not {status!r}")
        cancelled = parse_flag(params, "cancelled")
        if cancelled is not None and status not in (None, "failed"):
            # Only a failed job can be a cancellation: such a filter would say nothing.
            raise ValueError(f"cancelled goes with status failed or none, not {status!r}")
        sort = params.get("sort") or "id"
        if sort not in SORTS:
            raise ValueError(f"sort must be one of {', '.join(SORTS)}, not {sort!r}")
        return cls(
            queue=parse_text(params, "queue", MAX_QUEUE),
            status=status,
            search=parse_text(params, "q", MAX_SEARCH),
            sort=sort,
            limit=_int(params, "limit", default_limit, 1, 1000),
            offset=_int(params, "offset", 0, 0, MAX_OFFSET),
            cancelled=cancelled,
            **_cursors(params),
        )

    async def run(self, backend: Backend) -> JobPage:
        """The page of jobs, and how many match in all (a second query: under traffic the
        two may differ a little; on a big table an estimate, docs/dashboard.rst "Big
        tables"). A search looks at the newest :data:`SEARCH_WINDOW` jobs only. One job
        more than the page is read, to know whether a page follows it."""
        window = SEARCH_WINDOW if self.search else None
        found = await backend.list_jobs(
            self.queue,
            self.status,
            self.limit + 1,
            self.offset,
            search=self.search,
            sort=self.sort,
            preview=LIST_PREVIEW,
            cancelled=self.cancelled,
            after=self.after,
            before=self.before,
            search_window=window,
        )
        total = await backend.estimate_jobs(
            self.queue,
            self.status,
            search=self.search,
            cancelled=self.cancelled,
            search_window=window,
        )
        return JobPage.of(self, found, total)


@dataclass(frozen=True)
class JobPage:
    """One page of the job list, the total, and the cursors of its neighbours (None: no
    page there)."""

    jobs: list[trioqueue.JobInfo]
    total: trioqueue.JobCount
    next_cursor: str | None
    prev_cursor: str | None

    @classmethod
    def of(
        cls, query: JobQuery, found: list[trioqueue.JobInfo], total: trioqueue.JobCount
    ) -> JobPage:
        more = len(found) > query.limit
        if query.before is not None:
            jobs = found[1:] if more else found  # read backwards: the extra row is first
            earlier, later = more, True
        else:
            jobs = found[: query.limit]
            earlier, later = query.after is not None or query.offset > 0, more

        def cursor(job: trioqueue.JobInfo) -> str:
            return trioqueue.job_cursor(job, query.sort)

        return cls(
            jobs,
            total,
            cursor(jobs[-1]) if later and jobs else None,
            cursor(jobs[0]) if earlier and jobs else None,
        )

    def json(self) -> dict[str, Any]:
        return {
            "jobs": [job_json(j) for j in self.jobs],
            "total": self.total.n,
            "total_estimated": self.total.estimated,
            "next_cursor": self.next_cursor,
            "prev_cursor": self.prev_cursor,
        }


def _cursors(params: QueryParams) -> dict[str, str | None]:
    """``after`` and ``before``: at most one (the backend decodes them: a cursor that is
    not one of the sort's is its ValueError, which :meth:`JobQuery.run` raises)."""
    after = parse_text(params, "after", MAX_CURSOR)
    before = parse_text(params, "before", MAX_CURSOR)
    if after is not None and before is not None:
        raise ValueError("give after or before, not both")
    return {"after": after, "before": before}


@dataclass(frozen=True)
class ActionResult:
    """What one action on one job did: ``status`` 200, 404 (no such job) or 409 (its
    state does not allow it)."""

    job_id: int
    status: int
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == 200

    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.job_id, "ok": self.ok}
        if self.error is not None:
            out["error"] = self.error
            out["status"] = self.status
        return out


_NOT_ALLOWED: dict[Action, str] = {
    "cancel": "has already finished",
    "retry": "has not failed",
    "delete": "is running",
}


async def apply_action(backend: Backend, action: Action, job_id: int) -> ActionResult:
    """Cancel, retry or delete one job."""
    if action == "cancel":
        done = await backend.cancel(job_id)
    elif action == "retry":
        done = await backend.retry(job_id)
    else:
        done = await backend.delete_job(job_id)
    if done:
        return ActionResult(job_id, 200)
    try:
        await backend.get_job(job_id)
    except trioqueue.UnknownJobError:
        return ActionResult(job_id, 404, f"no job {job_id}")
    return ActionResult(job_id, 409, f"job {job_id} {_NOT_ALLOWED[action]}")


def ids_target(ids: list[int]) -> str:
    """The jobs a bulk action names, as the audit log's target (``1,2,3``)."""
    return ",".join(map(str, ids))


def bulk_detail(results: list[ActionResult]) -> dict[str, Any]:
    """What a bulk action on chosen jobs did, for the audit log: the ids acted on, and
    those refused."""
    return {
        "done": [r.job_id for r in results if r.ok],
        "refused": [r.job_id for r in results if not r.ok],
    }


def parse_bulk(body: Any) -> tuple[Action, list[int]]:
    """``{"action": ..., "ids": [...]}``; ValueError with a one-line reason."""
    if not isinstance(body, dict) or set(body) != {"action", "ids"}:
        raise ValueError('the body must be {"action": ..., "ids": [...]}')
    action, ids = body["action"], body["ids"]
    if action not in ACTIONS:
        raise ValueError(f"action must be one of {', '.join(ACTIONS)}, not {action!r}")
    if not isinstance(ids, list) or not 1 <= len(ids) <= MAX_BULK:
        raise ValueError(f"ids must be a list of 1 to {MAX_BULK} job ids")
    for job_id in ids:
        if type(job_id) is not int or not 1 <= job_id <= MAX_JOB_ID:
            raise ValueError(f"each id must be an integer from 1 to {MAX_JOB_ID}, not {job_id!r}")
    return action, list(dict.fromkeys(ids))  # each job once, in the given order


async def read_json(request: Request) -> Any:
    """The request's JSON body; ValueError with a one-line reason when it is not JSON.

    Python's parser recurses once per level of nesting: a body of a few thousand ``[``
    ends in RecursionError, which is bad input like any other (the bodies the API takes
    are two levels deep).
    """
    try:
        return json.loads(await request.body())
    except RecursionError:
        raise ValueError("the body must be JSON, not nested this deep") from None
    except ValueError:
        raise ValueError("the body must be JSON") from None


def routes(backend: Backend, guard: Guard) -> list[Route]:
    """The ``/api`` routes (``/api/events`` is :mod:`trioqueue.web.events`)."""

    async def queues(request: Request) -> Response:
        return JSONResponse(queues_json(await backend.queue_stats()))

    async def jobs(request: Request) -> Response:
        try:
            query = JobQuery.parse(request.query_params)
        except ValueError as exc:
            return error(400, str(exc))
        try:
            page = await query.run(backend)
        except ValueError as exc:  # a cursor not of this sort
            return error(400, str(exc))
        return JSONResponse(page.json())

    async def job(request: Request) -> Response:
        try:
            job_id = parse_job_id(request.path_params["job_id"])
        except ValueError as exc:
            return error(400, str(exc))
        try:
            info = await backend.get_job(job_id)
        except trioqueue.UnknownJobError:
            return error(404, f"no job {job_id}")
        return JSONResponse(job_detail_json(info))

    def one(action: Action) -> Route:
        async def endpoint(request: Request) -> Response:
            try:
                job_id = parse_job_id(request.path_params["job_id"])
            except ValueError as exc:
                return error(400, str(exc))
            result = await apply_action(backend, action, job_id)
            if not result.ok:
                return error(result.status, result.error or "")
            await record(request, f"job.{action}", str(job_id), {})
            return JSONResponse({"ok": True})

        if action == "delete":
            return Route("/api/jobs/{job_id}", guard.api(endpoint), methods=["DELETE"])
        return Route(f"/api/jobs/{{job_id}}/{action}", guard.api(endpoint), methods=["POST"])

    async def bulk(request: Request) -> Response:
        try:
            action, ids = parse_bulk(await read_json(request))
        except ValueError as exc:
            return error(400, str(exc))
        results = [await apply_action(backend, action, job_id) for job_id in ids]
        await record(request, f"jobs.{action}", ids_target(ids), bulk_detail(results))
        return JSONResponse({"action": action, "results": [r.json() for r in results]})

    async def attempts(request: Request) -> Response:
        try:
            job_id = parse_job_id(request.path_params["job_id"])
        except ValueError as exc:
            return error(400, str(exc))
        try:
            found = await backend.list_attempts(job_id)
        except trioqueue.UnknownJobError:
            return error(404, f"no job {job_id}")
        return JSONResponse({"id": job_id, "attempts": [attempt_json(a) for a in found]})

    async def timings(request: Request) -> Response:
        try:
            queue = parse_queue(request.path_params["queue"])
            window, _ = parse_window(request.query_params)
            found = await backend.queue_timings(window=float(window), queue=queue)
        except ValueError as exc:
            return error(400, str(exc))
        return JSONResponse(timings_json(queue, window, found.get(queue)))

    async def history(request: Request) -> Response:
        try:
            queue = parse_queue(request.path_params["queue"])
            window, buckets = parse_window(request.query_params)
            found = await backend.attempt_history(
                window=float(window), buckets=buckets, queue=queue
            )
        except ValueError as exc:
            return error(400, str(exc))
        return JSONResponse(
            {"queue": queue, "window": window, "buckets": [bucket_json(b) for b in found]}
        )

    async def workers(request: Request) -> Response:
        return JSONResponse([worker_json(w) for w in await backend.list_workers()])

    async def schedules(request: Request) -> Response:
        return JSONResponse([schedule_json(s) for s in await backend.list_schedules()])

    def on_queue(action: QueueAction) -> Route:
        async def endpoint(request: Request) -> Response:
            queue = request.path_params["queue"]
            try:
                done = await apply_queue_action(backend, action, queue)
            except ValueError as exc:
                return error(400, str(exc))
            await record(request, f"queue.{action}", queue, {})
            return JSONResponse({"ok": True} | done)

        # {queue:path}: a queue name may hold a slash (its suffix still picks the route).
        path = f"/api/queues/{{queue:path}}/{action}"
        return Route(path, guard.api(endpoint), methods=["POST"])

    async def limits(request: Request) -> Response:
        queue = request.path_params["queue"]
        try:
            changes = parse_limits(await read_json(request))
            done = await set_limits(backend, queue, changes)
        except (TypeError, ValueError) as exc:
            return error(400, str(exc))
        await record(request, "queue.limits", queue, changes)
        return JSONResponse({"ok": True} | done)

    return [
        Route("/api/queues", guard.api(queues), methods=["GET"]),
        on_queue("pause"),
        on_queue("resume"),
        # PUT too: setting a queue's limits is idempotent, as PUT says (docs/dashboard.rst).
        Route("/api/queues/{queue:path}/limits", guard.api(limits), methods=["POST", "PUT"]),
        Route("/api/queues/{queue:path}/timings", guard.api(timings), methods=["GET"]),
        Route("/api/queues/{queue:path}/history", guard.api(history), methods=["GET"]),
        Route("/api/jobs", guard.api(jobs), methods=["GET"]),
        Route("/api/jobs/actions", guard.api(bulk), methods=["POST"]),
        Route("/api/jobs/{job_id}", guard.api(job), methods=["GET"]),
        Route("/api/jobs/{job_id}/attempts", guard.api(attempts), methods=["GET"]),
        one("delete"),
        one("cancel"),
        one("retry"),
        Route("/api/workers", guard.api(workers), methods=["GET"]),
        Route("/api/schedules", guard.api(schedules), methods=["GET"]),
    ]
