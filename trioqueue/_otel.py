"""OpenTelemetry tracing of enqueues and attempts (docs/telemetry.rst); imported only by
:mod:`trioqueue._telemetry`, and only when the ``opentelemetry`` API is installed.

The spans of one attempt::

    process <queue>          CONSUMER  claim sent .. outcome settled; linked to the enqueue
    ├── trioqueue claim      CLIENT    claim sent .. its answer (the batch's registration)
    ├── trioqueue handler    INTERNAL  the handler's run, current while it runs
    └── trioqueue write      CLIENT    outcome decided .. written (or given up)

The attempt's span is started when its task starts, current in that task (so a span of a
claim hook or of the backend nests under it), and its start is set back to when the claim
was sent. The handler's span is current while the handler runs, so a span the handler
opens is its child (trio copies the context into a sync handler's thread). The claim's and
the write's spans are made after the fact with their own times: they cover a shared
statement (a claim or a write of several jobs), and the attempt's task does not run them.

Times: the runtime reads trio's clock; each tracer maps those readings to wall time from
one pair of readings taken when its pool started, so the spans of one attempt keep the
durations the runtime measured (under trio's MockClock too).

An attempt span that does not record (no SDK installed, or a sampler said no) gets no
children and is not made current: the attempt costs that one span.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from contextvars import Token
from importlib import metadata
from typing import Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from trioqueue._types import Job

__all__ = ["AttemptTrace", "AttemptTracer", "enqueue_context"]

log = logging.getLogger("trioqueue.telemetry")

#: The W3C format only, whatever propagators the application set: a stored context is
#: read by workers of other processes and versions, so its form is fixed.
_W3C: Final = TraceContextTextMapPropagator()
#: Outcomes whose attempt span says ERROR (the attempts table's words, docs/protocol.rst
#: §14): the job's attempt failed, or its lease was lost.
_ERRORS: Final = frozenset({"retry", "failed", "lost"})
_EMPTY: Final = Context()


def enqueue_context() -> Mapping[str, str] | None:
    """The active span's context as W3C ``traceparent`` (and ``tracestate``), or None."""
    carrier: dict[str, str] = {}
    _W3C.inject(carrier)
    return carrier or None


def _link_to(stored: Mapping[str, str] | None) -> list[trace.Link]:
    """A link to the span that enqueued the job, when its context was stored."""
    if not stored:
        return []
    span_context = trace.get_current_span(_W3C.extract(stored)).get_span_context()
    return [trace.Link(span_context)] if span_context.is_valid else []


def _version() -> str | None:
    """trioqueue's version as installed, for the tracer's scope; None when run uninstalled."""
    try:
        return metadata.version("trioqueue")
    except metadata.PackageNotFoundError:
        return None


class AttemptTracer:
    """Starts the spans of one pool's attempts."""

    def __init__(self, worker_id: str, queue: str, now: float) -> None:
        self._tracer = trace.get_tracer("trioqueue", _version())
        self._worker_id = worker_id
        self._queue = queue
        self._wall_ns = time.time_ns()
        self._clock = now

    def ns(self, at: float) -> int:
        """A reading of the pool's clock as wall time in nanoseconds."""
        return self._wall_ns + round((at - self._clock) * 1e9)

    def start(
        self, job: Job, claim_sent: float, registered_at: float, batch_size: int
    ) -> AttemptTrace | None:
        """The attempt's span, started and made current in the calling task; None when it
        does not record, or when starting it raised (logged: an SDK's fault must not stop
        the job)."""
        if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            # No SDK installed as the provider (yet): every span would be a non-recording
            # one. Saying so costs one check, where starting one costs its attributes, its
            # link and the span: about a fifth of a drained job at batch 50 (docs/telemetry.rst).
            return None
        return self._started(job, claim_sent, registered_at, batch_size)

    def start_all(
        self, jobs: Sequence[Job], claim_sent: float, registered_at: float
    ) -> list[AttemptTrace | None]:
        """The spans of a batch's attempts, as :meth:`start` for each job, with one look at
        the provider for the whole batch (a batch handler's, docs/protocol.rst §20)."""
        if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            return [None] * len(jobs)
        return [self._started(job, claim_sent, registered_at, len(jobs)) for job in jobs]

    def _started(
        self, job: Job, claim_sent: float, registered_at: float, batch_size: int
    ) -> AttemptTrace | None:
        try:
            return self._start(job, claim_sent, registered_at, batch_size)
        except Exception:
            _failed("start")
            return None

    def _start(
        self, job: Job, claim_sent: float, registered_at: float, batch_size: int
    ) -> AttemptTrace | None:
        span = self._tracer.start_span(
            f"process {job.queue}",
            context=_EMPTY,  # a root: the pool's own context is no parent of the job's
            kind=trace.SpanKind.CONSUMER,
            attributes=self._attributes(job),
            links=_link_to(job.trace_context),
            start_time=self.ns(claim_sent),
        )
        if not span.is_recording():
            return None
        attempt = AttemptTrace(self, span)
        claim = self._tracer.start_span(
            "trioqueue claim",
            context=attempt.context,
            kind=trace.SpanKind.CLIENT,
            attributes={
                "messaging.system": "trioqueue",
                "messaging.operation.type": "receive",
                "messaging.destination.name": job.queue,
                "messaging.batch.message_count": batch_size,
            },
            start_time=self.ns(claim_sent),
        )
        claim.end(end_time=self.ns(registered_at))
        return attempt

    def _attributes(self, job: Job) -> dict[str, str | int | float]:
        attributes: dict[str, str | int | float] = {
            "messaging.system": "trioqueue",
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.destination.name": job.queue,
            "messaging.message.id": str(job.id),
            "trioqueue.job.id": job.id,
            "trioqueue.job.attempt": job.attempt,
            "trioqueue.job.max_attempts": job.max_attempts,
            "trioqueue.job.claim_seq": job.claim_seq,
            "trioqueue.worker.id": self._worker_id,
        }
        if job.waited is not None:
            attributes["trioqueue.job.waited_seconds"] = job.waited
        return attributes


class AttemptTrace:
    """The spans of one attempt in flight; the runtime tells it what happens, in order:
    :meth:`handler_started` (if the handler starts), :meth:`work_ended`, :meth:`leave`
    (in the attempt's task), :meth:`finish` (once its outcome is settled)."""

    __slots__ = (
        "_attempt_token",
        "_decided_at",
        "_handler",
        "_handler_token",
        "_tracer",
        "context",
        "span",
    )

    def __init__(self, tracer: AttemptTracer, span: trace.Span) -> None:
        self._tracer = tracer
        self.span = span
        self.context = trace.set_span_in_context(span, _EMPTY)
        self._attempt_token: Token[Context] | None = otel_context.attach(self.context)
        self._handler: trace.Span | None = None
        self._handler_token: Token[Context] | None = None
        self._decided_at: float | None = None

    def handler_started(self, at: float) -> None:
        """The handler starts now (``at``): its span, current until its work ends."""
        try:
            self._start_handler(at)
        except Exception:
            _failed("handler_started")

    def _start_handler(self, at: float) -> None:
        self._handler = handler = self._tracer._tracer.start_span(
            "trioqueue handler",
            context=self.context,
            kind=trace.SpanKind.INTERNAL,
            start_time=self._tracer.ns(at),
        )
        self._handler_token = otel_context.attach(trace.set_span_in_context(handler))

    def work_ended(
        self, at: float, error_type: str | None, error: str | None, traceback: str | None
    ) -> None:
        """The claim hook and handler have exited at ``at``; the exception the attempt's
        failure is, if it is one (recorded on the handler's span, or on the attempt's
        when the handler never started)."""
        try:
            self._end_work(at, error_type, error, traceback)
        except Exception:
            _failed("work_ended")

    def _end_work(
        self, at: float, error_type: str | None, error: str | None, traceback: str | None
    ) -> None:
        self._decided_at = at
        self._restore_attempt_context()
        target = self._handler if self._handler is not None else self.span
        if error_type is not None:
            target.add_event(
                "exception",
                {
                    "exception.type": error_type,
                    "exception.message": error or "",
                    "exception.stacktrace": traceback or "",
                },
                timestamp=self._tracer.ns(at),
            )
            target.set_status(trace.StatusCode.ERROR, error)
        if self._handler is not None:
            self._handler.end(end_time=self._tracer.ns(at))

    def leave(self) -> None:
        """The attempt's task is done with it: its context is no longer current there."""
        try:
            self._leave()
        except Exception:
            _failed("leave")

    def _leave(self) -> None:
        self._restore_attempt_context()
        if self._attempt_token is not None:
            otel_context.detach(self._attempt_token)
            self._attempt_token = None

    def finish(self, outcome: str, message: str | None, at: float) -> None:
        """The outcome (the attempts table's word for it) is written or given up at
        ``at``: the write's span, then the attempt's, end."""
        try:
            self._finish(outcome, message, at)
        except Exception:
            _failed("finish")

    def _finish(self, outcome: str, message: str | None, at: float) -> None:
        tracer, span = self._tracer, self.span
        decided = self._decided_at if self._decided_at is not None else at
        write = tracer._tracer.start_span(
            "trioqueue write",
            context=self.context,
            kind=trace.SpanKind.CLIENT,
            attributes={"trioqueue.attempt.outcome": outcome},
            start_time=tracer.ns(decided),
        )
        write.end(end_time=tracer.ns(at))
        span.set_attribute("trioqueue.attempt.outcome", outcome)
        if outcome in _ERRORS:
            span.set_status(trace.StatusCode.ERROR, message)
        span.end(end_time=tracer.ns(at))

    def _restore_attempt_context(self) -> None:
        if self._handler_token is not None:
            otel_context.detach(self._handler_token)
            self._handler_token = None


def _failed(step: str) -> None:
    """A span call raised (a span processor's or exporter's bug): logged with its
    traceback the first time of each step, so that a broken SDK cannot flood the log."""
    if step not in _FAILED:
        _FAILED.add(step)
        log.exception("tracing an attempt failed (%s); the job goes on untraced there", step)


_FAILED: set[str] = set()
