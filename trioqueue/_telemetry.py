"""The seam between trioqueue and OpenTelemetry (docs/telemetry.rst).

Everything OpenTelemetry-specific lives behind these functions, so that without the
``otel`` extra nothing of it is imported and each call costs one check.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["enqueue_context"]


def enqueue_context() -> Mapping[str, str] | None:
    """The trace context active now, to store with a job being enqueued (W3C
    ``traceparent``/``tracestate`` keys); None when OpenTelemetry is not installed or no
    span is active."""
    return None
