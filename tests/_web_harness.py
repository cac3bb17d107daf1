"""The dashboard's tests: an HTTP client on the ASGI app (tests/unit/conftest.py gives
each test its memory ``backend``)."""

from __future__ import annotations

from typing import Any

import httpx

BASE = "http://127.0.0.1"
#: The Origin header of a same-origin state-changing request.
SAME_SITE = {"Origin": BASE}


def client(app: Any, **kwargs: Any) -> httpx.AsyncClient:
    """A client that calls ``app`` in-process, as if served at :data:`BASE`."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE, **kwargs)
