"""``trioqueue demo``: a small, realistic workload on PostgreSQL (or in memory), watched live.

Theory of operation. The demo enqueues report-style jobs and runs one worker pool over them
under the real clock. Handlers step through their work and call ``ctx.report_progress``; the
guard's heartbeats carry that progress to the stored row, and the view shows only what is
*stored* (``JobInfo.progress`` from ``list_jobs``), so the bars advance in heartbeat-sized
steps. That is the point: progress travels on the lease renewals. Two jobs show the edges of
the protocol: one fails its first attempt and succeeds on its retry, and one long export is
cancelled mid-run with ``backend.cancel`` once its stored progress passes a third, and must
end ``failed`` with ``last_error`` starting "cancelled".

``--speed`` divides every duration (work, heartbeats, backoff, polling) so tests run the
demo in a second or two. Only the lease keeps a floor (:data:`MIN_LEASE`): a lease of a few
milliseconds would measure the machine's scheduling jitter rather than the protocol.

On PostgreSQL the demo works in a schema of its own (:data:`SCHEMA` unless told otherwise),
created and migrated afresh at the start of each run and left in place afterwards, so
``trioqueue --schema trioqueue_demo jobs`` can show what it did. It marks the schemas it
creates (a comment on the schema) and drops an existing schema only when it carries that
mark: any other schema of that name is refused, never dropped. Without a DSN the command
line starts an embedded server first (``trioqueue._backends.postgres.embedded``); this module only gets a DSN.

The demo uses the public API only.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import logging
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

import trio

import trioqueue
from trioqueue.cli import _dashboard
from trioqueue.cli._escape import say
from trioqueue.cli._terminal import (
    STATUS_STYLES,
    LiveBlock,
    clip,
    format_table,
    library_logs_to,
    progress_bar,
    styled,
    supports_unicode,
    wants_colour,
)

QUEUE = "demo"
#: The PostgreSQL schema the demo creates (or recreates, if it made it) on each run.
SCHEMA = "trioqueue_demo"
CONCURRENCY = 4
FINAL = frozenset({"succeeded", "failed"})

# Durations at speed 1, in seconds; every one is divided by --speed.
LEASE = 4.0  # V: long enough that a missed heartbeat or two costs nothing
HEARTBEAT = 1.0  # H: the cadence at which stored progress moves
MAX_DURATION = 30.0  # D: no demo job comes near it
POLL = 1.0  # claim poll; new work and cancels arrive as notices anyway
SHUTDOWN_GRACE = 2.0
RETRY_AFTER = 0.5  # first backoff delay
STEP = 0.4  # one step of a report
EXPORT_STEP = 0.5  # one step of the export that gets cancelled
REFRESH = 0.25  # how often the view reads the stored jobs

#: The shortest lease the demo uses, whatever the speed.
MIN_LEASE = 0.5
#: The export is cancelled once its *stored* progress reaches this.
CANCEL_AT = 0.3

MIN_JOBS = 3  # the export, the flaky job and at least one report
MAX_JOBS = 100
MAX_SPEED = 50.0


class Expect(enum.Enum):
    """How a demo job must end for the demo to pass."""

    SUCCEED = "succeed"
    SUCCEED_ON_RETRY = "fail once, then succeed on its retry"
    CANCELLED = "be cancelled mid-run"


@dataclass(frozen=True)
class DemoOptions:
    """What ``trioqueue demo`` was asked to do."""

    jobs: int = 8
    speed: float = 1.0
    live: bool = True
    verbose: bool = False
    #: The level of the library's records shown (``--log-level``); None: by ``verbose``.
    log_level: int | None = None
    #: Where the jobs live: ``"memory"``, or ``"postgres"`` at :attr:`dsn`.
    backend: str = "memory"
    dsn: str | None = None
    schema: str = SCHEMA
    #: Shown in the header instead of the DSN (which may hold a password).
    where: str = ""
    #: Serve the dashboard on 127.0.0.1 at this port while the demo runs (a free port
    #: instead when it is taken); None: no dashboard.
    dashboard_port: int | None = None
    #: After the summary, keep serving the dashboard until Ctrl-C (SIGINT or SIGTERM).
    keep_dashboard: bool = False


DemoBackend = trioqueue.MemoryBackend | trioqueue.PostgresBackend


@dataclass(frozen=True)
class JobSpec:
    """One demo job: its work (``steps`` of ``step`` seconds at speed 1) and its fate."""

    name: str
    kind: str
    steps: int
    step: float = STEP
    priority: int = 0
    delay: float | None = None
    max_attempts: int = 3
    fail_first_attempt_at: int | None = None  # the step whose end raises, on attempt 1
    expect: Expect = Expect.SUCCEED

    def payload(self, pace: Pace) -> dict[str, Any]:
        """The job's JSON payload, durations already scaled by ``pace``."""
        return {
            "name": self.name,
            "kind": self.kind,
            "steps": self.steps,
            "step_seconds": pace(self.step),
            "fail_first_attempt_at": self.fail_first_attempt_at,
        }


@dataclass(frozen=True)
class Pace:
    """Turns speed-1 seconds into real seconds."""

    speed: float

    def __call__(self, seconds: float) -> float:
        return seconds / self.speed

    @property
    def lease(self) -> float:
        return max(MIN_LEASE, self(LEASE))

    @property
    def refresh(self) -> float:
        return max(0.01, self(REFRESH))


# -- the workload -------------------------------------------------------------------------

EXPORT = JobSpec(
    "export-customer-archive", "export", 24, step=EXPORT_STEP, priority=10, max_attempts=1,
    expect=Expect.CANCELLED,
)  # fmt: skip
FLAKY = JobSpec(
    "invoice-sync", "sync", 5, priority=5, fail_first_attempt_at=3,
    expect=Expect.SUCCEED_ON_RETRY,
)  # fmt: skip
REPORTS = (
    JobSpec("sales-emea-weekly", "report", 8, priority=5),
    JobSpec("churn-cohorts", "report", 12),
    JobSpec("inventory-snapshot", "report", 6, priority=5),
    JobSpec("ledger-reconcile", "report", 16),
    JobSpec("web-traffic-daily", "report", 10, delay=1.0),
    JobSpec("ad-spend-monthly", "report", 14, priority=5),
)


def build_jobs(count: int) -> list[JobSpec]:
    """``count`` jobs: the export, the flaky sync, then reports (renamed when repeated)."""
    reports = []
    for index in range(count - 2):
        spec = REPORTS[index % len(REPORTS)]
        round_ = index // len(REPORTS)
        name = spec.name if round_ == 0 else f"{spec.name}-{round_ + 1}"
        reports.append(dataclasses.replace(spec, name=name))
    return [EXPORT, FLAKY, *reports]


class UpstreamTimeout(Exception):
    """The simulated failure of the flaky job's first attempt."""


async def work(payload: Any, ctx: trioqueue.JobContext) -> None:
    """The demo's handler: step through the work, reporting progress after each step."""
    steps: int = payload["steps"]
    for step in range(1, steps + 1):
        await trio.sleep(payload["step_seconds"])
        if ctx.attempt == 1 and step == payload["fail_first_attempt_at"]:
            raise UpstreamTimeout(f"upstream timed out at step {step}/{steps} (simulated)")
        ctx.report_progress(step / steps)


def job_name(payload: Any) -> str:
    """The demo name in a job's payload."""
    if isinstance(payload, Mapping):
        return str(payload.get("name", "?"))
    return "?"


# -- views --------------------------------------------------------------------------------


class View(Protocol):
    """Where the demo reports what it sees."""

    def note(self, text: str) -> None:
        """Report an event (a retry, a cancel request, a library warning)."""

    def update(self, jobs: Mapping[int, trioqueue.JobInfo]) -> None:
        """Show the latest stored state of the jobs."""


class PlainView:
    """One line per event and per job state change; for pipes, logs and ``--no-live``."""

    def __init__(self, out: TextIO, header: str) -> None:
        self._out = out
        self._start = time.monotonic()
        self._seen: dict[int, tuple[str, int]] = {}
        self._write(header)

    def note(self, text: str) -> None:
        self._write(f"{self._elapsed()}  {text}")

    def update(self, jobs: Mapping[int, trioqueue.JobInfo]) -> None:
        for info in sorted(jobs.values(), key=lambda info: info.id):
            state = (info.status, info.attempts)
            if self._seen.get(info.id) != state:
                self._seen[info.id] = state
                self._write(f"{self._elapsed()}  {change_line(info)}")

    def _elapsed(self) -> str:
        return f"{time.monotonic() - self._start:6.2f}s"

    def _write(self, line: str) -> None:
        say(line, file=self._out)


def change_line(info: trioqueue.JobInfo) -> str:
    """A job's stored state on one line."""
    progress = "-" if info.progress is None else f"{info.progress:.0%}"
    error = f"  last_error: {clip(info.last_error, 60)}" if info.last_error else ""
    return (
        f"job {info.id:>3} {job_name(info.payload):<26} {info.status:<9} "
        f"attempt {info.attempts}/{info.max_attempts}  progress {progress:>4}{error}"
    )


class LiveView:
    """A table redrawn in place a few times a second, with the latest events under it."""

    HEADERS = ("ID", "JOB", "PRIO", "STATUS", "TRIES", "STORED PROGRESS", "LAST ERROR")
    EVENTS = 6

    def __init__(self, block: LiveBlock, header: str, *, unicode: bool, colour: bool) -> None:
        self._block = block
        self._header = header
        self._unicode = unicode
        self._colour = colour
        self._start = time.monotonic()
        self._events: collections.deque[str] = collections.deque(maxlen=self.EVENTS)
        self._jobs: Mapping[int, trioqueue.JobInfo] = {}

    def note(self, text: str) -> None:
        self._events.append(f"{time.monotonic() - self._start:6.2f}s  {text}")

    def update(self, jobs: Mapping[int, trioqueue.JobInfo]) -> None:
        self._jobs = jobs
        self._block.draw(self._frame())

    def _frame(self) -> list[str]:
        columns, lines = self._block.size
        width = max(20, columns - 1)
        infos = sorted(self._jobs.values(), key=lambda info: info.id)
        room = max(3, lines - 6 - self.EVENTS)  # header, blank lines, "events", the events
        table = format_table(self.HEADERS, [self._cells(info) for info in infos[:room]])
        rows = [clip(table[0], width)]
        for info, line in zip(infos[:room], table[1:], strict=True):
            rows.append(self._style(clip(line, width), info.status))
        if len(infos) > room:
            rows.append(f"... and {len(infos) - room} more")
        elapsed = f"{time.monotonic() - self._start:.1f}s"
        events = [clip(event, width) for event in self._events]
        return [clip(f"{self._header}  {elapsed}", width), "", *rows, "", "events:", *events]

    def _cells(self, info: trioqueue.JobInfo) -> list[str]:
        return [
            str(info.id),
            job_name(info.payload),
            str(info.priority),
            info.status,
            f"{info.attempts}/{info.max_attempts}",
            progress_bar(info.progress, unicode=self._unicode),
            clip(info.last_error or "", 40),
        ]

    def _style(self, line: str, status: str) -> str:
        return styled(line, STATUS_STYLES.get(status, "")) if self._colour else line


class _ViewHandler(logging.Handler):
    """Sends library log records to the view, so they never tear the live table."""

    def __init__(self, view: View) -> None:
        super().__init__()
        self._view = view

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._view.note(f"{record.levelname.lower()} {record.name}: {record.getMessage()}")
        except Exception:
            self.handleError(record)


@contextmanager
def open_view(options: DemoOptions, out: TextIO, header: str) -> Iterator[View]:
    """The live view on a terminal (unless ``--no-live``), plain lines otherwise."""
    if not (options.live and out.isatty()):
        yield PlainView(out, header)
        return
    with LiveBlock(out) as block:
        yield LiveView(block, header, unicode=supports_unicode(out), colour=wants_colour(out))


# -- running it ---------------------------------------------------------------------------


def worker_config(pace: Pace, view: View) -> trioqueue.WorkerConfig:
    """The demo pool: four workers, short leases and visible heartbeats."""
    return trioqueue.WorkerConfig(
        handler=work,
        queue=QUEUE,
        concurrency=CONCURRENCY,
        visibility_timeout=pace.lease,
        heartbeat_interval=pace(HEARTBEAT),
        max_job_duration=pace(MAX_DURATION),
        poll_interval=pace(POLL),
        shutdown_grace=pace(SHUTDOWN_GRACE),
        backoff=trioqueue.ExponentialBackoff(initial=pace(RETRY_AFTER), cap=pace(8 * RETRY_AFTER)),
        on_job_retry=retry_hook(view),
    )


def retry_hook(view: View) -> Callable[[trioqueue.Job, float], Awaitable[None]]:
    """An ``on_job_retry`` hook that tells the view about each retry."""

    async def on_job_retry(job: trioqueue.Job, delay: float) -> None:
        view.note(
            f"job {job.id} {job_name(job.payload)}: attempt {job.attempt} failed, "
            f"retry in {delay:.2f}s"
        )

    return on_job_retry


def header(options: DemoOptions, pace: Pace) -> str:
    """The first line of either view: what runs, and at what timings."""
    return (
        f"trioqueue demo: {options.jobs} jobs on {backend_name(options)}, {CONCURRENCY} workers, "
        f"lease {pace.lease:g}s, heartbeat {pace(HEARTBEAT):g}s, speed {options.speed:g}x"
    )


def backend_name(options: DemoOptions) -> str:
    """How the header names the backend."""
    if options.backend == "memory":
        return "the memory backend"
    where = f" ({options.where})" if options.where else ""
    return f"PostgreSQL{where}, schema {options.schema}"


@asynccontextmanager
async def open_backend(options: DemoOptions) -> AsyncIterator[DemoBackend]:
    """The backend the options ask for; on PostgreSQL, in a freshly migrated schema.

    Raises:
        SchemaNotOurs: the schema exists and the demo did not create it (nothing written).
    """
    if options.backend == "memory":
        async with trioqueue.open_memory() as memory:
            yield memory
        return
    if options.dsn is None:
        raise ValueError("the postgres demo needs a DSN")
    async with trioqueue.open_postgres(options.dsn, schema=options.schema) as postgres:
        await fresh_schema(postgres)
        yield postgres


#: The comment the demo puts on a schema it creates; it drops only schemas that carry it.
SCHEMA_MARK = "created by trioqueue demo, which drops and recreates it on each run"


class SchemaNotOurs(ValueError):
    """The demo's schema exists but was not created by the demo: it is not the demo's to drop."""

    def __init__(self, schema: str) -> None:
        super().__init__(
            f"schema {schema} already exists and was not made by trioqueue demo, so the demo "
            f"will not drop it; nothing was written. Choose a new name with --schema"
        )


async def fresh_schema(backend: trioqueue.PostgresBackend) -> None:
    """Create the demo's schema afresh (dropping an earlier run's), marked, and migrate it.

    The demo drops only a schema that carries :data:`SCHEMA_MARK`, the comment it puts on
    the schemas it creates: ``--schema`` may name a schema holding someone's jobs and
    tables, which must survive a demo.

    Raises:
        SchemaNotOurs: the schema exists without the mark; nothing was written.
    """
    schema = backend.schema  # validated and lower-case: quoting is all it needs
    async with backend.acquire() as connection, connection.transaction():
        # Two demos on one schema take turns, each seeing the other's mark.
        await connection.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1::text, 0))", f"demo:{schema}"
        )
        mark = await connection.fetchrow(
            "SELECT obj_description(oid, 'pg_namespace') AS mark FROM pg_namespace "
            "WHERE nspname = $1::text",
            schema,
        )
        if mark is not None:
            if mark["mark"] != SCHEMA_MARK:
                raise SchemaNotOurs(schema)
            await connection.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await connection.execute(f'CREATE SCHEMA "{schema}"')
        # COMMENT takes no parameters; the mark is a constant without quotes.
        await connection.execute(f"COMMENT ON SCHEMA \"{schema}\" IS '{SCHEMA_MARK}'")
    await backend.migrate()


def time_budget(jobs: int, pace: Pace) -> float:
    """How long the demo may take before it is declared stuck (real seconds)."""
    return pace(20.0 + 4.0 * jobs) + 5.0


async def enqueue_all(
    backend: DemoBackend, specs: Sequence[JobSpec], pace: Pace
) -> dict[int, JobSpec]:
    """Enqueue every job; the specs by job id."""
    by_id = {}
    for spec in specs:
        job_id = await backend.enqueue(
            QUEUE,
            spec.payload(pace),
            priority=spec.priority,
            delay=None if spec.delay is None else pace(spec.delay),
            max_attempts=spec.max_attempts,
        )
        by_id[job_id] = spec
    return by_id


async def snapshot(backend: DemoBackend, ids: Sequence[int]) -> dict[int, trioqueue.JobInfo]:
    """The stored state of the demo's jobs, by id."""
    infos = await backend.list_jobs(queue=QUEUE, limit=max(100, len(ids)))
    return {info.id: info for info in infos if info.id in ids}


async def watch(backend: DemoBackend, ids: Sequence[int], view: View, pace: Pace) -> None:
    """Show the stored jobs every refresh until every one of them has finished."""
    while True:
        jobs = await snapshot(backend, ids)
        view.update(jobs)
        if all(job_id in jobs and jobs[job_id].status in FINAL for job_id in ids):
            return
        await trio.sleep(pace.refresh)


async def cancel_midway(backend: DemoBackend, job_id: int, view: View, pace: Pace) -> None:
    """Cancel ``job_id`` once its *stored* progress reaches :data:`CANCEL_AT`.

    Waiting on the stored value, not on a timer, shows that heartbeats carry progress.
    """
    while True:
        info = await backend.get_job(job_id)
        if info.status in FINAL:
            view.note(f"job {job_id} {job_name(info.payload)}: finished before it was cancelled")
            return
        if info.status == "running" and (info.progress or 0.0) >= CANCEL_AT:
            break
        await trio.sleep(pace.refresh)
    accepted = await backend.cancel(job_id)
    verdict = "cancel requested" if accepted else "cancel refused"
    view.note(
        f"job {job_id} {job_name(info.payload)}: {verdict} at stored progress "
        f"{info.progress or 0.0:.0%}"
    )


@dataclass(frozen=True)
class Result:
    """What the demo saw at the end."""

    specs: Mapping[int, JobSpec]
    jobs: Mapping[int, trioqueue.JobInfo]
    elapsed: float
    timed_out: bool


async def run_jobs(backend: DemoBackend, options: DemoOptions, pace: Pace, view: View) -> Result:
    """Enqueue the workload, run a pool over it until every job finished, stop the pool."""
    specs = await enqueue_all(backend, build_jobs(options.jobs), pace)
    ids = list(specs)
    view.update(await snapshot(backend, ids))
    started = trio.current_time()
    async with trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, worker_config(pace, view))
        export = next(i for i, spec in specs.items() if spec.expect is Expect.CANCELLED)
        nursery.start_soon(cancel_midway, backend, export, view, pace)
        with trio.move_on_after(time_budget(options.jobs, pace)) as budget:
            await watch(backend, ids, view, pace)
        elapsed = trio.current_time() - started
        nursery.cancel_scope.cancel()  # graceful shutdown of the pool
    jobs = await snapshot(backend, ids)
    view.update(jobs)
    return Result(specs, jobs, elapsed, budget.cancelled_caught)


# -- the verdict --------------------------------------------------------------------------


def problem(spec: JobSpec, info: trioqueue.JobInfo | None) -> str | None:
    """Why ``info`` is not how ``spec`` should have ended, or None when it is."""
    if info is None:
        return "missing from list_jobs"
    error = info.last_error or ""
    if spec.expect is Expect.CANCELLED:
        if info.status == "failed" and error.startswith("cancelled"):
            return None
        return (
            f"expected failed with a 'cancelled' error, got {info.status} ({error or 'no error'})"
        )
    if info.status != "succeeded":
        return f"expected succeeded, got {info.status} ({error or 'no error'})"
    if spec.expect is Expect.SUCCEED_ON_RETRY and info.attempts < 2:
        return f"expected to succeed on a retry, succeeded on attempt {info.attempts}"
    return None


def highlight(spec: JobSpec, info: trioqueue.JobInfo) -> str | None:
    """A summary line for the jobs that show something, when they ended as expected."""
    if spec.expect is Expect.SUCCEED_ON_RETRY:
        return f"succeeded on attempt {info.attempts}, after a retry, as expected"
    if spec.expect is Expect.CANCELLED:
        return f"failed as expected, last_error: {clip(info.last_error or '', 60)}"
    return None


def summary(result: Result, speed: float) -> tuple[list[str], int]:
    """The closing lines of the demo and its exit code."""
    counts = collections.Counter(info.status for info in result.jobs.values())
    tally = ", ".join(f"{count} {status}" for status, count in sorted(counts.items()))
    lines = [
        f"summary: {len(result.specs)} jobs in {result.elapsed:.1f}s at speed {speed:g}x: {tally}"
    ]
    problems = []
    for job_id, spec in result.specs.items():
        info = result.jobs.get(job_id)
        trouble = problem(spec, info)
        if trouble is not None:
            problems.append(f"  job {job_id} {spec.name} (should {spec.expect.value}): {trouble}")
        elif info is not None and (note := highlight(spec, info)):
            lines.append(f"  job {job_id} {spec.name}: {note}")
    if result.timed_out:
        lines.append(f"demo FAILED: jobs still unfinished after {result.elapsed:.1f}s")
    if problems:
        lines += [f"demo FAILED: {len(problems)} job(s) did not end as expected:", *problems]
    if result.timed_out or problems:
        return lines, 1
    return [*lines, "demo OK: every job ended as expected"], 0


async def start_dashboard(nursery: trio.Nursery, backend: DemoBackend, port: int) -> str:
    """Serve the dashboard over the demo's backend on 127.0.0.1; the line saying where."""
    try:
        address = await _dashboard.start(
            nursery,
            backend,
            host="127.0.0.1",
            port=port,
            token=_dashboard.token_from_env(),
            fallback=True,
        )
    except ImportError:
        return f"dashboard: not started ({_dashboard.INSTALL_HINT})"
    return f"dashboard: {address} (open it while the demo runs, or pass --keep-dashboard)"


async def run_demo(options: DemoOptions, out: TextIO) -> int:
    """Run the demo, print its summary to ``out``, and return the exit code."""
    pace = Pace(options.speed)
    # The backend first: a schema the demo may not use is refused before anything is drawn.
    async with open_backend(options) as backend, trio.open_nursery() as nursery:
        if options.dashboard_port is not None:
            out.write(await start_dashboard(nursery, backend, options.dashboard_port) + "\n")
            out.flush()
        with (
            open_view(options, out, header(options, pace)) as view,
            library_logs_to(_ViewHandler(view), verbose=options.verbose, level=options.log_level),
        ):
            result = await run_jobs(backend, options, pace, view)
        lines, code = summary(result, options.speed)
        say(*lines, file=out)
        if options.keep_dashboard and options.dashboard_port is not None:
            await linger(out)
        nursery.cancel_scope.cancel()  # the dashboard ends with the demo
    return code


async def linger(out: TextIO) -> None:
    """Keep the dashboard up after the summary until Ctrl-C or SIGTERM (then the demo's
    exit code stands: the run itself is over)."""
    out.write("the dashboard stays up with the finished jobs; Ctrl-C to stop\n")
    out.flush()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            return
