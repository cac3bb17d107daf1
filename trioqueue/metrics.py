"""Prometheus metrics of a worker process (the ``metrics`` extra: ``prometheus-client``).

:class:`PrometheusObserver` turns a pool's events into counters and histograms on a
registry of its own; :meth:`PrometheusObserver.sample` keeps the backend's gauges fresh
(:class:`DatabaseGauges`, which the dashboard's ``/metrics`` serves alone);
:func:`serve_metrics` does both and serves ``/metrics`` (``trioqueue worker
--metrics-port``). docs/metrics.rst lists every metric and when it moves.

Threads: prometheus-client's HTTP server answers scrapes on a thread of its own. It only
reads prometheus-client's values, which take a lock; it never calls into the backend. The
backend's gauges are sampled by a trio task every few seconds instead: ``queue_stats()`` is a
database statement that needs the trio loop, and ``statistics()`` copies dicts that the
trio thread changes, so neither may run on the scrape's thread.
"""

from __future__ import annotations

import collections
import functools
import math
import socket
import socketserver
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import trio
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    make_wsgi_app,
    start_http_server,
)

import trioqueue
from trioqueue import PoolObserver
from trioqueue._types import JOB_STATUSES, QueueStats

__all__ = ["DatabaseGauges", "MetricsServer", "PrometheusObserver", "serve_metrics"]

#: A path served beside ``/metrics`` (``serve_metrics(routes=...)``): it answers an HTTP
#: status and a JSON text. It runs on the scrape's thread, so it may read only what the trio
#: thread assigns whole (a snapshot), never call into trio or the backend.
Route = Callable[[], tuple[int, str]]

#: Handler durations run from milliseconds to an hour.
HANDLER_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
    300.0, 600.0, 1800.0, 3600.0, math.inf,
)  # fmt: skip
#: A renewal statement takes milliseconds; one near its timeout (up to V) is trouble.
RENEWAL_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, math.inf,
)  # fmt: skip
#: A job's wait before its claim: none at all on an idle queue, hours behind a backlog.
WAIT_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
    300.0, 600.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0, math.inf,
)  # fmt: skip
#: The ``reason`` label's values, present from the start so that ``rate()`` sees a zero.
LEASE_LOSS_REASONS = ("lease_expired", "reclaimed", "gone")
#: The ``result`` label's values of the maintainer's passes, present from the start too.
PASS_RESULTS = ("complete", "cut", "failed")
#: How many queues the sampled gauges name by default; the others are summed into
#: :data:`OTHER_QUEUES` (docs/metrics.rst, "How many series").
MAX_QUEUES = 100
#: The ``queue`` label of the queues past ``max_queues``, summed.
OTHER_QUEUES = "_other"


class DatabaseGauges:
    """The backend's gauges, sampled: jobs per queue and status, the oldest ready job's
    age per queue, and the connections in use. What the dashboard's ``/metrics`` serves;
    a :class:`PrometheusObserver` keeps them beside its worker metrics.

    Each queue costs six series (five statuses and an age). So that a database of many
    queues cannot flood Prometheus, only the ``max_queues`` queues with the most jobs
    are named; the rest are summed into one ``queue="_other"`` (their counts added, their
    oldest ready age the oldest of them).

    Args:
        registry: where the gauges are registered; by default a new ``CollectorRegistry``
            of their own, as :attr:`registry`.
        max_queues: how many queues are named, at least 1 (default 100): at most
            ``6 * (max_queues + 1) + 1`` series.

    Raises:
        ValueError: ``max_queues`` is not an int of at least 1.
    """

    def __init__(
        self, registry: CollectorRegistry | None = None, *, max_queues: int = MAX_QUEUES
    ) -> None:
        if isinstance(max_queues, bool) or not isinstance(max_queues, int) or max_queues < 1:
            raise ValueError(f"max_queues must be an int of at least 1, not {max_queues!r}")
        self.registry = CollectorRegistry() if registry is None else registry
        self.max_queues = max_queues
        r = self.registry
        self.connections_in_use = Gauge(
            "trioqueue_connections_in_use",
            "The backend's connections checked out (sampled)",
            registry=r,
        )
        self.jobs = Gauge(
            "trioqueue_jobs",
            "Jobs per queue and status in the database (sampled)",
            ["queue", "status"],
            registry=r,
        )
        self.oldest_ready_age = Gauge(
            "trioqueue_oldest_ready_age_seconds",
            "Seconds the queue's oldest ready job has been claimable, 0 if none (sampled)",
            ["queue"],
            registry=r,
        )
        self._queues: set[str] = set()  # the queue labels of the last sample

    async def sample(
        self,
        backend: trioqueue.MemoryBackend | trioqueue.PostgresBackend,
        *,
        interval: float = 5.0,
        counts: bool = True,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Sample the backend's gauges now and every ``interval`` seconds, until cancelled.

        ``trioqueue_connections_in_use`` comes from ``backend.statistics()``;
        ``trioqueue_jobs`` and ``trioqueue_oldest_ready_age_seconds`` from
        ``backend.queue_stats()`` (one grouped count over the jobs table), unless
        ``counts`` is false. A failed count leaves the last values
        standing. Starts with ``nursery.start``, which returns after the first sample.
        """
        while True:
            self.connections_in_use.set(backend.statistics().connections_in_use)
            if counts:
                try:
                    per_queue = await backend.queue_stats()
                except Exception:
                    pass  # the database is away: keep the last sample; the pool will say so
                else:
                    self.set_queues(per_queue)
            task_status.started()
            task_status = trio.TASK_STATUS_IGNORED
            await trio.sleep(interval)

    def set_queues(self, per_queue: dict[str, QueueStats]) -> None:
        """Set the per-queue gauges to ``per_queue``, the queues past ``max_queues``
        summed; a queue no longer there drops out."""
        shown = _bounded(per_queue, self.max_queues)
        for queue, (counts, age) in shown.items():
            for status in JOB_STATUSES:
                self.jobs.labels(queue, status).set(counts.get(status, 0))
            # 0 rather than no series when nothing waits: an alert on the age stays simple.
            self.oldest_ready_age.labels(queue).set(age)
        for gone in self._queues - shown.keys():  # a queue with no rows left
            for status in JOB_STATUSES:
                self.jobs.remove(gone, status)
            self.oldest_ready_age.remove(gone)
        self._queues = set(shown)


def _bounded(
    per_queue: dict[str, QueueStats], max_queues: int
) -> dict[str, tuple[collections.Counter[str], float]]:
    """``(counts, oldest ready age)`` by queue label: the ``max_queues`` queues with the
    most jobs by name (ties by name), the others summed as :data:`OTHER_QUEUES` (with a
    queue really named so)."""
    names = sorted(per_queue, key=lambda queue: (-sum(per_queue[queue].counts.values()), queue))
    counts: dict[str, collections.Counter[str]] = {}
    ages: dict[str, float] = {}
    for rank, queue in enumerate(names):
        label = queue if rank < max_queues else OTHER_QUEUES
        stats = per_queue[queue]
        counts.setdefault(label, collections.Counter()).update(stats.counts)
        ages[label] = max(ages.get(label, 0.0), stats.oldest_ready_age or 0.0)
    return {label: (counts[label], ages[label]) for label in counts}


class PrometheusObserver(PoolObserver):
    """A pool observer that keeps the worker-side metrics on a Prometheus registry.

    Pass it to :func:`trioqueue.run_worker_pool` as ``observer=``; one observer may serve
    several pools (the job metrics carry a ``queue`` label).

    Args:
        registry: where the metrics are registered; by default a new
            ``CollectorRegistry`` of its own (not prometheus-client's global one), as
            :attr:`registry`.
        max_queues: how many queues the sampled gauges name (:class:`DatabaseGauges`).
        process: whether the registry also gets prometheus-client's standard process
            collector (``process_cpu_seconds_total``, ``process_resident_memory_bytes``,
            open file descriptors, ...; on Linux). Default true; leave it out when the
            registry has one already (prometheus-client's global registry does).
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        max_queues: int = MAX_QUEUES,
        process: bool = True,
    ) -> None:
        self.registry = CollectorRegistry() if registry is None else registry
        r = self.registry
        self.build_info = Gauge(
            "trioqueue_build_info",
            "Always 1; its version label is trioqueue's version",
            ["version"],
            registry=r,
        )
        self.build_info.labels(trioqueue.__version__).set(1)
        if process:
            ProcessCollector(registry=r)
        self.job_wait = Histogram(
            "trioqueue_job_wait_seconds",
            "Time from a job becoming claimable (enqueued, its delay over, put back) to "
            "its claim, by the database's clock",
            ["queue"],
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge(
            "trioqueue_in_flight",
            "Jobs a worker pool holds whose outcome is not yet written (read at scrape)",
            ["queue", "worker_id"],
            registry=r,
        )
        self.jobs_finished = Counter(
            "trioqueue_jobs_finished_total",
            "Job attempts finished, by queue and outcome",
            ["queue", "outcome"],
            registry=r,
        )
        self.handler_duration = Histogram(
            "trioqueue_handler_duration_seconds",
            "Time from a job's claim hook starting to its handler exiting",
            ["queue"],
            buckets=HANDLER_BUCKETS,
            registry=r,
        )
        self.renewal_duration = Histogram(
            "trioqueue_renewal_duration_seconds",
            "Time a renewal statement took to answer, raise or time out",
            buckets=RENEWAL_BUCKETS,
            registry=r,
        )
        self.lease_losses = Counter(
            "trioqueue_lease_losses_total",
            "Job attempts that lost their lease, by reason",
            ["reason"],
            registry=r,
        )
        self.abandoned_renewals = Counter(
            "trioqueue_abandoned_renewals_total",
            "Renewal statements stuck past their timeout and abandoned",
            registry=r,
        )
        self.pruned_jobs = Counter(
            "trioqueue_pruned_jobs_total",
            "Finished jobs the maintainer deleted past their queue's retention, by queue "
            "and status",
            ["queue", "status"],
            registry=r,
        )
        self.pruned_audit = Counter(
            "trioqueue_pruned_audit_entries_total",
            "Audit entries the maintainer deleted past the audit log's retention",
            registry=r,
        )
        self.maintenance_passes = Counter(
            "trioqueue_maintenance_passes_total",
            "Retention passes of this process's maintainer, by result",
            ["result"],
            registry=r,
        )
        self.oldest_finished_age = Gauge(
            "trioqueue_oldest_finished_age_seconds",
            "Age of the oldest finished job kept, as the maintainer's latest pass saw it "
            "(NaN until a pass answered)",
            registry=r,
        )
        self.oldest_finished_age.set(math.nan)
        self.maintainer = Gauge(
            "trioqueue_maintainer",
            "1 while the worker pool is the store's maintainer (the one that prunes), else 0",
            ["worker_id"],
            registry=r,
        )
        for result in PASS_RESULTS:
            self.maintenance_passes.labels(result)
        #: The backend's gauges, on the same registry (:class:`DatabaseGauges`).
        self.gauges = DatabaseGauges(r, max_queues=max_queues)
        self.connections_in_use = self.gauges.connections_in_use
        self.jobs = self.gauges.jobs
        self.oldest_ready_age = self.gauges.oldest_ready_age
        for reason in LEASE_LOSS_REASONS:
            self.lease_losses.labels(reason)
        # Children by label values: ``labels()`` takes a lock and builds a tuple each call.
        self._finished: dict[tuple[str, str], Counter] = {}
        self._durations: dict[str, Histogram] = {}
        self._waits: dict[str, Histogram] = {}

    # -- the pool's events ------------------------------------------------------------

    def pool_started(self, queue: str, worker_id: str, in_flight: Callable[[], int]) -> None:
        # Read when scraped, on the scrape's thread: the pool's count is one int, so the
        # read is safe there and costs the pool nothing per job.
        self.in_flight.labels(queue, worker_id).set_function(in_flight)

    def pool_stopped(self, queue: str, worker_id: str) -> None:
        try:
            self.in_flight.remove(queue, worker_id)
        except KeyError:  # never started here (another observer's pool)
            pass
        try:
            self.maintainer.remove(worker_id)  # a restart's new worker_id replaces it
        except KeyError:  # never a candidate
            pass

    def job_claimed(self, queue: str, waited: float | None) -> None:
        if waited is None:
            return
        child = self._waits.get(queue)
        if child is None:
            child = self._waits[queue] = self.job_wait.labels(queue)
        child.observe(waited)

    def job_finished(self, queue: str, outcome: str) -> None:
        child = self._finished.get((queue, outcome))
        if child is None:
            child = self._finished[queue, outcome] = self.jobs_finished.labels(queue, outcome)
        child.inc()

    def handler_finished(self, queue: str, seconds: float) -> None:
        child = self._durations.get(queue)
        if child is None:
            child = self._durations[queue] = self.handler_duration.labels(queue)
        child.observe(seconds)

    def renewal_finished(self, seconds: float) -> None:
        self.renewal_duration.observe(seconds)

    def lease_lost(self, reason: str) -> None:
        self.lease_losses.labels(reason).inc()

    def renewal_abandoned(self) -> None:
        self.abandoned_renewals.inc()

    def maintainer_changed(self, worker_id: str, holding: bool) -> None:
        self.maintainer.labels(worker_id).set(1 if holding else 0)

    def maintenance_pass(
        self,
        result: str,
        deleted: Mapping[tuple[str, str], int],
        audit_deleted: int,
        oldest_finished_age: float | None,
        seconds: float,
    ) -> None:
        self.maintenance_passes.labels(result).inc()
        for (queue, status), count in deleted.items():
            self.pruned_jobs.labels(queue, status).inc(count)
        if audit_deleted:
            self.pruned_audit.inc(audit_deleted)
        if oldest_finished_age is not None:  # None: no batch answered, keep the last
            self.oldest_finished_age.set(oldest_finished_age)

    # -- the backend's gauges ---------------------------------------------------------

    async def sample(
        self,
        backend: trioqueue.MemoryBackend | trioqueue.PostgresBackend,
        *,
        interval: float = 5.0,
        counts: bool = True,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """:meth:`DatabaseGauges.sample`, for the gauges beside the worker metrics."""
        await self.gauges.sample(backend, interval=interval, counts=counts, task_status=task_status)


@dataclass(frozen=True)
class MetricsServer:
    """What :func:`serve_metrics` yields: the observer to pass to the pool, and the
    address ``/metrics`` is served on (the port the system chose, when asked for 0)."""

    observer: PrometheusObserver
    host: str
    port: int


@asynccontextmanager
async def serve_metrics(
    backend: trioqueue.MemoryBackend | trioqueue.PostgresBackend,
    *,
    port: int,
    host: str = "127.0.0.1",
    interval: float = 5.0,
    max_queues: int = MAX_QUEUES,
    routes: Mapping[str, Route] | None = None,
) -> AsyncIterator[MetricsServer]:
    """Serve ``/metrics`` on ``host:port`` while the block runs, with the backend's
    gauges sampled every ``interval`` seconds, naming at most ``max_queues`` queues
    (:class:`DatabaseGauges`). ``routes``: other paths to answer, each a :data:`Route`
    (``trioqueue worker`` serves its health checks so, docs/howto/deploy.rst).

    The HTTP server is prometheus-client's own, on a thread; see the module's docstring
    for why that is safe. Leaving the block stops it.

    Raises:
        OSError: the address cannot be bound.
        ValueError: ``max_queues`` is not an int of at least 1 (nothing is served).
    """
    observer = PrometheusObserver(max_queues=max_queues)
    start = functools.partial(_start_server, port, host, observer.registry, dict(routes or {}))
    server, thread = await trio.to_thread.run_sync(start)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(functools.partial(observer.sample, backend, interval=interval))
            yield MetricsServer(observer, host, server.server_port)
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            # shutdown() waits for the serving loop's next poll (up to half a second).
            await trio.to_thread.run_sync(server.shutdown)
            server.server_close()
            await trio.to_thread.run_sync(thread.join)


def _start_server(
    port: int, host: str, registry: CollectorRegistry, routes: dict[str, Route]
) -> tuple[WSGIServer, threading.Thread]:
    """prometheus-client's server, or, with ``routes``, the same kind of server (a thread
    per request, no request log) whose app answers those paths and passes the rest to
    prometheus-client's app."""
    if not routes:
        return start_http_server(port, host, registry=registry)
    # An IPv6 literal: wsgiref's server binds IPv4 unless told.
    server_class = _ThreadingServer6 if ":" in host else _ThreadingServer
    app = _with_routes(make_wsgi_app(registry), routes)
    server = make_server(host, port, app, server_class, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread


def _with_routes(metrics: Any, routes: dict[str, Route]) -> Any:
    """A WSGI app: a GET of one of ``routes`` gets its answer as JSON, anything else goes
    to ``metrics``."""

    def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        route = routes.get(environ.get("PATH_INFO", ""))
        if route is None or environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            result: Iterable[bytes] = metrics(environ, start_response)
            return result
        status, text = route()
        body = text.encode()
        headers = [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-store"),
        ]
        start_response(f"{status} {HTTPStatus(status).phrase}", headers)
        return [b"" if environ["REQUEST_METHOD"] == "HEAD" else body]

    return app


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a probe left hanging never holds the process up


class _ThreadingServer6(_ThreadingServer):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """No line per request: probes come every few seconds."""
