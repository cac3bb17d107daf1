"""The web dashboard (docs/dashboard.rst): HTML pages, a JSON API, live events and metrics.

``create_app(backend, ...)`` returns the ASGI app; ``serve(app, host=..., port=...)`` runs it
with hypercorn under trio; ``check_bind(host, token)`` refuses a public address without a
token; ``create_multi_app({name: backend}, ...)`` is one dashboard over several databases,
each under ``/db/NAME`` (:mod:`~trioqueue.web.multi`). The modules: :mod:`~trioqueue.web.app` (assembly, serving), :mod:`~trioqueue.web.auth`
(token, login cookie, read-only, same-origin), :mod:`~trioqueue.web.api` (JSON),
:mod:`~trioqueue.web.pages` (HTML), :mod:`~trioqueue.web.events` (server-sent events).
"""

from trioqueue.web.api import job_json
from trioqueue.web.app import create_app, serve
from trioqueue.web.auth import check_bind
from trioqueue.web.multi import create_multi_app

__all__ = ["check_bind", "create_app", "create_multi_app", "job_json", "serve"]
