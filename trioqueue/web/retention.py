"""The Retention page and its endpoints (docs/dashboard.rst, "Retention"): how long each
queue's finished jobs and the audit log's entries are kept (docs/protocol.rst §15), and
which pool holds the maintainer lease that prunes them.

``GET /api/retention`` and ``/retention`` read; ``PUT /api/retention/default``,
``PUT|DELETE /api/retention/queues/{queue}`` and ``PUT /api/retention/audit`` change, as do
the page's plain form posts to ``/retention/actions``. A shorter keep-time deletes jobs at
the maintainer's next pass, so a form post answers with a confirmation page first (as every
control that deletes does); its own post acts. Every change is refused read-only and from
another site (:class:`~trioqueue.web.auth.Guard`), checked whole before anything is
written (400 naming every problem, :mod:`trioqueue.web.policies`), and recorded in the
audit log with the values it replaced (:mod:`trioqueue.web.auditor`).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

import trioqueue
from trioqueue.web.api import parse_queue, read_json
from trioqueue.web.auditor import record
from trioqueue.web.auth import Guard, error
from trioqueue.web.clock import database_now
from trioqueue.web.pages import Form, environment
from trioqueue.web.policies import (
    KINDS,
    UNIT_NAMES,
    form_keep,
    keep_text,
    parse_audit_body,
    parse_policy_body,
    policy_json,
    prefill,
    retention_json,
)
from trioqueue.web.render import Renderer

__all__ = ["routes"]

Backend = trioqueue.MemoryBackend | trioqueue.PostgresBackend

#: The page's form actions.
FORM_ACTIONS = ("set_default", "set", "clear", "audit")


async def _state(backend: Backend) -> dict[str, Any]:
    return retention_json(await backend.get_retention(), await backend.maintainer())


async def set_policy(
    request: Request, backend: Backend, queue: str | None, keeps: dict[str, float | None]
) -> None:
    """Set ``queue``'s policy (None: the default) and record it, with what it replaced."""
    current = await backend.get_retention()
    old = current.default if queue is None else current.for_queue(queue)
    await backend.set_retention(queue, **keeps)
    if queue is None:
        await record(
            request, "retention.set_default", "default", keeps | {"before": policy_json(old)}
        )
    else:
        # "own": whether the queue had a policy of its own, or followed the default.
        before = policy_json(old) | {"own": old.queue is not None}
        await record(request, "retention.set", queue, keeps | {"before": before})


async def clear_policy(request: Request, backend: Backend, queue: str) -> bool:
    """Drop ``queue``'s own policy and record it; False (nothing recorded) if it had none."""
    old = (await backend.get_retention()).for_queue(queue)
    if not await backend.clear_retention(queue):
        return False
    await record(request, "retention.clear", queue, {"before": policy_json(old)})
    return True


async def set_audit(request: Request, backend: Backend, seconds: float | None) -> None:
    before = (await backend.get_retention()).audit
    await backend.set_audit_retention(seconds)
    await record(request, "retention.audit", "audit", {"seconds": seconds, "before": before})


def _queue_or_problem(raw: str) -> tuple[str, str | None]:
    try:
        return parse_queue(raw), None
    except ValueError as exc:
        return raw, str(exc)


def _seconds_field(seconds: float | None) -> str:
    """A keep-time as the confirmation's hidden field carries it: seconds in plain
    decimals (never ``1e-09``, which the form's check would refuse), empty for ever."""
    if seconds is None:
        return ""
    return f"{seconds:.9f}".rstrip("0").rstrip(".")


def routes(backend: Backend, guard: Guard) -> list[Route]:
    renderer = Renderer(guard, environment())

    async def api_read(request: Request) -> Response:
        return JSONResponse(await _state(backend))

    async def api_default(request: Request) -> Response:
        try:
            keeps = parse_policy_body(await read_json(request))
            await set_policy(request, backend, None, keeps)
        except (TypeError, ValueError) as exc:
            return error(400, str(exc))
        return JSONResponse({"ok": True} | await _state(backend))

    async def api_queue(request: Request) -> Response:
        queue, problem = _queue_or_problem(request.path_params["queue"])
        try:
            if request.method == "DELETE":
                if problem is not None:
                    raise ValueError(problem)
                if not await clear_policy(request, backend, queue):
                    return error(404, f"queue {queue} has no retention of its own")
            else:
                keeps = parse_policy_body(await read_json(request), queue_problem=problem)
                await set_policy(request, backend, queue, keeps)
        except (TypeError, ValueError) as exc:
            return error(400, str(exc))
        return JSONResponse({"ok": True} | await _state(backend))

    async def api_audit(request: Request) -> Response:
        try:
            await set_audit(request, backend, parse_audit_body(await read_json(request)))
        except (TypeError, ValueError) as exc:
            return error(400, str(exc))
        return JSONResponse({"ok": True} | await _state(backend))

    async def page(request: Request) -> Response:
        retention = await backend.get_retention()
        return renderer.page(
            request,
            "retention.html",
            page="retention",
            title="Retention",
            retention=retention,
            maintainer=await backend.maintainer(),
            db_now=await database_now(backend),  # the lease runs by the database's clock
            prefill=prefill,
            kinds=KINDS,
            units=UNIT_NAMES,
        )

    async def form_post(request: Request) -> Response:
        try:
            form = await Form.read(request)
            fields = {name: values[0] for name, values in form.fields.items() if values}
            action = fields.get("action")
            if action not in FORM_ACTIONS:
                raise ValueError(f"action must be one of {', '.join(FORM_ACTIONS)}")
            return await _form_action(request, action, fields)
        except (TypeError, ValueError) as exc:
            return renderer.problem(request, 400, "Bad retention", str(exc))

    async def _form_action(request: Request, action: str, fields: dict[str, str]) -> Response:
        """Check the form whole; ask first; act once confirmed."""
        problems: list[str] = []
        queue: str | None = None
        if action in ("set", "clear"):
            queue, problem = _queue_or_problem(fields.get("queue") or "")
            problems += [] if problem is None else [problem]
        names = ("audit",) if action == "audit" else KINDS if action != "clear" else ()
        keeps = {name: form_keep(fields, name, problems) for name in names}
        if problems:
            raise ValueError("; ".join(problems))
        if fields.get("confirmed") != "yes":
            return _confirm(request, action, queue, keeps)
        if action == "audit":
            await set_audit(request, backend, keeps["audit"])
        elif action == "clear":
            assert queue is not None
            if not await clear_policy(request, backend, queue):
                return renderer.problem(
                    request, 404, "No such policy", f"Queue {queue} has no retention of its own."
                )
        else:
            await set_policy(request, backend, queue, keeps)
        return RedirectResponse("/retention", status_code=303)

    def _confirm(
        request: Request, action: str, queue: str | None, keeps: dict[str, float | None]
    ) -> Response:
        """The confirmation page: what will be kept, in words, and the same fields in
        seconds (so what is confirmed is exactly what is set)."""
        fields = [("action", action)]
        if queue is not None:
            fields.append(("queue", queue))
        for name, seconds in keeps.items():
            fields += [(name, _seconds_field(seconds)), (f"{name}_unit", "s")]
        if action == "clear":
            question = (
                f"Drop queue {queue}'s own retention? The default applies to it again, and "
                "its finished jobs past the default are deleted at the maintainer's next pass."
            )
        elif action == "audit":
            question = (
                f"Keep audit entries {keep_text(keeps['audit'])}? Older entries are deleted "
                "at the maintainer's next pass."
            )
        else:
            whose, its = (
                ("every queue without a policy of its own", "their")
                if queue is None
                else (f"queue {queue}", "its")
            )
            question = (
                f"Keep the succeeded jobs of {whose} {keep_text(keeps['succeeded'])} and {its} "
                f"failed jobs {keep_text(keeps['failed'])}? Finished jobs older than that are "
                "deleted at the maintainer's next pass. This cannot be undone."
            )
        return renderer.confirm(request, question, "Yes, change it", fields, "/retention")

    return [
        Route("/api/retention", guard.api(api_read), methods=["GET"]),
        Route("/api/retention/default", guard.api(api_default), methods=["PUT"]),
        Route("/api/retention/audit", guard.api(api_audit), methods=["PUT"]),
        # {queue:path}: a queue name may hold a slash.
        Route(
            "/api/retention/queues/{queue:path}", guard.api(api_queue), methods=["PUT", "DELETE"]
        ),
        Route("/retention", guard.page(page), methods=["GET"]),
        Route("/retention/actions", guard.page(form_post), methods=["POST"]),
    ]
