"""One ``trioqueue worker`` process serving queues on two databases (docs/cli.rst, "worker
over several databases"; docs/howto/beyond-one-server.rst).

Two databases of the test's own on the shared server (``CREATE DATABASE``, dropped after;
the server itself is never reconfigured), each migrated. The worker reaches database B
through a TCP proxy run by the test, so that B can be made unreachable and brought back
without touching the server: closing the proxy refuses every new connection to B and cuts
every open one, as a server going away does. The test checks:

- each queue's jobs are drained from its own database (a job of queue ``qb`` enqueued in
  database A stays there, untouched: ``qb`` runs on B);
- while B is unreachable, the pool of A goes on draining, and B's backlog waits;
- once B is back, its pool drains its backlog without a restart;
- one SIGTERM stops every pool, and the process exits 0; no line shows a password.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

import trioqueue
from tests._postgres_harness import wait_until_finished

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "n0t-4-s3cret"  # trust auth ignores it; no line may show it

APP = """\
async def handler(payload, ctx):
    return {"queue": ctx.queue}
"""


def _with_database(dsn: str, database: str, *, port: int | None = None) -> str:
    """``dsn`` naming ``database`` (and the proxy's ``port``, with a password to mask)."""
    parts = urllib.parse.urlsplit(dsn)
    netloc = parts.netloc
    if port is not None:
        user = parts.username or "postgres"
        netloc = f"{user}:{PASSWORD}@127.0.0.1:{port}"
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, path=f"/{database}"))


async def _admin(dsn: str, statement: str) -> None:
    """One statement outside a transaction (CREATE and DROP DATABASE need that)."""
    async with (
        trioqueue.open_postgres(dsn, max_connections=1) as backend,
        backend.acquire() as connection,
    ):
        await connection.execute(statement)


class Proxy:
    """A TCP forwarder to the server, for one database's DSN: ``stop`` closes the listener
    and every forwarded connection; ``serve`` again on the same port brings it back."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.scope = trio.CancelScope()

    async def serve(
        self, port: int = 0, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
    ) -> None:
        self.scope = trio.CancelScope()
        with self.scope:
            listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
            bound: int = listeners[0].socket.getsockname()[1]
            async with trio.open_nursery() as nursery:
                await nursery.start(trio.serve_listeners, self._forward, listeners)
                task_status.started(bound)

    def stop(self) -> None:
        self.scope.cancel()

    async def _forward(self, client: trio.SocketStream) -> None:
        server = await trio.open_tcp_stream(self.host, self.port)
        async with client, server, trio.open_nursery() as nursery:
            nursery.start_soon(_pump, client, server, nursery.cancel_scope)
            nursery.start_soon(_pump, server, client, nursery.cancel_scope)


async def _pump(source: trio.SocketStream, sink: trio.SocketStream, done: trio.CancelScope) -> None:
    try:
        async for chunk in source:
            await sink.send_all(chunk)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    done.cancel()  # one side ended: so does the connection


@asynccontextmanager
async def two_databases(dsn: str) -> AsyncIterator[tuple[str, str]]:
    """The DSNs of two fresh databases, migrated; both dropped afterwards."""
    names = [f"tq_multi_{secrets.token_hex(4)}_{side}" for side in "ab"]
    try:
        for name in names:
            await _admin(dsn, f"CREATE DATABASE {name}")
            async with trioqueue.open_postgres(_with_database(dsn, name)) as backend:
                await backend.migrate()
        yield _with_database(dsn, names[0]), _with_database(dsn, names[1])
    finally:
        with trio.CancelScope(shield=True):
            for name in names:
                await _admin(dsn, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


async def _enqueue(dsn: str, queue: str, count: int) -> list[int]:
    async with trioqueue.open_postgres(dsn) as backend:
        return [await backend.enqueue(queue, {"n": n}) for n in range(count)]


async def _statuses(dsn: str) -> dict[str, dict[str, int]]:
    """``{queue: {status: count}}`` of a database."""
    async with trioqueue.open_postgres(dsn) as backend:
        found: dict[str, dict[str, int]] = {}
        for info in await backend.list_jobs(limit=10_000):
            counts = found.setdefault(info.queue, {})
            counts[info.status] = counts.get(info.status, 0) + 1
        return found


async def _finished(dsn: str, ids: list[int], within: float = 60) -> None:
    async with trioqueue.open_postgres(dsn) as backend:
        infos = await wait_until_finished(backend, ids, within=within)
    assert {info.status for info in infos} == {"succeeded"}


class Output:
    """What the worker process says on stdout, read as it comes."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.seen = b""

    async def until(self, marker: bytes) -> None:
        with trio.fail_after(60):
            while marker not in self.seen:
                chunk = await self.stream.receive_some()
                if not chunk:
                    raise AssertionError(
                        f"the worker ended before saying {marker!r}: {self.seen!r}"
                    )
                self.seen += chunk

    async def rest(self) -> bytes:
        async for chunk in self.stream:
            self.seen += chunk
        return self.seen


async def test_one_worker_serves_two_databases_and_outlives_one_going_away(
    postgres_dsn: str, tmp_path: Path
) -> None:
    parts = urllib.parse.urlsplit(postgres_dsn)
    if parts.hostname is None or parts.hostname.startswith("/") or parts.port is None:
        pytest.skip("the proxy that takes database B away needs a server on TCP")
    (tmp_path / "multi_app.py").write_text(APP)
    async with two_databases(postgres_dsn) as (a, b), trio.open_nursery() as nursery:
        proxy = Proxy(parts.hostname, parts.port)
        port = await nursery.start(proxy.serve)
        b_proxied = _with_database(b, urllib.parse.urlsplit(b).path[1:], port=port)
        mine = await _enqueue(a, "qa", 20)
        theirs = await _enqueue(b, "qb", 20)
        stray = await _enqueue(a, "qb", 3)  # qb runs on B: these are not served
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
        command = [
            sys.executable, "-m", "trioqueue", "worker", "--dsn", a,
            "--database", f"b={b_proxied}",
            "--queue", "qa=multi_app:handler", "--queue", "qb=multi_app:handler@b",
            "--poll-interval", "0.5", "--shutdown-grace", "5",
        ]  # fmt: skip
        process = await trio.lowlevel.open_process(
            command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert process.stdout is not None and process.stderr is not None
        out = Output(process.stdout)
        errors = Output(process.stderr)
        nursery.start_soon(errors.rest)
        try:
            await out.until(b"Ctrl-C to stop")
            await _finished(a, mine)
            await _finished(b, theirs)
            assert (await _statuses(a))["qb"] == {"ready": len(stray)}

            proxy.stop()  # B goes away: refused, and every open connection cut
            mine = await _enqueue(a, "qa", 20)
            theirs = await _enqueue(b, "qb", 10)  # directly: the worker cannot reach B
            await _finished(a, mine)  # A's pool goes on
            with trio.move_on_after(2):  # B's pool has had time to claim, and cannot
                await _finished(b, theirs)
                raise AssertionError("B's jobs ran while B was unreachable")
            assert (await _statuses(b))["qb"]["ready"] == len(theirs)

            await nursery.start(proxy.serve, port)  # B is back, at the same address
            await _finished(b, theirs)
        finally:
            process.send_signal(signal.SIGTERM)
            with trio.fail_after(60):
                code = await process.wait()
            proxy.stop()
        said = (await out.rest()).decode()
    logged = errors.seen.decode()
    assert code == 0, (said, logged)
    # The outage was seen, by B's pool alone: every failed claim was one sent to the proxy.
    failed = [line for line in logged.splitlines() if "claim failed" in line]
    assert failed and all(f"'127.0.0.1', {port})" in line for line in failed), failed
    assert "queue 'qa' on database default (" in said
    assert f"queue 'qb' on database b (postgresql://postgres:***@127.0.0.1:{port}/" in said
    assert "worker pools on queues 'qa', 'qb' (2 databases); Ctrl-C to stop" in said
    assert "worker pools stopped" in said
    assert PASSWORD not in said and PASSWORD not in errors.seen.decode()


async def test_one_dashboard_reads_each_database_under_its_prefix(postgres_dsn: str) -> None:
    """``create_multi_app`` over two PostgreSQL databases: the overview counts each
    database's queues, and each database's pages and API read that database alone."""
    from trioqueue.web import create_multi_app

    from .._web_harness import client

    async with (
        two_databases(postgres_dsn) as (a, b),
        trioqueue.open_postgres(a) as main,
        trioqueue.open_postgres(b) as reports,
    ):
        await main.enqueue("emails", {})
        job = await reports.enqueue("reports", {"n": 7})
        app = create_multi_app({"main": main, "reports": reports})
        async with client(app) as http:
            overview = (await http.get("/")).text
            page = await http.get(f"/db/reports/jobs/{job}")
            api = await http.get(f"/db/reports/api/jobs/{job}")
            elsewhere = await http.get(f"/db/main/api/jobs/{job}")
            health = await http.get("/healthz")
    assert '<a href="/db/main/queues/emails">emails</a></td><td>1</td>' in overview
    assert '<a href="/db/reports/queues/reports">reports</a></td><td>1</td>' in overview
    assert page.status_code == 200 and 'data-database="reports"' in page.text
    assert api.json()["queue"] == "reports"
    # Ids are per database: the same id on main is another job, or none (404).
    assert elsewhere.status_code == 404 or elsewhere.json()["queue"] == "emails"
    assert health.json() == {"status": "ok", "databases": {"main": "ok", "reports": "ok"}}
