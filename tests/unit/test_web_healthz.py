"""``GET /healthz`` (trioqueue/web/healthz.py, docs/howto/deploy.rst): 200 while the backend
answers its cheapest read, 503 otherwise; no token, and nothing of the reason told."""

from __future__ import annotations

import trio

import trioqueue
from trioqueue.testing import error, hang
from trioqueue.web import create_app
from trioqueue.web import healthz as healthz_module

from .._web_harness import client

TOKEN = "k9Vf2L0sQe7XbT4wZpR1mA8nY3cD6hJ"


async def test_healthz_answers_ok_without_a_token(backend: trioqueue.MemoryBackend) -> None:
    app = create_app(backend, token=TOKEN, allowed_hosts=["127.0.0.1"])
    async with client(app) as http:
        answer = await http.get("/healthz")
        head = await http.head("/healthz")
    assert answer.status_code == 200
    assert answer.json() == {"status": "ok"}
    assert head.status_code == 200
    assert backend.statistics().calls["clock"] >= 1  # the backend was asked, each time


async def test_healthz_is_unavailable_when_the_database_fails_and_says_no_more(
    backend: trioqueue.MemoryBackend,
) -> None:
    backend.inject("clock", error(trioqueue.BackendError("host db.internal refused role ops")))
    async with client(create_app(backend)) as http:
        answer = await http.get("/healthz")
    assert answer.status_code == 503
    assert answer.json() == {"status": "unavailable"}


async def test_healthz_gives_up_on_a_database_that_hangs(
    backend: trioqueue.MemoryBackend, autojump_clock: trio.abc.Clock
) -> None:
    backend.inject("clock", hang())
    async with client(create_app(backend)) as http:
        started = trio.current_time()
        answer = await http.get("/healthz")
    assert answer.status_code == 503
    assert trio.current_time() - started == healthz_module.TIMEOUT


async def test_healthz_keeps_the_host_check(backend: trioqueue.MemoryBackend) -> None:
    """A DNS-rebinding page learns nothing more here than anywhere else."""
    async with client(create_app(backend)) as http:
        answer = await http.get("/healthz", headers={"Host": "attacker.test"})
    assert answer.status_code != 200
    assert "ok" not in answer.text
