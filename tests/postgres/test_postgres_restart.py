"""A PostgreSQL server restarted under a running worker pool (I12, I13).

What this proves: when the server goes away mid-run and comes back (a fast shutdown, then
a start on the same data directory and socket), no job is lost and every job ends
succeeded; the pool reconnects by itself (claims, renewals and outcome writes run on new
connections) and its listener LISTENs again by itself, so new work and cancel requests
still arrive through NOTIFY rather than through the fallback poll or the next heartbeat.

How the server is run: the shared server on 127.0.0.1:5432 serves the rest of the suite
and must never be restarted, so this module starts a private server of its own with
``pgserver`` (PostgreSQL in a wheel) in a temporary directory, listening on a unix socket
inside that directory only (no TCP port). The test stops and starts it with the wheel's own
``pg_ctl``, with the arguments ``pgserver`` starts it with, so the DSN stays valid across
the restart. When the tests run as root, ``pgserver`` runs the server as its own user
``pgserver`` (PostgreSQL refuses to run as root); ``pg_ctl`` runs as that user too. Without
``pgserver``, or if it cannot start a server here, the module is skipped.

These tests run on trio's real clock: a server restart is real time.
"""

from __future__ import annotations

import secrets
import subprocess
import tempfile
import warnings
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio

import trioqueue
from trioqueue import JobContext
from trioqueue._backends.postgres import PostgresBackend, open_postgres
from trioqueue._backends.postgres.embedded import INSTALL_HINT, fast_commits
from trioqueue._types import Claimed

from .._postgres_harness import wait_until_finished

if TYPE_CHECKING:
    from pgserver.postgres_server import PostgresServer

pytestmark = pytest.mark.postgres

Q = "restart"

#: Bound on each ``pg_ctl`` action (``-t``); a stop or start takes a fraction of a second.
PG_CTL_TIMEOUT = 30

#: The fallback poll of every pool here. Far longer than the bounds below, so a job that
#: starts within them was woken by a NOTIFY, which needs a listener that LISTENs again.
POLL_INTERVAL = 30.0

#: How soon a job enqueued after the restart must start. A NOTIFY takes milliseconds; a
#: third of POLL_INTERVAL leaves a loaded machine plenty of room and still rules the poll out.
NOTIFY_BOUND = 10.0

#: How soon the listener must be back after the server is: its reconnect backoff
#: (0.2 s, 0.4 s, ... while the server is down) plus a connect.
RELISTEN_BOUND = 10.0


# -- the private server -----------------------------------------------------------------


class PrivateServer:
    """A PostgreSQL server of this module's own, which the tests may stop and start."""

    def __init__(self, server: PostgresServer, bin_dir: Path) -> None:
        self._server = server
        self._pg_ctl = bin_dir / "pg_ctl"
        socket_dir = server.get_postmaster_info().socket_dir
        if socket_dir is None:  # pgserver always listens on a socket on POSIX
            raise RuntimeError("the private server has no unix socket directory")
        self._socket_dir = socket_dir
        # Durability is not under test (as in conftest.py), and nothing is lost here anyway:
        # a fast shutdown checkpoints, so every committed transaction survives the restart.
        self.dsn = fast_commits(server.get_uri())

    def stop(self) -> None:
        """Stop the server now: a fast shutdown terminates every session (blocking)."""
        self._pg_ctl_run("-m", "fast", "stop")

    def start(self) -> None:
        """Start the server again on the same data directory and socket (blocking)."""
        # The arguments pgserver starts it with: no TCP listening, the same socket directory.
        self._pg_ctl_run(
            "-o", '-h ""', "-o", f"-k {self._socket_dir}", "-l", str(self._server.log), "start"
        )  # fmt: skip
        # pgserver remembers the postmaster it started and, at cleanup, stops the server only
        # if that process still runs: point it at the new one so that it stops this one.
        from pgserver.utils import PostmasterInfo

        self._server._postmaster_info = PostmasterInfo.read_from_pgdata(self._server.pgdata)

    def close(self) -> None:
        """Stop the server, whatever state a test left it in."""
        try:
            self._server.cleanup()
        finally:
            if (self._server.pgdata / "postmaster.pid").exists():
                self._pg_ctl_run("-m", "immediate", "stop")

    def _pg_ctl_run(self, *args: str) -> None:
        command = [str(self._pg_ctl), "-D", str(self._server.pgdata), "-w"]
        command += ["-t", str(PG_CTL_TIMEOUT), *args]
        # Output goes to a file, not a pipe: a postmaster started by pg_ctl inherits it, and
        # a pipe held open by the server can hang the call (pgserver works around it alike).
        with tempfile.TemporaryFile("w+") as output:
            result = subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                text=True,
                user=self._server.system_user,  # "pgserver" when we are root, else None: us
                timeout=PG_CTL_TIMEOUT + 10,
                check=False,
            )
            if result.returncode != 0:
                output.seek(0)
                raise RuntimeError(
                    f"pg_ctl {args[-1]} failed ({result.returncode}): {output.read()}"
                )


@pytest.fixture(scope="module")
def private_server() -> Iterator[PrivateServer]:
    """A private PostgreSQL server for this module, stopped (and deleted) at the end."""
    try:
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI): harmless.
            warnings.simplefilter("ignore")
            from pgserver._commands import POSTGRES_BIN_PATH
            from pgserver.postgres_server import get_server
    except ImportError:
        pytest.skip(f"restart tests need a private server from pgserver: {INSTALL_HINT}")
    with tempfile.TemporaryDirectory(
        prefix="trioqueue-restart-", ignore_cleanup_errors=True
    ) as tmp:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                server = get_server(Path(tmp) / "pgdata", cleanup_mode="stop")
        except Exception as exc:
            pytest.skip(f"pgserver cannot start a private PostgreSQL here: {exc!r}")
        try:
            private = PrivateServer(server, POSTGRES_BIN_PATH)
        except BaseException:
            server.cleanup()
            raise
        try:
            yield private
        finally:
            private.close()


@pytest.fixture
async def backend(private_server: PrivateServer) -> AsyncIterator[PostgresBackend]:
    # A fresh schema per test; the whole server is thrown away at the end of the module.
    schema = f"tq_restart_{secrets.token_hex(6)}"
    async with open_postgres(private_server.dsn, schema=schema) as backend:
        await backend.migrate()
        yield backend


async def restart(
    server: PrivateServer, *, while_down: Callable[[], Awaitable[None]] | None = None
) -> None:
    """Stop the server, await ``while_down()``, start it again; the pool runs meanwhile.

    ``pg_ctl`` blocks, so it runs in a thread: the pool goes on in trio meanwhile. The
    server is started again even if ``while_down`` fails, so that the module's other tests
    still have it.
    """
    await trio.to_thread.run_sync(server.stop)
    try:
        if while_down is not None:
            await while_down()
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(server.start)


# -- observing the pool -----------------------------------------------------------------


class Runs:
    """What the handlers and hooks saw, with a way to wait for it."""

    def __init__(self) -> None:
        self.starts: defaultdict[int, list[float]] = defaultdict(list)
        self.stops: dict[int, float] = {}
        self.succeeded: set[int] = set()
        self.unavailable: list[tuple[int, str]] = []
        self._changed = trio.Event()

    def started(self, job_id: int) -> None:
        self.starts[job_id].append(trio.current_time())
        self.notify()

    def stopped(self, job_id: int) -> None:
        self.stops[job_id] = trio.current_time()
        self.notify()

    async def on_job_succeeded(self, job: trioqueue.Job) -> None:
        self.succeeded.add(job.id)
        self.notify()

    async def on_job_unavailable(self, job: trioqueue.Job, reason: str) -> None:
        self.unavailable.append((job.id, reason))
        self.notify()

    async def wait_for(self, condition: Callable[[], bool]) -> float:
        """Wait until ``condition()`` holds (bound it with ``trio.fail_after``); return how
        long that took."""
        began = trio.current_time()
        while not condition():
            await self._changed.wait()
        return trio.current_time() - began

    def notify(self) -> None:
        """Wake whoever waits in :meth:`wait_for`, to look at the condition again."""
        self._changed.set()
        self._changed = trio.Event()


class ClaimSpy:
    """Wraps ``backend.claim`` to tell when the pool's claim loop has gone idle.

    The claim loop claims until a claim comes back short (fewer rows than it asked for),
    then waits for a NOTIFY or for ``poll_interval`` (docs/usage.rst, "When a pool
    claims"). Once the latest claim came back short (and none is in flight) with no
    claimable job left, only a NOTIFY can make the pool claim again before the poll.
    """

    def __init__(self, claim: Callable[..., Awaitable[list[Claimed]]], runs: Runs) -> None:
        self._claim = claim
        self._runs = runs  # told of every claim's answer, so that its waiters look again
        self.in_flight = 0
        self.last_was_short = False

    async def __call__(
        self, queue: str, *, limit: int, worker_id: str, visibility_timeout: float, **more: Any
    ) -> list[Claimed]:
        self.in_flight += 1
        try:
            claimed = await self._claim(
                queue,
                limit=limit,
                worker_id=worker_id,
                visibility_timeout=visibility_timeout,
                **more,  # the quarantine's (docs/protocol.rst §13)
            )
        finally:
            self.in_flight -= 1
        self.last_was_short = len(claimed) < limit
        self._runs.notify()
        return claimed

    @property
    def idle(self) -> bool:
        return self.in_flight == 0 and self.last_was_short


def spy_on_claims(
    backend: PostgresBackend, runs: Runs, monkeypatch: pytest.MonkeyPatch
) -> ClaimSpy:
    spy = ClaimSpy(backend.claim, runs)
    monkeypatch.setattr(backend, "claim", spy)
    return spy


async def poll_until(check: Callable[[], Awaitable[bool]]) -> float:
    """Poll the database until ``check()`` is true (bound it with ``trio.fail_after``);
    return how long that took."""
    began = trio.current_time()
    while not await check():
        await trio.sleep(0.05)
    return trio.current_time() - began


async def has_listener(backend: PostgresBackend) -> bool:
    """Whether a session of this backend is LISTENing (the last statement it ran)."""
    async with backend.acquire() as connection:
        count: int = await connection.fetchval(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE application_name = $1 AND starts_with(query, 'LISTEN')",
            f"trioqueue:{backend.schema}",
        )
    return count > 0


async def server_started_at(backend: PostgresBackend) -> Any:
    async with backend.acquire() as connection:
        return await connection.fetchval("SELECT pg_postmaster_start_time()")


# -- the tests --------------------------------------------------------------------------


@pytest.mark.parametrize("outage", ["brief", "past the lease"])
async def test_restart_mid_run_loses_no_job_and_notices_resume(
    private_server: PrivateServer,
    backend: PostgresBackend,
    monkeypatch: pytest.MonkeyPatch,
    outage: str,
) -> None:
    """I13 across a server restart: every job ends succeeded, and NOTIFY works again.

    The restart lands while jobs run. A ``brief`` outage (stop, then start at once: a
    fraction of a second) is shorter than V - H: running handlers keep their leases and the
    outcome writes that failed meanwhile are retried on new connections. An outage ``past
    the lease`` keeps the server down until the pool has given up at least one attempt (its
    outcome could not be written before the lease, V = 2 s, ran out): those rows become
    claimable again and run once more after the restart; five attempts each are plenty.
    Afterwards the pool, idle and polling only every 30 s, must start a new job within
    NOTIFY_BOUND.
    """
    n = 60
    runs = Runs()

    # An outage past the lease needs an attempt in flight when the server goes down (else
    # nothing is given up): this job's handler is held until the server is down.
    held_payload = 20 if outage == "past the lease" else None
    server_down = trio.Event()

    async def handler(payload: int, ctx: JobContext) -> None:
        runs.started(ctx.job_id)
        if payload == held_payload:
            await server_down.wait()
        await trio.sleep(0.1)  # real work time: 60 jobs, 4 at a time, take 1.5 s

    cfg = trioqueue.WorkerConfig(
        handler=handler,
        queue=Q,
        concurrency=2,
        batch_size=2,
        visibility_timeout=2,
        heartbeat_interval=0.5,
        poll_interval=POLL_INTERVAL,
        shutdown_grace=1,
        on_job_succeeded=runs.on_job_succeeded,
        on_job_unavailable=runs.on_job_unavailable,
    )
    spy = spy_on_claims(backend, runs, monkeypatch)
    finished_when_down: list[int] = []

    async def while_down() -> None:
        server_down.set()
        finished_when_down.append(len(runs.succeeded))
        if outage == "past the lease":
            # Down until the pool gives up an attempt: V after the last renewal at most, as
            # the fence stops retrying the outcome write then (I3). Not a sleep: an event.
            with trio.fail_after(10):
                await runs.wait_for(lambda: bool(runs.unavailable))

    first_start = await server_started_at(backend)
    async with trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        # Also shows that the query sees a listener at all, so that it means something later.
        with trio.fail_after(RELISTEN_BOUND):
            await poll_until(lambda: has_listener(backend))
        ids = await backend.enqueue_many(Q, list(range(n)), max_attempts=5)
        with trio.fail_after(10):
            await runs.wait_for(lambda: len(runs.succeeded) >= 8)
            if held_payload is not None:
                await runs.wait_for(lambda: ids[held_payload] in runs.starts)

        await restart(private_server, while_down=while_down)

        # The listener is back, on a session of the new server: the pool did it by itself.
        with trio.fail_after(RELISTEN_BOUND):
            await poll_until(lambda: has_listener(backend))
        # Lost attempts wait out their 2 s leases, then run again.
        infos = await wait_until_finished(backend, ids, within=60)

        # A job enqueued now, while the pool waits for up to POLL_INTERVAL, starts at once
        # only if a NOTIFY wakes the pool: proof that the new listener works, not just exists.
        with trio.fail_after(10):
            await runs.wait_for(lambda: spy.idle)
        late = await backend.enqueue(Q, -1, max_attempts=5)
        with trio.fail_after(NOTIFY_BOUND):
            late_start = await runs.wait_for(lambda: late in runs.starts)
        with trio.fail_after(10):
            [late_info] = await wait_until_finished(backend, [late])
        counts = await backend.counts()
        second_start = await server_started_at(backend)
        nursery.cancel_scope.cancel()

    assert second_start > first_start  # the server really restarted
    assert finished_when_down[0] < n  # the restart landed mid-run
    # No job lost: every row ended succeeded, none is left running or ready, none is extra.
    assert {i.status for i in [*infos, late_info]} == {"succeeded"}
    assert counts == {Q: {"succeeded": n + 1}}
    # Every job ran, never more often than its attempts allow (a claim whose answer the
    # restart cut off consumed an attempt without a run).
    for info in [*infos, late_info]:
        assert 1 <= len(runs.starts[info.id]) <= info.attempts <= 5
    if outage == "past the lease":
        # The attempts given up during the outage ran again (and succeeded, above). "Any", not
        # "all": an ack the server committed as it shut down, but whose answer was cut off,
        # is given up by the pool too, and rightly not run again.
        assert any(len(runs.starts[job_id]) >= 2 for job_id, _ in runs.unavailable)
    assert late_start < NOTIFY_BOUND < POLL_INTERVAL
    assert backend.statistics()["connections_in_use"] == 0


async def test_cancel_after_restart_reaches_running_handlers_through_notify(
    private_server: PrivateServer, backend: PostgresBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """I12 across a server restart: a cancel sent afterwards stops a handler at once.

    With H = 20 s the next heartbeat is far away, so only a NOTIFY, received by the listener
    the pool re-established itself, can bring the cancel in time. Both a handler that was
    running through the restart and one started after it are cancelled; the renewals that
    carry the cancel run on connections the pool opened again after the restart.
    """
    h = 20.0
    cancel_bound = h / 4  # "well before the next heartbeat", and far above a NOTIFY's latency
    runs = Runs()

    async def handler(payload: str, ctx: JobContext) -> None:
        runs.started(ctx.job_id)
        try:
            await trio.sleep_forever()
        finally:
            runs.stopped(ctx.job_id)

    async def cancel(job_id: int) -> float:
        """Cancel a running job; how long its handler took to stop."""
        sent = trio.current_time()
        assert await backend.cancel(job_id) is True
        with trio.fail_after(cancel_bound):
            await runs.wait_for(lambda: job_id in runs.stops)
        return runs.stops[job_id] - sent

    cfg = trioqueue.WorkerConfig(
        handler=handler,
        queue=Q,
        concurrency=2,
        visibility_timeout=60,
        heartbeat_interval=h,
        poll_interval=POLL_INTERVAL,
        shutdown_grace=1,
    )
    spy = spy_on_claims(backend, runs, monkeypatch)
    async with trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        with trio.fail_after(RELISTEN_BOUND):
            await poll_until(lambda: has_listener(backend))
        before = await backend.enqueue(Q, "through the restart")
        with trio.fail_after(10):
            await runs.wait_for(lambda: before in runs.starts and spy.idle)

        # Down for well under V - H = 40 s: the running handler keeps its lease, and its
        # next heartbeat is not due for H = 20 s, long after the server is back.
        await restart(private_server)

        with trio.fail_after(RELISTEN_BOUND):
            await poll_until(lambda: has_listener(backend))
        # The claim loop waits for a NOTIFY (or the 30 s poll) since its last short claim.
        after = await backend.enqueue(Q, "after the restart")
        with trio.fail_after(NOTIFY_BOUND):
            await runs.wait_for(lambda: after in runs.starts)
        latencies = {job_id: await cancel(job_id) for job_id in (before, after)}
        with trio.fail_after(10):
            infos = await wait_until_finished(backend, [before, after])
        nursery.cancel_scope.cancel()

    assert all(latency < cancel_bound for latency in latencies.values()), latencies
    for info in infos:
        assert info.status == "failed"
        assert info.last_error is not None
        assert info.last_error.startswith("cancelled")
        assert info.attempts == 1  # the handler ran once, through the restart or after it
        assert len(runs.starts[info.id]) == 1
