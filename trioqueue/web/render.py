"""Rendering a page of the dashboard from its template (the one environment of
:func:`trioqueue.web.pages.environment`, so the same escaping everywhere), its error page,
and the confirmation page a plain form post gets before it acts (docs/dashboard.rst,
"Controls")."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse

from trioqueue.web.auth import Guard, safe_next

__all__ = ["ROOT_DATABASES", "Renderer"]

#: The scope key a multi-database app sets on the pages it serves at its root (the login
#: form, trioqueue/web/multi.py): the databases, ``(name, prefix)`` each. Such a page is
#: not under any database's prefix, so its navigation links to them and to the overview
#: instead of to one database's pages (which exist only under a prefix).
ROOT_DATABASES = "trioqueue.root_databases"


class Renderer:
    """Renders templates as the other pages do (read-only flag, login state, title)."""

    def __init__(self, guard: Guard, env: jinja2.Environment) -> None:
        self.guard = guard
        self.env = env

    def page(
        self, request: Request, template: str, status: int = 200, **context: Any
    ) -> HTMLResponse:
        context.setdefault("events_url", None)
        context.setdefault("databases", request.scope.get(ROOT_DATABASES))
        html = self.env.get_template(template).render(
            read_only=self.guard.read_only,
            logged_in=self.guard.token is not None and self.guard.authorised(request),
            title=context.pop("title", ""),
            **context,
        )
        return HTMLResponse(html, status_code=status)

    def problem(self, request: Request, status: int, title: str, message: str) -> HTMLResponse:
        return self.page(request, "error.html", status, page="error", title=title, message=message)

    def confirm(
        self,
        request: Request,
        question: str,
        button: str,
        fields: list[tuple[str, str]],
        back: str,
    ) -> HTMLResponse:
        """The page a plain form post gets before it acts: the same fields, confirmed."""
        post_to = request.url.path
        if request.url.query:
            post_to += "?" + urlencode({"next": safe_next(request.query_params.get("next"))})
        return self.page(
            request,
            "confirm.html",
            page="confirm",
            title="Confirm",
            question=question,
            button=button,
            fields=fields,
            post_to=post_to,
            back=back,
        )
