"""Tools for testing code that runs on trioqueue, and backends written for it.

- Fault constructors for the memory backend's ``backend.inject(op, fault)``: :func:`hang`,
  :func:`delay`, :func:`error` and :func:`omit`. They build plain, frozen descriptions; the
  backend carries them out while the faulty call holds its connection.
- :class:`BackendConformance`: the behaviour every backend must have, as a pytest test
  class to subclass. It needs pytest and pytest-trio, so it is imported on first use: the
  fault helpers work without them (in a demo, say).
- :func:`next_notice`: wait for a notice of one kind on a ``listen`` channel.
- :func:`run_handler` (and :func:`run_handler_sync`): run *your* handler on one job under
  a real worker pool on the memory backend, with scheduled faults (:func:`lose_lease`,
  :func:`cancel_job`, :func:`stuck_renewals`), and get back a :class:`HandlerRun` record
  to assert on (docs/howto/testing.rst).
- :mod:`trioqueue.testing.traces` (import it by name): record and replay the conformance
  traces of the lease protocol's core, for ports to other languages (docs/porting.rst).

docs/testing.rst shows each of them at work, in examples that the tests run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trioqueue._backends.memory.faults import (
    DelayFault,
    ErrorFault,
    Fault,
    HangFault,
    OmitFault,
    delay,
    error,
    hang,
    omit,
)
from trioqueue.testing._harness import (
    Attempt,
    CancelJob,
    HandlerRun,
    LoseLease,
    RecordingContext,
    RunEvent,
    Scenario,
    StuckRenewals,
    cancel_job,
    lose_lease,
    run_handler,
    run_handler_sync,
    stuck_renewals,
)
from trioqueue.testing._notices import next_notice

# The package re-exports private modules: ``_conformance/`` (the suite, a module per
# topic), ``_notices.py`` (``next_notice``, which the suite uses too), ``_harness.py``
# (``run_handler`` and its scenarios and records); the faults live beside the memory
# backend that carries them out (``trioqueue._backends.memory.faults``).

if TYPE_CHECKING:
    from trioqueue.testing._conformance import BackendConformance

__all__ = [
    "Attempt",
    "BackendConformance",
    "CancelJob",
    "DelayFault",
    "ErrorFault",
    "Fault",
    "HandlerRun",
    "HangFault",
    "LoseLease",
    "OmitFault",
    "RecordingContext",
    "RunEvent",
    "Scenario",
    "StuckRenewals",
    "cancel_job",
    "delay",
    "error",
    "hang",
    "lose_lease",
    "next_notice",
    "omit",
    "run_handler",
    "run_handler_sync",
    "stuck_renewals",
]


def __getattr__(name: str) -> Any:
    # BackendConformance imports pytest: load it only when someone asks for it.
    if name == "BackendConformance":
        from trioqueue.testing._conformance import BackendConformance

        return BackendConformance
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
