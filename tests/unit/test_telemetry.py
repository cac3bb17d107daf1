"""OpenTelemetry tracing (docs/telemetry.rst): the context active at enqueue is stored with
the job, and each attempt runs in a span linked to it, with spans for its claim, handler and
outcome write. Whole pools on the memory backend under trio's MockClock, spans exported to
the SDK's in-memory exporter; and a process without OpenTelemetry imports none of it."""

from __future__ import annotations

import importlib.util
import logging
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

import pytest
import trio
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

import trioqueue
from tests._otel_harness import exporter as exporter  # a fixture
from tests._otel_harness import global_provider
from tests._pool_harness import Recorder, config
from trioqueue import JobContext
from trioqueue._telemetry import enqueue_context


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def children(spans: Sequence[ReadableSpan], parent: ReadableSpan) -> dict[str, ReadableSpan]:
    assert parent.context is not None
    return {
        s.name: s
        for s in spans
        if s.parent is not None and s.parent.span_id == parent.context.span_id
    }


def attribute(span: ReadableSpan, name: str) -> int:
    value = (span.attributes or {})[name]
    assert isinstance(value, int)
    return value


def traceparent(ids: trace.SpanContext) -> str:
    return f"00-{ids.trace_id:032x}-{ids.span_id:016x}-{int(ids.trace_flags):02x}"


def seconds(span: ReadableSpan) -> float:
    assert span.start_time is not None and span.end_time is not None
    return (span.end_time - span.start_time) / 1e9


async def run_jobs(
    cfg: trioqueue.WorkerConfig, payloads: list[Any], *, max_attempts: int = 1
) -> list[trioqueue.JobInfo]:
    """Enqueue ``payloads``, each inside a span of its own named ``enqueue <n>``, and run
    the pool until each has finished."""
    tracer = trace.get_tracer("the application")
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        ids = []
        for n, payload in enumerate(payloads):
            with tracer.start_as_current_span(f"enqueue {n}"):
                ids.append(await backend.enqueue(cfg.queue, payload, max_attempts=max_attempts))
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        infos = [await backend.wait_for(i) for i in ids]
        nursery.cancel_scope.cancel()
    return infos


def test_the_context_at_enqueue_is_the_active_spans_as_w3c_traceparent(
    exporter: InMemorySpanExporter,
) -> None:
    assert enqueue_context() is None  # no span active
    with trace.get_tracer("t").start_as_current_span("request") as span:
        context = enqueue_context()
    ids = span.get_span_context()
    assert context == {"traceparent": traceparent(ids)}


async def test_an_attempt_is_a_span_linked_to_its_enqueue_with_claim_handler_and_write(
    exporter: InMemorySpanExporter, autojump_clock: object
) -> None:
    stored: list[Any] = []

    async def hook(job: trioqueue.Job) -> None:
        stored.append(job.trace_context)
        await trio.sleep(1)  # the claim hook: between the claim and the handler

    async def handler(payload: Any, ctx: JobContext) -> None:
        with trace.get_tracer("the application").start_as_current_span("inside"):
            await trio.sleep(3)

    [info] = await run_jobs(config(Recorder(), handler=handler, on_job_claimed=hook), [None])
    spans = exporter.get_finished_spans()
    [enqueue] = named(spans, "enqueue 0")
    [attempt] = named(spans, "process q")
    assert enqueue.context is not None and attempt.context is not None
    assert stored == [{"traceparent": traceparent(enqueue.context)}]
    assert attempt.parent is None  # a trace of its own, linked to the one that enqueued
    assert [link.context.span_id for link in attempt.links] == [enqueue.context.span_id]
    assert attempt.kind is trace.SpanKind.CONSUMER
    assert dict(attempt.attributes or {}) | {"trioqueue.worker.id": "w"} == {
        "messaging.system": "trioqueue",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": "q",
        "messaging.message.id": str(info.id),
        "trioqueue.job.id": info.id,
        "trioqueue.job.attempt": 1,
        "trioqueue.job.max_attempts": 1,
        "trioqueue.job.claim_seq": 1,
        "trioqueue.job.waited_seconds": pytest.approx(0, abs=1),
        "trioqueue.worker.id": "w",
        "trioqueue.attempt.outcome": "succeeded",
    }
    assert attempt.status.status_code is trace.StatusCode.UNSET
    parts = children(spans, attempt)
    assert set(parts) == {"trioqueue claim", "trioqueue handler", "trioqueue write"}
    claim, handler_span, write = (parts[n] for n in sorted(parts))
    assert (claim.kind, handler_span.kind, write.kind) == (
        trace.SpanKind.CLIENT,
        trace.SpanKind.INTERNAL,
        trace.SpanKind.CLIENT,
    )
    assert (claim.attributes or {})["messaging.batch.message_count"] == 1
    assert (write.attributes or {})["trioqueue.attempt.outcome"] == "succeeded"
    # In order, on trio's clock: claim, the hook's second, the handler's three, the write.
    assert claim.start_time == attempt.start_time
    assert handler_span.start_time is not None and claim.end_time is not None
    assert (handler_span.start_time - claim.end_time) / 1e9 == pytest.approx(1, abs=1e-3)
    assert seconds(handler_span) == pytest.approx(3, abs=1e-3)
    assert write.start_time == handler_span.end_time and write.end_time == attempt.end_time
    # The handler's own span is the handler span's child.
    [inside] = named(spans, "inside")
    assert list(children(spans, handler_span)) == ["inside"]
    assert inside.context is not None and inside.context.trace_id == attempt.context.trace_id


async def test_a_failed_attempts_spans_carry_its_exception_and_outcome(
    exporter: InMemorySpanExporter, autojump_clock: object
) -> None:
    async def handler(payload: Any, ctx: JobContext) -> None:
        raise ValueError(f"attempt {ctx.attempt}")

    cfg = config(Recorder(), handler=handler, backoff=lambda attempt: 1.0)
    [info] = await run_jobs(cfg, [None], max_attempts=2)
    assert info.status == "failed"
    spans = exporter.get_finished_spans()
    attempts = sorted(
        named(spans, "process q"), key=lambda s: attribute(s, "trioqueue.job.attempt")
    )
    assert [(s.attributes or {})["trioqueue.attempt.outcome"] for s in attempts] == [
        "retry",
        "failed",
    ]
    for number, attempt in enumerate(attempts, start=1):
        assert attempt.status.status_code is trace.StatusCode.ERROR
        assert attempt.status.description == f"ValueError: attempt {number}"
        handler_span = children(spans, attempt)["trioqueue handler"]
        assert handler_span.status.status_code is trace.StatusCode.ERROR
        [event] = handler_span.events
        attributes = dict(event.attributes or {})
        assert event.name == "exception"
        assert attributes["exception.type"] == "ValueError"
        assert attributes["exception.message"] == f"ValueError: attempt {number}"
        stacktrace = str(attributes["exception.stacktrace"])
        assert stacktrace.startswith("Traceback (most recent call last):\n")
        assert stacktrace.endswith(f"ValueError: attempt {number}\n")


async def test_a_sync_handlers_spans_are_children_of_its_handler_span(
    exporter: InMemorySpanExporter, autojump_clock: object
) -> None:
    def handler(payload: Any, ctx: JobContext) -> None:
        with trace.get_tracer("the application").start_as_current_span("in a thread"):
            pass

    cfg = config(Recorder(), handler=handler)
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        job_id = await backend.enqueue("q", None)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await backend.wait_for(job_id)  # no timeout: the autojump clock runs on meanwhile
        nursery.cancel_scope.cancel()
    spans = exporter.get_finished_spans()
    [attempt] = named(spans, "process q")
    assert list(children(spans, children(spans, attempt)["trioqueue handler"])) == ["in a thread"]


async def test_each_job_of_a_batch_has_its_attempt_span(
    exporter: InMemorySpanExporter, autojump_clock: object
) -> None:
    async def handler(payload: Any, ctx: JobContext) -> None:
        await trio.sleep(payload)

    cfg = config(Recorder(), handler=handler, batch_size=3)
    infos = await run_jobs(cfg, [1, 2, 3])
    spans = exporter.get_finished_spans()
    attempts = named(spans, "process q")
    assert sorted(attribute(s, "trioqueue.job.id") for s in attempts) == [i.id for i in infos]
    for attempt in attempts:
        parts = children(spans, attempt)
        assert (parts["trioqueue claim"].attributes or {})["messaging.batch.message_count"] == 3
        payload = next(i.payload for i in infos if i.id == attribute(attempt, "trioqueue.job.id"))
        assert seconds(parts["trioqueue handler"]) == pytest.approx(payload, abs=1e-3)


async def test_each_job_of_a_batch_handlers_call_has_its_attempt_span(
    exporter: InMemorySpanExporter, autojump_clock: object
) -> None:
    """Batch mode (docs/protocol.rst §20): one call, a span per job, the call's time as each
    job's handler span; a failed job's span carries its outcome."""

    async def handle_batch(jobs: Sequence[trioqueue.Job], ctx: trioqueue.BatchContext) -> Any:
        await trio.sleep(2)
        return [trioqueue.JobSucceeded(), trioqueue.JobFailed(ValueError("no"))]

    cfg = config(Recorder(), handler=None, batch_handler=handle_batch, batch_size=2)
    infos = await run_jobs(cfg, [1, 2])
    spans = exporter.get_finished_spans()
    attempts = named(spans, "process q")
    assert sorted(attribute(s, "trioqueue.job.id") for s in attempts) == [i.id for i in infos]
    for attempt in attempts:
        parts = children(spans, attempt)
        assert (parts["trioqueue claim"].attributes or {})["messaging.batch.message_count"] == 2
        assert seconds(parts["trioqueue handler"]) == pytest.approx(2, abs=1e-3)
    assert [i.status for i in infos] == ["succeeded", "failed"]


async def test_a_timeout_records_no_exception_and_a_release_says_released(
    exporter: InMemorySpanExporter, autojump_clock: object
) -> None:
    async def handler(payload: Any, ctx: JobContext) -> None:
        await trio.sleep(payload)

    cfg = config(Recorder(), handler=handler, max_job_duration=5, shutdown_grace=1)
    [info] = await run_jobs(cfg, [100])
    assert info.status == "failed"
    async with trioqueue.open_memory() as backend:
        await backend.enqueue("q", 100)
        with trio.move_on_after(2):
            await trioqueue.run_worker_pool(backend, cfg)
    spans = exporter.get_finished_spans()
    outcomes = [
        (s.attributes or {})["trioqueue.attempt.outcome"] for s in named(spans, "process q")
    ]
    assert outcomes == ["failed", "released"]
    timed_out, released = named(spans, "process q")
    assert children(spans, timed_out)["trioqueue handler"].events == ()
    assert released.status.status_code is trace.StatusCode.UNSET


async def test_an_attempt_that_is_not_sampled_has_no_spans(autojump_clock: object) -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(SimpleSpanProcessor(spans))
    with global_provider(provider):
        [info] = await run_jobs(config(Recorder()), [None])
    assert info.status == "succeeded"
    assert spans.get_finished_spans() == ()


async def test_without_a_provider_an_attempt_starts_no_span(
    autojump_clock: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the API installed but no SDK set as the provider (the default), the pool asks
    for no span at all: starting a non-recording one would cost each job for nothing."""
    from trioqueue import _otel

    started: list[str] = []
    real_start = trace.ProxyTracer.start_span

    def counting(self: trace.ProxyTracer, name: str, *args: Any, **kwargs: Any) -> trace.Span:
        started.append(name)
        return real_start(self, name, *args, **kwargs)

    monkeypatch.setattr(trace.ProxyTracer, "start_span", counting)
    with global_provider(TracerProvider()):
        pass  # leaves no provider set, whatever an earlier test set
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    tracer = _otel.AttemptTracer("w", "q", 0.0)
    [info] = await run_jobs(config(Recorder()), [None])
    assert info.status == "succeeded"
    assert started == []
    # the same tracer, once an SDK is the provider, records (the check is per attempt)
    with global_provider(TracerProvider()):
        job = trioqueue.Job(1, "q", None, 1, 1, 1)
        assert tracer.start(job, 0.0, 0.0, 1) is not None


class Broken(SpanProcessor):
    def on_start(self, span: Span, parent_context: Any = None) -> None:
        if span.name == "trioqueue handler":
            raise RuntimeError("a broken span processor")


async def test_a_broken_span_processor_does_not_stop_the_job(
    autojump_clock: object, caplog: pytest.LogCaptureFixture
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(Broken())
    with global_provider(provider), caplog.at_level(logging.ERROR, "trioqueue.telemetry"):
        infos = await run_jobs(config(Recorder()), [None, None])
    assert [i.status for i in infos] == ["succeeded", "succeeded"]
    failures = [r for r in caplog.records if r.name == "trioqueue.telemetry"]
    assert len(failures) == 1  # logged once per step, however many jobs
    assert all("handler_started" in r.getMessage() for r in failures)


BLOCKED = textwrap.dedent(
    """
    import sys

    class Block:
        # An import hook that makes opentelemetry look not installed.
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, Block())

    import trio
    import trioqueue
    from trioqueue import _telemetry

    async def handler(payload, ctx):
        await trio.sleep(0)

    async def main():
        async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
            ids = [await backend.enqueue("q", n) for n in range(20)]
            config = trioqueue.WorkerConfig(handler=handler, queue="q", concurrency=4)
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            infos = [await backend.wait_for(i) for i in ids]
            nursery.cancel_scope.cancel()
        assert all(i.status == "succeeded" for i in infos)
        assert _telemetry.enqueue_context() is None and not _telemetry.available()

    trio.run(main)
    loaded = sorted(
        m for m in sys.modules if m == "trioqueue._otel" or m.split(".")[0] == "opentelemetry"
    )
    print("loaded:", loaded)
    """
)


def test_without_opentelemetry_nothing_of_it_is_imported() -> None:
    """In a process where the API cannot be imported, running jobs imports none of it, nor
    the module that would use it."""
    result = subprocess.run(
        [sys.executable, "-c", BLOCKED], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "loaded: []"


async def test_the_seam_looks_for_opentelemetry_once(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: object
) -> None:
    """However many enqueues and pools: one look, then the answer is kept."""
    from trioqueue import _telemetry

    looks: list[str] = []

    def find_spec(name: str) -> None:
        looks.append(name)
        return None  # as if not installed

    monkeypatch.setattr(_telemetry, "_otel", _telemetry._UNKNOWN)
    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    infos = await run_jobs(config(Recorder(), concurrency=2), [None, None, None])
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        await backend.enqueue_many("q", [1, 2])
        await nursery.start(trioqueue.run_worker_pool, backend, config(Recorder()))
        nursery.cancel_scope.cancel()
    assert [i.status for i in infos] == ["succeeded"] * 3
    assert looks == ["opentelemetry"]
    assert enqueue_context() is None and not _telemetry.available()
