"""Worker metrics (docs/metrics.rst): each counter moves for the event it names.

Whole pools on the memory backend under the autojump clock, with a
:class:`~trioqueue.metrics.PrometheusObserver` as their observer. The observer hears of an
outcome before the pool's hooks do, so waiting for a hook is waiting for the count.
"""

from __future__ import annotations

import urllib.request

import pytest
import trio
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import trioqueue
from tests._pool_harness import Recorder, config
from tests._web_harness import client
from trioqueue._types import Ack
from trioqueue.metrics import MAX_QUEUES, DatabaseGauges, PrometheusObserver, serve_metrics
from trioqueue.testing import error, hang
from trioqueue.web import create_app


def value(observer: PrometheusObserver, name: str, **labels: str) -> float:
    found = observer.registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


def finished(observer: PrometheusObserver, outcome: str) -> float:
    return value(observer, "trioqueue_jobs_finished_total", queue="q", outcome=outcome)


async def test_outcomes_and_handler_durations_are_counted(autojump_clock: object) -> None:
    rec = Recorder()
    observer = PrometheusObserver()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        ok = await backend.enqueue("q", {"sleep": 3})
        flaky = await backend.enqueue("q", {"fail_attempts": 1})  # retried, then succeeds
        doomed = await backend.enqueue("q", {"fail_attempts": 9}, max_attempts=1)
        cfg = config(rec, backoff=trioqueue.ExponentialBackoff(initial=1, jitter=0))
        await nursery.start(
            lambda **kw: trioqueue.run_worker_pool(backend, cfg, observer=observer, **kw)
        )
        await rec.wait_for("succeeded", ok)
        await rec.wait_for("succeeded", flaky)
        await rec.wait_for("failed", doomed)
        nursery.cancel_scope.cancel()
    assert finished(observer, "succeeded") == 2
    assert finished(observer, "retried") == 1
    assert finished(observer, "failed") == 1
    assert finished(observer, "cancelled") == 0 and finished(observer, "unavailable") == 0
    # Four attempts; only the first job's handler took time (3 s on the fake clock).
    assert value(observer, "trioqueue_handler_duration_seconds_count", queue="q") == 4
    assert value(observer, "trioqueue_handler_duration_seconds_sum", queue="q") == 3.0
    assert value(observer, "trioqueue_handler_duration_seconds_bucket", queue="q", le="2.5") == 3
    # Each batch's first beat is immediate, and the 3 s job had one more at H=2.
    assert value(observer, "trioqueue_renewal_duration_seconds_count") >= 2
    assert value(observer, "trioqueue_lease_losses_total", reason="lease_expired") == 0


async def test_a_cancel_counts_as_cancelled_not_failed(autojump_clock: object) -> None:
    rec = Recorder()
    observer = PrometheusObserver()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        job_id = await backend.enqueue("q", {"sleep": 100})
        cfg = config(rec)
        await nursery.start(
            lambda **kw: trioqueue.run_worker_pool(backend, cfg, observer=observer, **kw)
        )
        await rec.wait_for("started", job_id)
        assert await backend.cancel(job_id) is True
        await rec.wait_for("failed", job_id)
        nursery.cancel_scope.cancel()
    assert finished(observer, "cancelled") == 1
    assert finished(observer, "failed") == 0


async def test_a_lease_lost_to_hanging_renewals_is_unavailable_and_a_loss(
    autojump_clock: object,
) -> None:
    """Every renewal hangs until its timeout: the lease expires at V, nothing is written."""
    rec = Recorder()
    observer = PrometheusObserver()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        backend.inject("renew", hang())  # interruptible: each one times out
        job_id = await backend.enqueue("q", {"sleep": 100})
        cfg = config(rec, visibility_timeout=4, heartbeat_interval=1)
        await nursery.start(
            lambda **kw: trioqueue.run_worker_pool(backend, cfg, observer=observer, **kw)
        )
        await rec.wait_for("unavailable", job_id)
        # Read now: the job is claimed again at once, and released when the pool stops.
        assert finished(observer, "unavailable") == 1
        assert value(observer, "trioqueue_lease_losses_total", reason="lease_expired") == 1
        assert value(observer, "trioqueue_lease_losses_total", reason="reclaimed") == 0
        # The timed-out statements are observed too, each at its timeout (more than 0 s).
        assert value(observer, "trioqueue_renewal_duration_seconds_count") >= 1
        assert value(observer, "trioqueue_renewal_duration_seconds_bucket", le="0.001") == 0
        assert value(observer, "trioqueue_abandoned_renewals_total") == 0
        nursery.cancel_scope.cancel()
        backend.inject("renew", None)


@pytest.mark.parametrize(
    ("thief_acks", "reason"), [(False, "reclaimed"), (True, "gone")], ids=["reclaimed", "gone"]
)
async def test_a_row_taken_or_finished_elsewhere_is_a_loss_by_its_reason(
    autojump_clock: object, thief_acks: bool, reason: str
) -> None:
    """Another worker claims the row (and, for ``gone``, finishes it) while the pool runs it:
    the pool's next renewal says so, and the attempt ends unavailable."""
    rec = Recorder()
    observer = PrometheusObserver()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        job_id = await backend.enqueue("q", {"sleep": 100})
        cfg = config(rec, concurrency=1)  # its one slot stays busy: the thief gets the row
        await nursery.start(
            lambda **kw: trioqueue.run_worker_pool(backend, cfg, observer=observer, **kw)
        )
        await rec.wait_for("started", job_id)
        await trio.sleep(1)  # between beats (t=0, t=2): the thief acts before the next one
        backend.expire(job_id)
        [stolen] = await backend.claim("q", limit=1, worker_id="thief", visibility_timeout=60)
        if thief_acks:
            assert await backend.ack([Ack(job_id, stolen.job.claim_seq)]) == [True]
        await rec.wait_for("unavailable", job_id)
        assert value(observer, "trioqueue_lease_losses_total", reason=reason) == 1
        assert (
            sum(
                value(observer, "trioqueue_lease_losses_total", reason=r)
                for r in ("lease_expired", "reclaimed", "gone")
            )
            == 1
        )
        assert finished(observer, "unavailable") == 1
        nursery.cancel_scope.cancel()


async def test_a_stuck_renewal_is_counted_as_abandoned(autojump_clock: object) -> None:
    rec = Recorder()
    observer = PrometheusObserver()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        backend.inject("renew", hang(interruptible=False, times=1))  # the first one wedges
        job_id = await backend.enqueue("q", {"sleep": 100})
        cfg = config(rec, visibility_timeout=10, heartbeat_interval=2)
        await nursery.start(
            lambda **kw: trioqueue.run_worker_pool(backend, cfg, observer=observer, **kw)
        )
        await rec.wait_for("unavailable", job_id)  # its lease ran out meanwhile (t=10)
        await trio.sleep(1)  # abandoned at t=10.25, past the renewal's timeout plus grace
        assert value(observer, "trioqueue_abandoned_renewals_total") == 1
        nursery.cancel_scope.cancel()
        backend.inject("renew", None)  # release the wedged call so the pool can exit


async def test_a_refused_renewal_is_still_a_renewal_duration(autojump_clock: object) -> None:
    rec = Recorder()
    observer = PrometheusObserver()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        backend.inject("renew", error())
        job_id = await backend.enqueue("q", {"sleep": 10})
        cfg = config(rec, visibility_timeout=2, heartbeat_interval=1)
        await nursery.start(
            lambda **kw: trioqueue.run_worker_pool(backend, cfg, observer=observer, **kw)
        )
        await rec.wait_for("unavailable", job_id)
        assert value(observer, "trioqueue_renewal_duration_seconds_count") >= 1
        assert value(observer, "trioqueue_lease_losses_total", reason="lease_expired") == 1
        nursery.cancel_scope.cancel()


async def test_backend_gauges_are_sampled_on_a_trio_task(autojump_clock: object) -> None:
    observer = PrometheusObserver()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        for n in range(3):
            await backend.enqueue("q", n)
        await backend.enqueue("other", 0, delay=3600)
        await nursery.start(lambda **kw: observer.sample(backend, interval=5, **kw))
        assert value(observer, "trioqueue_jobs", queue="q", status="ready") == 3
        assert value(observer, "trioqueue_jobs", queue="q", status="failed") == 0
        assert value(observer, "trioqueue_jobs", queue="other", status="scheduled") == 1
        assert value(observer, "trioqueue_connections_in_use") == 0
        await backend.claim("q", limit=1, worker_id="w", visibility_timeout=60)
        await trio.sleep(6)  # past the next sample, at t=5
        assert value(observer, "trioqueue_jobs", queue="q", status="ready") == 2
        assert value(observer, "trioqueue_jobs", queue="q", status="running") == 1
        nursery.cancel_scope.cancel()


async def test_oldest_ready_age_is_sampled_per_queue(autojump_clock: object) -> None:
    """Seconds since the oldest ready job became claimable; 0 when none is ready."""
    observer = PrometheusObserver()

    def age(queue: str) -> float | None:
        return observer.registry.get_sample_value(
            "trioqueue_oldest_ready_age_seconds", {"queue": queue}
        )

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        start = trio.current_time()
        await backend.enqueue("q", 0)
        await backend.enqueue("other", 0, delay=8)
        await nursery.start(lambda **kw: observer.sample(backend, interval=5, **kw))
        assert age("q") == 0
        assert age("other") == 0  # scheduled, not ready
        await trio.sleep_until(start + 11)  # samples at 5 and 10
        assert age("q") == pytest.approx(10)
        assert age("other") == pytest.approx(2)  # ready since its delay ran out, at 8
        [claimed] = await backend.claim("q", limit=1, worker_id="w", visibility_timeout=60)
        await backend.ack([Ack(claimed.job.id, claimed.job.claim_seq)])
        await trio.sleep_until(start + 16)  # the sample at 15
        assert age("q") == 0  # its only job finished: none ready
        assert age("other") == pytest.approx(7)
        nursery.cancel_scope.cancel()


async def test_the_exposition_has_exactly_the_documented_names_and_labels(
    autojump_clock: object,
) -> None:
    rec = Recorder()
    observer = PrometheusObserver()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        job_id = await backend.enqueue("q", {"sleep": 1})
        await nursery.start(lambda **kw: observer.sample(backend, **kw))
        cfg = config(rec)
        await nursery.start(
            lambda **kw: trioqueue.run_worker_pool(backend, cfg, observer=observer, **kw)
        )
        await rec.wait_for("succeeded", job_id)
        observer.renewal_abandoned()  # so that every family has a sample to show
        nursery.cancel_scope.cancel()
    # prometheus-client adds a ``_created`` gauge (a timestamp) to every counter and
    # histogram series; the parser shows them as families of their own.
    # The standard process collector's ``process_*`` families are prometheus-client's own
    # (tests/unit/test_metrics_new.py).
    families = {
        family.name: family
        for family in text_string_to_metric_families(generate_latest(observer.registry).decode())
        if not family.name.endswith("_created") and not family.name.startswith("process_")
    }
    # The parser names counters without their ``_total`` suffix.
    assert {name: family.type for name, family in families.items()} == {
        "trioqueue_build_info": "gauge",
        "trioqueue_job_wait_seconds": "histogram",
        "trioqueue_in_flight": "gauge",  # no sample once the pool has stopped
        "trioqueue_jobs": "gauge",
        "trioqueue_jobs_finished": "counter",
        "trioqueue_handler_duration_seconds": "histogram",
        "trioqueue_renewal_duration_seconds": "histogram",
        "trioqueue_lease_losses": "counter",
        "trioqueue_abandoned_renewals": "counter",
        "trioqueue_connections_in_use": "gauge",
        "trioqueue_oldest_ready_age_seconds": "gauge",
        # the maintainer's (docs/howto/retention.rst)
        "trioqueue_pruned_jobs": "counter",  # no sample: nothing was past its retention
        "trioqueue_pruned_audit_entries": "counter",
        "trioqueue_maintenance_passes": "counter",
        "trioqueue_oldest_finished_age_seconds": "gauge",
        "trioqueue_maintainer": "gauge",  # no sample once the pool has stopped
    }
    labels = {
        sample.name: set(sample.labels) - {"le"}
        for family in families.values()
        for sample in family.samples
    }
    assert labels == {
        "trioqueue_build_info": {"version"},
        "trioqueue_job_wait_seconds_bucket": {"queue"},
        "trioqueue_job_wait_seconds_count": {"queue"},
        "trioqueue_job_wait_seconds_sum": {"queue"},
        "trioqueue_jobs": {"queue", "status"},
        "trioqueue_jobs_finished_total": {"queue", "outcome"},
        "trioqueue_handler_duration_seconds_bucket": {"queue"},
        "trioqueue_handler_duration_seconds_count": {"queue"},
        "trioqueue_handler_duration_seconds_sum": {"queue"},
        "trioqueue_renewal_duration_seconds_bucket": set(),
        "trioqueue_renewal_duration_seconds_count": set(),
        "trioqueue_renewal_duration_seconds_sum": set(),
        "trioqueue_lease_losses_total": {"reason"},
        "trioqueue_abandoned_renewals_total": set(),
        "trioqueue_connections_in_use": set(),
        "trioqueue_oldest_ready_age_seconds": {"queue"},
        "trioqueue_pruned_audit_entries_total": set(),
        "trioqueue_maintenance_passes_total": {"result"},
        "trioqueue_oldest_finished_age_seconds": set(),
    }
    reasons = {s.labels["reason"] for s in families["trioqueue_lease_losses"].samples}
    assert reasons == {"lease_expired", "reclaimed", "gone"}


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:
        assert answer.status == 200
        body: bytes = answer.read()
        return body.decode()


async def test_serve_metrics_answers_a_real_scrape_while_a_pool_works() -> None:
    """Real time and a real socket: prometheus-client's server thread answers the scrape."""
    done = trio.Event()
    handled = 0

    async def handler(payload: object, ctx: trioqueue.JobContext) -> None:
        nonlocal handled
        handled += 1

    async def succeeded(job: trioqueue.Job) -> None:
        if handled == 5:
            done.set()

    cfg = trioqueue.WorkerConfig(
        handler=handler, queue="q", on_job_succeeded=succeeded, max_job_duration=60
    )
    async with trioqueue.open_memory() as backend:
        for n in range(5):
            await backend.enqueue("q", n)
        async with (
            serve_metrics(backend, port=0, interval=3600) as served,
            trio.open_nursery() as nursery,
        ):
            assert served.host == "127.0.0.1" and served.port > 0
            await nursery.start(
                lambda **kw: trioqueue.run_worker_pool(backend, cfg, observer=served.observer, **kw)
            )
            with trio.fail_after(30):
                await done.wait()
            url = f"http://127.0.0.1:{served.port}/metrics"
            text = await trio.to_thread.run_sync(_scrape, url)
            nursery.cancel_scope.cancel()
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    finished_key = (
        "trioqueue_jobs_finished_total",
        (("outcome", "succeeded"), ("queue", "q")),
    )
    assert samples[finished_key] == 5
    assert samples["trioqueue_handler_duration_seconds_count", (("queue", "q"),)] == 5
    # Sampled once, when serving began: before the pool claimed anything.
    assert samples["trioqueue_jobs", (("queue", "q"), ("status", "ready"))] == 5


async def test_serve_metrics_refuses_an_address_in_use() -> None:
    async with trioqueue.open_memory() as backend, serve_metrics(backend, port=0) as served:
        with pytest.raises(OSError):
            async with serve_metrics(backend, port=served.port):
                pass  # pragma: no cover


class BrokenObserver(trioqueue.PoolObserver):
    """Raises from every event, as an observer with a bug would."""

    def job_finished(self, queue: str, outcome: str) -> None:
        raise RuntimeError("job_finished is broken")

    def handler_finished(self, queue: str, seconds: float) -> None:
        raise RuntimeError("handler_finished is broken")

    def renewal_finished(self, seconds: float) -> None:
        raise RuntimeError("renewal_finished is broken")


async def test_an_observer_that_raises_never_stops_the_pool(
    autojump_clock: object, caplog: pytest.LogCaptureFixture
) -> None:
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        ids = [await backend.enqueue("q", {"sleep": 3}) for _ in range(3)]
        cfg = config(rec)
        await nursery.start(
            lambda **kw: trioqueue.run_worker_pool(backend, cfg, observer=BrokenObserver(), **kw)
        )
        for job_id in ids:  # several renewals and outcomes, each one a raise
            await rec.wait_for("succeeded", job_id)
        assert [(await backend.get_job(i)).status for i in ids] == ["succeeded"] * 3
        nursery.cancel_scope.cancel()
    logged = sorted(r.getMessage() for r in caplog.records if r.name == "trioqueue.observer")
    assert logged == [
        f"observer BrokenObserver.{name} raised; the pool goes on (later failures of this "
        "method are not logged)"
        for name in ("handler_finished", "job_finished", "renewal_finished")
    ]


# -- bounded series (issue 22, items 12 and 21) -------------------------------------------


Series = dict[str, dict[tuple[tuple[str, str], ...], float]]


def _series(registry: CollectorRegistry) -> Series:
    return _series_of(generate_latest(registry).decode())


def _series_of(exposition: str) -> Series:
    """Every sample by metric name, then by its sorted labels (``_created`` left out)."""
    found: Series = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if not sample.name.endswith("_created"):
                key = tuple(sorted(sample.labels.items()))
                found.setdefault(sample.name, {})[key] = sample.value
    return found


async def test_the_gauges_name_the_biggest_queues_and_sum_the_rest(
    autojump_clock: object,
) -> None:
    """Six series per queue, once unbounded (2,000 queues made 12,237 series): past
    ``max_queues`` the queues with fewest jobs share ``queue="_other"``."""
    gauges = DatabaseGauges(max_queues=2)
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        await backend.enqueue_many("big", [1, 2, 3])
        await backend.enqueue_many("mid", [1, 2])
        await backend.enqueue("small", 1)
        await backend.enqueue("later", 1, delay=60)
        await trio.sleep(7)  # "small" has waited 7 s, "later" waits for its delay
        await nursery.start(gauges.sample, backend)
        nursery.cancel_scope.cancel()
    series = _series(gauges.registry)
    jobs: dict[str, dict[str, float]] = {}
    for key, n in series["trioqueue_jobs"].items():
        labels = dict(key)
        jobs.setdefault(labels["queue"], {})[labels["status"]] = n
    assert {queue: counts["ready"] for queue, counts in jobs.items()} == {
        "big": 3,
        "mid": 2,
        "_other": 1,
    }
    assert jobs["_other"]["scheduled"] == 1
    ages = {dict(k)["queue"]: v for k, v in series["trioqueue_oldest_ready_age_seconds"].items()}
    assert ages == {"big": 7.0, "mid": 7.0, "_other": 7.0}
    assert sum(len(samples) for samples in series.values()) == 6 * 3 + 1


async def test_two_thousand_queues_make_at_most_the_bounded_series(
    autojump_clock: object,
) -> None:
    observer = PrometheusObserver()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        for n in range(2000):
            await backend.enqueue(f"q{n}", n)
        await nursery.start(observer.sample, backend)
        nursery.cancel_scope.cancel()
    series = _series(observer.registry)
    assert len(series["trioqueue_jobs"]) == 5 * (MAX_QUEUES + 1)
    assert len(series["trioqueue_oldest_ready_age_seconds"]) == MAX_QUEUES + 1
    assert sum(series["trioqueue_jobs"].values()) == 2000  # every job counted once


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, None])
def test_max_queues_must_be_a_positive_int(bad: object) -> None:
    with pytest.raises(ValueError, match="max_queues must be an int of at least 1"):
        DatabaseGauges(max_queues=bad)  # type: ignore[arg-type]


async def test_the_dashboards_metrics_serve_only_the_database_gauges(
    backend: trioqueue.MemoryBackend,
) -> None:
    """Its worker counters were always zero there: the dashboard runs no pool."""
    await backend.enqueue("mail", 1)
    async with client(create_app(backend)) as c:
        r = await c.get("/metrics")
    assert r.status_code == 200
    series = _series_of(r.text)
    assert set(series) == {
        "trioqueue_jobs",
        "trioqueue_oldest_ready_age_seconds",
        "trioqueue_connections_in_use",
    }
    assert series["trioqueue_jobs"][(("queue", "mail"), ("status", "ready"))] == 1


async def test_serve_metrics_bounds_the_queues_it_names() -> None:
    async with trioqueue.open_memory() as backend:
        for queue in ("a", "b", "b", "c"):
            await backend.enqueue(queue, 1)
        async with serve_metrics(backend, port=0, max_queues=1) as served:
            page = await trio.to_thread.run_sync(_scrape, f"http://127.0.0.1:{served.port}/metrics")
    queues = {dict(k)["queue"] for k in _series_of(page)["trioqueue_oldest_ready_age_seconds"]}
    assert queues == {"b", "_other"}
