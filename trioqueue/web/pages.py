"""The dashboard's HTML pages (docs/dashboard.rst, "Pages"): Jinja2 templates, htmx actions.

Pages are rendered on the server from the same backend calls as the JSON API; the browser
adds only htmx (actions without a reload, confirmations) and ``dashboard.js`` (live updates
from ``/api/events``, ticking countdowns). Every action also works as a plain form post; a
plain post that changes jobs or pauses a queue first answers with a confirmation page, whose
own post (``confirmed=yes``) acts. htmx sends its posts only after the page's own dialog
(``hx-confirm``), marked by the ``HX-Request`` header that no form can set: so a page whose
scripts are off (a sandboxed frame, were framing not refused anyway) cannot act in one click.
"""

from __future__ import annotations

import json
import zoneinfo
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

import trioqueue
from trioqueue.web.api import (
    ACTIONS,
    MAX_BULK,
    QUEUE_ACTIONS,
    SEARCH_WINDOW,
    STATUSES,
    JobQuery,
    apply_action,
    apply_queue_action,
    bulk_detail,
    ids_target,
    job_json,
    parse_job_id,
    parse_queue,
    queue_json,
    queues_json,
)
from trioqueue.web.attempts import timings_json
from trioqueue.web.auditor import record
from trioqueue.web.auth import Guard, Handler, safe_next
from trioqueue.web.charts import seconds_text
from trioqueue.web.clock import database_now, local_now
from trioqueue.web.counts import FINISHED, count_text
from trioqueue.web.policies import keep_text
from trioqueue.web.queue_charts import queue_charts
from trioqueue.web.render import Renderer
from trioqueue.web.timeline import OUTCOME_LABELS, error_attempt, steps
from trioqueue.web.visible import finalize, verbatim, visible_lines

__all__ = ["routes"]

Backend = trioqueue.MemoryBackend | trioqueue.PostgresBackend

SORT_LABELS: tuple[tuple[str, str], ...] = (
    ("-id", "newest first"),
    ("id", "oldest first"),
    ("-priority", "priority, highest first"),
    ("priority", "priority, lowest first"),
    ("-created_at", "created, latest first"),
    ("created_at", "created, earliest first"),
    ("-finished_at", "finished, latest first"),
    ("finished_at", "finished, earliest first"),
)
PAGE_SIZE = 50
#: The job page shows the latest attempts only: a job retried without end would otherwise
#: make a page of megabytes (each traceback may hold 16,000 characters).
MAX_SHOWN_ATTEMPTS = 50
CHART_WIDTH, CHART_HEIGHT, CHART_BUCKETS = 600, 120, 60


def _age(seconds: float | None) -> str:
    """A duration for people: 4s, 3m 20s, 2h 5m, 3d 4h."""
    if seconds is None:
        return "–"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def _local_time(t: datetime, timezone: str) -> str:
    """``t`` in the schedule's own time zone, with its offset (UTC for a zone this host does
    not know)."""
    try:
        zone: tzinfo = zoneinfo.ZoneInfo(timezone)
    except (KeyError, ValueError, OSError):
        zone = UTC
    return t.astimezone(zone).strftime("%Y-%m-%d %H:%M %z")


def _limits_text(queue: dict[str, Any]) -> str:
    """A queue's limits for people: ``max 5 running, max 2.5/s``; ``–`` for none."""
    parts = []
    if queue["max_running"] is not None:
        parts.append(f"max {queue['max_running']} running")
    if queue["max_per_second"] is not None:
        parts.append(f"max {queue['max_per_second']:g}/s")
    return ", ".join(parts) or "–"


def _took(job: trioqueue.JobInfo) -> str:
    """The job list's Took column: from enqueued to finished, every attempt and wait
    included (the job's page has each attempt's own run time)."""
    if job.finished_at is None:
        return "–"
    return seconds_text(max(0.0, (job.finished_at - job.created_at).total_seconds()))


def _url_path(name: str) -> str:
    """A queue name as a path segment: every character but the slash quoted (the route
    takes a slash in a name)."""
    return quote(name, safe="/")


def _now() -> datetime:
    return local_now()


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("trioqueue.web", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        # Every value shown with its hidden characters as escapes (visible.py).
        finalize=finalize,
    )
    env.filters |= {"verbatim": verbatim, "visible_lines": visible_lines}
    env.globals |= {
        "static": lambda name: f"/static/{name}",
        "age": _age,
        "now": _now,
        "ago": lambda t: f"{_age((_now() - t).total_seconds())} ago",
        "until": lambda t: _age((t - _now()).total_seconds()),
        # From the database's now (clock.py): leases and heartbeats are its timestamps.
        "until_at": lambda t, now: _age((t - now).total_seconds()),
        "ago_at": lambda t, now: f"{_age((now - t).total_seconds())} ago",
        "iso": lambda t: None if t is None else t.isoformat(),
        "short_time": lambda t: t.astimezone(UTC).strftime("%m-%d %H:%M:%S"),
        "full_time": lambda t: t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "payload_line": _payload_line,
        "error_line": _error_line,
        "statuses": STATUSES,
        "sorts": SORT_LABELS,
        "limits_text": _limits_text,
        "seconds": lambda value: "–" if value is None else seconds_text(value),
        "took": _took,
        "steps": steps,
        "outcome_label": lambda outcome: OUTCOME_LABELS.get(outcome, outcome),
        "url_path": _url_path,
        "count_text": count_text,
        "finished_states": FINISHED,
        "keep": keep_text,  # a retention's keep-time: 7d, forever (policies.py)
    }
    return env


def _payload_line(job: trioqueue.JobInfo) -> str:
    text = _payload_text(job.payload, indent=None)
    cut = isinstance(job.payload, trioqueue.TruncatedText)
    return text if len(text) <= 80 and not cut else text[:79] + "…"


def _error_line(job: trioqueue.JobInfo) -> str:
    """The job list's error cell: the list read carries a prefix of a long error, marked."""
    error = job.last_error or ""
    return error + "…" if isinstance(error, trioqueue.TruncatedText) else error


def _payload_text(payload: Any, *, indent: int | None) -> str:
    if isinstance(payload, trioqueue.UndecodablePayload | trioqueue.TruncatedText):
        return str(payload)
    return json.dumps(payload, indent=indent, ensure_ascii=False, sort_keys=indent is not None)


@dataclass(frozen=True)
class Bar:
    x: float
    label: str
    succeeded: int
    failed: int
    succeeded_y: float
    succeeded_height: float
    failed_y: float
    failed_height: float


def chart(history: list[trioqueue.FinishedBucket]) -> dict[str, Any]:
    """The overview's bar chart as SVG coordinates: one stacked bar per bucket, failed on
    top of succeeded, scaled to the busiest bucket."""
    peak = max((b.succeeded + b.failed for b in history), default=0)
    scale = CHART_HEIGHT / peak if peak else 0.0
    step = CHART_WIDTH / max(len(history), 1)
    bars = []
    for i, b in enumerate(history):
        ok_h, failed_h = b.succeeded * scale, b.failed * scale
        bars.append(
            Bar(
                x=round(i * step + 1, 2),
                label=b.start.astimezone(UTC).strftime("%H:%M"),
                succeeded=b.succeeded,
                failed=b.failed,
                succeeded_y=round(CHART_HEIGHT - ok_h, 2),
                succeeded_height=round(ok_h, 2),
                failed_y=round(CHART_HEIGHT - ok_h - failed_h, 2),
                failed_height=round(failed_h, 2),
            )
        )
    return {
        "width": CHART_WIDTH,
        "height": CHART_HEIGHT,
        "bar_width": round(max(step - 2, 1), 2),
        "bars": bars,
        "peak": peak,
        "succeeded": sum(b.succeeded for b in history),
        "failed": sum(b.failed for b in history),
        "first_label": bars[0].label if bars else "",
        "last_label": "now",
    }


def _page_url(
    query: JobQuery, offset: int = 0, *, after: str | None = None, before: str | None = None
) -> str:
    params = {
        "queue": query.queue or "",
        "status": query.status or "",
        "cancelled": "" if query.cancelled is None else str(query.cancelled).lower(),
        "q": query.search or "",
        "sort": query.sort,
        "limit": str(query.limit),
        "offset": str(offset) if offset else "",
        "after": after or "",
        "before": before or "",
    }
    return "/jobs?" + urlencode({k: v for k, v in params.items() if v})


def _here(query: JobQuery) -> str:
    """This page's own address (the actions' way back)."""
    return _page_url(query, query.offset, after=query.after, before=query.before)


def routes(backend: Backend, guard: Guard) -> list[Route]:
    env = environment()

    renderer = Renderer(guard, env)
    render, problem, confirm = renderer.page, renderer.problem, renderer.confirm

    async def overview(request: Request) -> Response:
        stats = await backend.queue_stats()
        history = await backend.finished_history(window=3600.0, buckets=CHART_BUCKETS)
        return render(
            request,
            "overview.html",
            page="overview",
            title="Overview",
            queues=queues_json(stats),
            chart=chart(history),
            events_url="/api/events",
        )

    async def jobs(request: Request) -> Response:
        try:
            query = JobQuery.parse(request.query_params, default_limit=PAGE_SIZE)
        except ValueError as exc:
            return problem(request, 400, "Bad filter", str(exc))
        if "sort" not in request.query_params:
            query = JobQuery(**{**query.__dict__, "sort": "-id"})  # newest first by default
        try:
            page = await query.run(backend)
        except ValueError as exc:  # a cursor not of this sort
            return problem(request, 400, "Bad page", str(exc))
        found, total = page.jobs, page.total
        names = sorted(await backend.queue_stats())
        if query.queue and query.queue not in names:
            names.append(query.queue)
        live = [j.id for j in found if j.status in ("scheduled", "ready", "running")]
        # Numbered rows only on offset pages from the top; a cursor page has no known
        # position (counting the rows before it is what a cursor saves).
        numbered = query.after is None and query.before is None
        return render(
            request,
            "jobs.html",
            page="jobs",
            title="Jobs",
            query=query,
            jobs=found,
            total=total.n,
            total_text=count_text(total.n, total.estimated),
            total_estimated=total.estimated,
            first=query.offset + 1 if numbered else None,
            last=query.offset + len(found) if numbered else None,
            searched=SEARCH_WINDOW if query.search else None,
            queue_names=names,
            here=_here(query),
            prev_url=_page_url(query, before=page.prev_cursor) if page.prev_cursor else None,
            next_url=_page_url(query, after=page.next_cursor) if page.next_cursor else None,
            events_url="/api/events?jobs=" + ",".join(map(str, live[:200])),
        )

    async def job(request: Request) -> Response:
        try:
            job_id = parse_job_id(request.path_params["job_id"])
        except ValueError as exc:
            return problem(request, 400, "Bad job id", str(exc))
        try:
            info = await backend.get_job(job_id)
        except trioqueue.UnknownJobError:
            return problem(request, 404, "No such job", f"There is no job {job_id}.")
        attempts = await backend.list_attempts(job_id)
        shown = attempts[-MAX_SHOWN_ATTEMPTS:]
        try:
            edges = await backend.dependencies(job_id)  # docs/protocol.rst §21
        except trioqueue.UnknownJobError:  # deleted since it was read: it has none now
            edges = trioqueue.JobDependencies(job_id)
        return render(
            request,
            "job.html",
            page="job",
            title=f"Job {job_id}",
            job=info,
            db_now=await database_now(backend),
            attempts=shown,
            earlier_attempts=len(attempts) - len(shown),
            error_attempt=error_attempt(info.last_error, attempts),
            group=job_json(info)["group"],
            payload=_payload_text(info.payload, indent=2),
            result=None if info.result is None else _payload_text(info.result, indent=2),
            # The latest checkpoint an attempt stored (at most 64 KiB of JSON: shown whole);
            # None when none was (a stored JSON null shows as null).
            checkpoint=(
                None if info.checkpointed_at is None else _payload_text(info.checkpoint, indent=2)
            ),
            undecodable=isinstance(info.payload, trioqueue.UndecodablePayload),
            edges=edges,
            events_url=f"/api/events?jobs={job_id}",
        )

    async def queue(request: Request) -> Response:
        try:
            name = parse_queue(request.path_params["queue"])
        except ValueError as exc:
            return problem(request, 400, "Bad queue name", str(exc))
        stats = (await backend.queue_stats()).get(name)
        timings = (await backend.queue_timings(window=3600.0, queue=name)).get(name)
        history = await backend.attempt_history(window=3600.0, buckets=CHART_BUCKETS, queue=name)
        retention = (await backend.get_retention()).for_queue(name)
        return render(
            request,
            "queue.html",
            page="queue",
            title=f"Queue {name}",
            queue=queue_json(name, stats),
            timings=timings_json(name, 3600, timings),
            charts=queue_charts(name, history),
            jobs_url="/jobs?" + urlencode({"queue": name}),
            retention=retention,  # its own policy, else the default (queue None)
        )

    async def workers(request: Request) -> Response:
        return render(
            request,
            "workers.html",
            page="workers",
            title="Workers",
            workers=await backend.list_workers(),
        )

    async def schedules(request: Request) -> Response:
        rows = [
            {
                "info": info,
                "next_local": _local_time(info.next_run_at, info.timezone),
                "last_local": None
                if info.last_run_at is None
                else _local_time(info.last_run_at, info.timezone),
                "payload": _payload_text(info.payload, indent=None),
            }
            for info in await backend.list_schedules()
        ]
        return render(request, "schedules.html", page="schedules", title="Schedules", rows=rows)

    def confirmed(request: Request, form: Form) -> bool:
        return bool(request.headers.get("hx-request")) or form.get("confirmed") == "yes"

    async def actions(request: Request) -> Response:
        """Cancel, retry or delete the selected jobs (a form post, by htmx or not)."""
        next_url = safe_next(request.query_params.get("next"))
        try:
            form = await Form.read(request)
            chosen = set(form.getlist("action"))
            next_url = safe_next(form.get("next") or request.query_params.get("next"))
            if len(chosen) != 1 or next(iter(chosen)) not in ACTIONS:
                raise ValueError(f"action must be one of {', '.join(ACTIONS)}")
            action = next(a for a in ACTIONS if a in chosen)
            ids = list(dict.fromkeys(parse_job_id(i) for i in form.getlist("ids")))
            if not 1 <= len(ids) <= MAX_BULK:
                raise ValueError("select at least one job")
        except ValueError as exc:
            if request.headers.get("hx-request"):
                # A template, so the message is escaped as every shown value is.
                fragment = env.get_template("_action_error.html").render(message=str(exc))
                return HTMLResponse(fragment)
            return problem(request, 400, "Bad action", str(exc))
        if not confirmed(request, form):
            fields = [("action", action), *(("ids", str(i)) for i in ids), ("next", next_url)]
            jobs = f"job {ids[0]}" if len(ids) == 1 else f"these {len(ids)} jobs"
            undo = " This cannot be undone." if action == "delete" else ""
            back = f"/jobs/{ids[0]}" if len(ids) == 1 and action != "delete" else "/jobs"
            return confirm(
                request,
                f"{action.capitalize()} {jobs}?{undo}",
                f"Yes, {action} {jobs}",
                fields,
                back,
            )
        results = [await apply_action(backend, action, job_id) for job_id in ids]
        await record(request, f"jobs.{action}", ids_target(ids), bulk_detail(results))
        all_ok = all(r.ok for r in results)
        if not request.headers.get("hx-request"):
            return RedirectResponse(next_url if next_url != "/" else "/jobs", status_code=303)
        fragment = env.get_template("_results.html").render(
            action=action, results=results, all_ok=all_ok, done=sum(r.ok for r in results)
        )
        response = HTMLResponse(fragment)
        if all_ok:
            # Show the new state at once: reload this page, or go where the form said
            # (a deleted job's page would be a 404).
            if "next" in request.query_params or form.get("next"):
                response.headers["HX-Redirect"] = next_url
            else:
                response.headers["HX-Refresh"] = "true"
        return response

    async def queue_actions(request: Request) -> Response:
        """Pause or resume a queue: the overview's buttons without JavaScript (with it,
        they post to the JSON API, ``/api/queues/{queue}/pause``)."""
        try:
            form = await Form.read(request)
            action = form.get("action")
            if action not in QUEUE_ACTIONS:
                raise ValueError(f"action must be one of {', '.join(QUEUE_ACTIONS)}")
            queue = form.get("queue") or ""
            if action == "pause" and not confirmed(request, form):
                return confirm(
                    request,
                    f"Pause queue {queue}? No pool claims from it until it is resumed; "
                    "running jobs go on.",
                    "Yes, pause it",
                    [("queue", queue), ("action", action)],
                    "/",
                )
            await apply_queue_action(backend, action, queue)
        except ValueError as exc:
            return problem(request, 400, "Bad action", str(exc))
        await record(request, f"queue.{action}", queue, {})
        return RedirectResponse("/", status_code=303)

    async def login(request: Request) -> Response:
        if guard.token is None:
            return RedirectResponse("/", status_code=303)
        if request.method == "GET":
            return render(
                request,
                "login.html",
                page="login",
                title="Log in",
                failed=False,
                next=safe_next(request.query_params.get("next")),
            )
        try:
            form = await Form.read(request)
        except ValueError as exc:
            return problem(request, 400, "Bad form", str(exc))
        next_url = safe_next(form.get("next"))
        if not guard.token_matches(form.get("token") or ""):
            return render(
                request, "login.html", 401, page="login", title="Log in", failed=True, next=next_url
            )
        response = RedirectResponse(next_url, status_code=303)
        guard.log_in(request, response)
        return response

    async def logout(request: Request) -> Response:
        response = RedirectResponse("/login" if guard.token else "/", status_code=303)
        guard.log_out(request, response)
        return response

    return [
        Route("/", guard.page(overview), methods=["GET"]),
        Route("/jobs", guard.page(jobs), methods=["GET"]),
        Route("/jobs/actions", guard.page(actions), methods=["POST"]),
        Route("/queues/actions", guard.page(queue_actions), methods=["POST"]),
        Route("/jobs/{job_id}", guard.page(job), methods=["GET"]),
        # {queue:path}: a queue name may hold a slash.
        Route("/queues/{queue:path}", guard.page(queue), methods=["GET"]),
        Route("/workers", guard.page(workers), methods=["GET"]),
        Route("/schedules", guard.page(schedules), methods=["GET"]),
        Route("/login", _same_site_posts(guard, login), methods=["GET", "POST"]),
        Route("/logout", _same_site_posts(guard, logout), methods=["POST"]),
    ]


class Form:
    """An ``application/x-www-form-urlencoded`` body (what browsers and htmx send), read
    without python-multipart: the dashboard's forms have no file fields."""

    MAX_BYTES = 1 << 20

    def __init__(self, fields: dict[str, list[str]]) -> None:
        self.fields = fields

    @classmethod
    async def read(cls, request: Request) -> Form:
        body = await request.body()
        if len(body) > cls.MAX_BYTES:
            raise ValueError("the form is too large")
        kind = request.headers.get("content-type", "").partition(";")[0].strip()
        if body and kind != "application/x-www-form-urlencoded":
            raise ValueError("the form must be application/x-www-form-urlencoded")
        return cls(parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True))

    def get(self, name: str) -> str | None:
        values = self.fields.get(name)
        return values[0] if values else None

    def getlist(self, name: str) -> list[str]:
        return self.fields.get(name, [])


def _same_site_posts(guard: Guard, handler: Handler) -> Handler:
    """The login form needs no token, but its post must come from this site (so another
    site cannot log a browser in)."""

    async def endpoint(request: Request) -> Response:
        if request.method == "POST" and not guard.same_site(request):
            return Response(
                "cross-site request refused (Origin does not match)\n",
                status_code=403,
                media_type="text/plain",
            )
        return await handler(request)

    return endpoint
