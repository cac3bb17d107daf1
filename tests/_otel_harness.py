"""Helpers for tests that export trioqueue's spans to the OpenTelemetry SDK's memory."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

__all__ = ["exporter", "global_provider"]


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    """A tracer provider of the SDK's, exporting to memory, installed as the global one
    for the test and taken away after it (as OpenTelemetry's own tests do)."""
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    with global_provider(provider):
        yield spans


class global_provider:
    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider

    def __enter__(self) -> None:
        trace._TRACER_PROVIDER_SET_ONCE = Once()
        trace._TRACER_PROVIDER = None
        trace.set_tracer_provider(self.provider)

    def __exit__(self, *exc: object) -> None:
        self.provider.shutdown()
        trace._TRACER_PROVIDER_SET_ONCE = Once()
        trace._TRACER_PROVIDER = None
