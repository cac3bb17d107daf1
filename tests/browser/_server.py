"""The dashboard served from a thread of its own, for browser tests.

Playwright's sync API runs an asyncio loop of its own on the test's thread, so the
dashboard cannot share it: :class:`DashboardServer` runs ``trio.run`` on a background
thread with a PostgreSQL backend, the app served by hypercorn's trio worker on a free
loopback port and, when asked, a worker pool. The test talks to that loop through
``trio.from_thread`` (:meth:`DashboardServer.call`), so every wait on the server's side is
an event, never a sleep.

The pool's handler (:class:`Stepper`) reports progress step by step and waits for the test
to release each step, so a test can watch a running job's progress bar move on cue.
"""

from __future__ import annotations

import functools
import re
import threading
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import hypercorn.config
import hypercorn.trio
import trio

import trioqueue
from trioqueue import JobContext
from trioqueue.web import create_app, create_multi_app

from .._postgres_harness import wait_until_finished

#: The dashboard token the security tests serve with, and how chromium words a page refused
#: by the Content-Security-Policy (in a console message).
TOKEN = "k9Vf2L0sQe7XbT4wZpR1mA8nY3cD6hJ"
CSP_REFUSAL = re.compile(r"Content Security Policy|Content-Security-Policy", re.IGNORECASE)

T = TypeVar("T")

#: The queue the pool works on; jobs of other queues stay ready.
WORK_QUEUE = "work"
#: Short lease and beat, so the lease countdown and the stored progress move within
#: seconds: the pool renews (and sends progress) every ``HEARTBEAT`` seconds.
VISIBILITY_TIMEOUT = 3.0
HEARTBEAT = 0.5
#: Longest a test waits on the server's loop for something it caused.
SERVER_WAIT = 15.0


class Stepper:
    """A handler whose jobs advance one step each time the test releases one.

    A job's payload is ``{"steps": n}``. Before waiting for step ``k`` (1-based) the handler
    reports progress ``(k - 1) / n``; once all ``n`` steps are released it reports 1.0 and
    returns. Lives on the server's trio loop; the test calls in through
    :meth:`DashboardServer.call`.
    """

    def __init__(self) -> None:
        self._released: defaultdict[int, int] = defaultdict(int)
        self._reached: defaultdict[int, int] = defaultdict(int)
        self._changed = trio.Event()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def release(self, job_id: int, steps: int = 1) -> None:
        """Let ``job_id`` go on by ``steps`` steps (before or after it reaches them)."""
        self._released[job_id] += steps
        self._notify()

    async def wait_reached(self, job_id: int, step: int) -> None:
        """Return once ``job_id``'s handler waits for ``step`` (or went past it)."""
        with trio.fail_after(SERVER_WAIT):
            while self._reached[job_id] < step:
                await self._changed.wait()

    async def handler(self, payload: Any, ctx: JobContext) -> None:
        steps = int(payload["steps"])
        for step in range(1, steps + 1):
            ctx.report_progress((step - 1) / steps)
            self._reached[ctx.job_id] = step
            self._notify()
            while self._released[ctx.job_id] < step:
                await self._changed.wait()
        ctx.report_progress(1.0)


class DashboardServer:
    """``create_app(backend, **app_options)`` on ``http://127.0.0.1:<free port>``.

    Use as a context manager: entering starts the thread and returns once the app answers
    and the pool (if any) is claiming; leaving stops the pool, shuts hypercorn down
    gracefully and joins the thread.
    """

    def __init__(
        self,
        dsn: str,
        schema: str,
        *,
        pool: bool = False,
        concurrency: int = 2,
        app_options: dict[str, Any] | None = None,
        database: str | None = None,
    ) -> None:
        self.dsn = dsn
        # Serve create_multi_app({database: backend}) instead, self.url at /db/NAME/.
        self.database = database
        self.schema = schema
        self.pool = pool
        self.concurrency = concurrency
        self.app_options = dict(app_options or {})
        self.stepper = Stepper()
        self.url = ""
        self._backend: trioqueue.PostgresBackend | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="dashboard-server", daemon=True)

    # -- lifecycle ------------------------------------------------------------------------

    def __enter__(self) -> DashboardServer:
        self._thread.start()
        if not self._ready.wait(timeout=60):
            raise RuntimeError("the dashboard server did not start within 60 s")
        if self._error is not None:
            self._thread.join()
            raise RuntimeError("the dashboard server failed to start") from self._error
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Shut the server down and join its thread; raise what failed on it."""
        if self._token is not None and self._stop is not None and self._thread.is_alive():
            try:
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join(timeout=60)
        if self._thread.is_alive():
            raise RuntimeError("the dashboard server did not stop within 60 s")
        if self._error is not None:
            raise RuntimeError("the dashboard server failed") from self._error

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:
            self._error = exc
        finally:
            self._ready.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        config = hypercorn.config.Config()
        config.bind = ["127.0.0.1:0"]
        # An open event stream would otherwise hold a graceful shutdown for its default.
        config.graceful_timeout = 1.0
        config.accesslog = None
        config.errorlog = None
        async with trioqueue.open_postgres(self.dsn, schema=self.schema) as backend:
            await backend.migrate()
            self._backend = backend
            # Starlette's ASGI types are looser than hypercorn's; the app is plain ASGI 3.
            app: Any = create_app(backend, **self.app_options)
            if self.database is not None:
                app = create_multi_app({self.database: backend}, **self.app_options)
            async with trio.open_nursery() as nursery:
                serve = functools.partial(
                    hypercorn.trio.serve, app, config, shutdown_trigger=self._stop.wait
                )
                binds: list[str] = await nursery.start(serve)
                self.url = binds[0]
                if self.database is not None:
                    self.url += f"/db/{self.database}/"
                pool_scope = trio.CancelScope()
                if self.pool:
                    await nursery.start(self._run_pool, backend, pool_scope)
                self._ready.set()
                await self._stop.wait()
                pool_scope.cancel()

    async def _run_pool(
        self,
        backend: trioqueue.PostgresBackend,
        scope: trio.CancelScope,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        config = trioqueue.WorkerConfig(
            handler=self.stepper.handler,
            queue=WORK_QUEUE,
            concurrency=self.concurrency,
            visibility_timeout=VISIBILITY_TIMEOUT,
            heartbeat_interval=HEARTBEAT,
            max_job_duration=120,  # a test's job never hangs longer than the test itself
            poll_interval=0.2,
            shutdown_grace=0.5,
        )
        with scope:
            await trioqueue.run_worker_pool(backend, config, task_status=task_status)

    # -- calls into the server's loop --------------------------------------------------------

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """Run ``await fn(*args, **kwargs)`` on the server's trio loop and return its value."""
        assert self._token is not None, "the server is not running"
        return trio.from_thread.run(functools.partial(fn, *args, **kwargs), trio_token=self._token)

    @property
    def backend(self) -> trioqueue.PostgresBackend:
        """The server's backend: use it only through :meth:`call`."""
        assert self._backend is not None, "the server is not running"
        return self._backend

    def enqueue(self, queue: str, payload: Any, **options: Any) -> int:
        return self.call(self.backend.enqueue, queue, payload, **options)

    def job(self, job_id: int) -> trioqueue.JobInfo:
        return self.call(self.backend.get_job, job_id)

    def start_job(self, steps: int) -> int:
        """Enqueue a stepped job on the pool's queue; return once its handler runs."""
        job_id = self.enqueue(WORK_QUEUE, {"steps": steps})
        self.call(self.stepper.wait_reached, job_id, 1)
        return job_id

    def release(self, job_id: int, steps: int = 1) -> None:
        """Let a stepped job go on by ``steps`` steps."""
        assert self._token is not None, "the server is not running"
        trio.from_thread.run_sync(self.stepper.release, job_id, steps, trio_token=self._token)

    def wait_reached(self, job_id: int, step: int) -> None:
        """Return once a stepped job's handler waits for ``step``."""
        self.call(self.stepper.wait_reached, job_id, step)

    def wait_workers(
        self, ready: Callable[[list[trioqueue.WorkerInfo]], bool]
    ) -> list[trioqueue.WorkerInfo]:
        """The registered pools once ``ready(pools)`` holds (a pool's row moves only at
        its beats, every ``HEARTBEAT``; the workers page is rendered once, not live)."""
        return self.call(_wait_workers, self.backend, ready)

    def wait_progress(self, job_id: int, progress: float) -> trioqueue.JobInfo:
        """The job's snapshot once its stored progress is ``progress`` (a handler's report
        reaches the row with the next renewal, up to a ``HEARTBEAT`` later)."""
        return self.call(_wait_progress, self.backend, job_id, progress)

    def wait_finished(self, job_id: int) -> trioqueue.JobInfo:
        """The job's snapshot once it succeeded or failed."""
        [info] = self.call(wait_until_finished, self.backend, [job_id], within=SERVER_WAIT)
        return info


async def _wait_workers(
    backend: trioqueue.PostgresBackend, ready: Callable[[list[trioqueue.WorkerInfo]], bool]
) -> list[trioqueue.WorkerInfo]:
    with trio.fail_after(SERVER_WAIT):
        while not ready(workers := await backend.list_workers()):
            await trio.sleep(HEARTBEAT / 5)  # one look per fifth of a beat
    return workers


async def _wait_progress(
    backend: trioqueue.PostgresBackend, job_id: int, progress: float
) -> trioqueue.JobInfo:
    with trio.fail_after(SERVER_WAIT):
        while (info := await backend.get_job(job_id)).progress != progress:
            await trio.sleep(HEARTBEAT / 5)  # the database says nothing when a renewal lands
    return info
