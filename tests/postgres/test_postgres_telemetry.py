"""A handler that raises, run by a pool on PostgreSQL, as an operator would look for it
(issue's "done when"): its traceback in the attempt's row, in the JSON log and in the
attempt's span, which is linked to the span that enqueued the job (docs/telemetry.rst,
docs/usage.rst "One line per attempt", docs/protocol.rst §14)."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pytest
import trio
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import trioqueue
from tests._otel_harness import exporter as exporter  # a fixture
from trioqueue._backends.postgres import PostgresBackend
from trioqueue.cli._terminal import JsonLogFormatter, library_logs_to

pytestmark = pytest.mark.postgres


class ReportFailed(Exception):
    pass


def raise_report_failed(why: str) -> None:
    raise ReportFailed(why)


async def test_a_failed_attempts_traceback_is_in_its_row_its_log_line_and_its_span(
    backend: PostgresBackend, exporter: InMemorySpanExporter
) -> None:
    async def handler(payload: Any, ctx: trioqueue.JobContext) -> None:
        if ctx.attempt == 1:
            raise_report_failed("disk full")

    config = trioqueue.WorkerConfig(
        handler=handler, queue="pg", backoff=lambda attempt: 0.1, max_job_duration=30
    )
    out = io.StringIO()
    log_handler = logging.StreamHandler(out)
    log_handler.setFormatter(JsonLogFormatter())
    with library_logs_to(log_handler, verbose=True):
        with trace.get_tracer("the application").start_as_current_span("request") as request:
            job_id = await backend.enqueue("pg", None, max_attempts=2)
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            info = await backend.wait_for(job_id, timeout=30)
            nursery.cancel_scope.cancel()
    assert info.status == "succeeded"

    failed, succeeded = await backend.list_attempts(job_id)
    assert (failed.outcome, succeeded.outcome) == ("retry", "succeeded")
    assert failed.error_type == f"{__name__}.ReportFailed"
    assert "in raise_report_failed\n" in (failed.traceback or "")
    assert failed.run_seconds is not None and failed.started_at is not None

    [retry_line] = [
        json.loads(line)
        for line in out.getvalue().splitlines()
        if '"event": "retry"' in line and f'"job_id": {job_id}' in line
    ]
    assert retry_line["exception"].endswith(f"{__name__}.ReportFailed: disk full")

    spans = exporter.get_finished_spans()
    attempts = [s for s in spans if s.name == "process pg"]
    assert sorted(str((s.attributes or {})["trioqueue.attempt.outcome"]) for s in attempts) == [
        "retry",
        "succeeded",
    ]
    enqueue_id = request.get_span_context().span_id
    assert all([link.context.span_id for link in s.links] == [enqueue_id] for s in attempts)
    events = [e for s in spans if s.name == "trioqueue handler" for e in s.events]
    [event] = events
    assert "in raise_report_failed\n" in str((event.attributes or {})["exception.stacktrace"])
