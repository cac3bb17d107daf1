"""The seam between trioqueue and OpenTelemetry (docs/telemetry.rst).

Everything OpenTelemetry-specific lives in :mod:`trioqueue._otel`, which imports the
``opentelemetry`` API at its top; this module imports nothing of it. The first call that
could use it looks, once, whether the API is installed (``importlib.util.find_spec``, which
imports nothing), and only then imports :mod:`trioqueue._otel`. Without the ``otel`` extra
nothing of OpenTelemetry is ever imported, and each call costs one check of a module
global; a pool without it asks once, when it starts, and then holds None.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from trioqueue._otel import AttemptTracer

__all__ = ["attempt_tracer", "available", "enqueue_context"]

log = logging.getLogger("trioqueue.telemetry")

#: Not looked for yet (the module global below holds this until the first look).
_UNKNOWN: Final = object()
_otel: ModuleType | object | None = _UNKNOWN


def enqueue_context() -> Mapping[str, str] | None:
    """The trace context active now, to store with a job being enqueued (W3C
    ``traceparent``/``tracestate`` keys); None when OpenTelemetry is not installed or no
    span is active. Never raises: tracing must not refuse an enqueue."""
    otel = _implementation()
    if otel is None:
        return None
    try:
        context: Mapping[str, str] | None = otel.enqueue_context()
    except Exception:  # a broken propagator or SDK: the job goes in without a context
        log.exception("reading the trace context to store with an enqueued job failed")
        return None
    return context


def attempt_tracer(worker_id: str, queue: str, now: float) -> AttemptTracer | None:
    """What a worker pool traces its attempts with (one per pool, made when it starts,
    ``now`` its clock's reading then); None without OpenTelemetry, and then the pool
    spends nothing on tracing."""
    otel = _implementation()
    if otel is None:
        return None
    tracer: AttemptTracer = otel.AttemptTracer(worker_id, queue, now)
    return tracer


def available() -> bool:
    """Whether the OpenTelemetry API is installed (looked for once)."""
    return _implementation() is not None


def _implementation() -> ModuleType | None:
    global _otel
    if _otel is _UNKNOWN:
        _otel = _load()
    assert _otel is None or isinstance(_otel, ModuleType)
    return _otel


def _load() -> ModuleType | None:
    try:
        if importlib.util.find_spec("opentelemetry") is None:
            return None
        from trioqueue import _otel as otel
    except ImportError:  # absent, or blocked by an import hook: as good as not installed
        return None
    except ValueError:  # find_spec of a module half imported: treat as absent
        return None
    return otel
