"""The backend conformance suite (public as ``trioqueue.testing.BackendConformance``).

Every backend runs these same tests, which is what lets the worker runtime treat all
backends alike and lets a differential test compare two of them. The tests are split by
topic, one module and one class each, and :class:`BackendConformance` combines them:

- ``enqueue.py``: enqueueing and reading a job back (payloads, options, dedup keys);
- ``claim.py``: claim order, limits, attempts and ``claim_seq``, leases, dead-lettering;
- ``renew.py``: renewals, their verdicts and fencing, progress, bad lease lengths;
- ``outcomes.py``: ack, fail and release, fenced by ``claim_seq``;
- ``cancel.py``: cancelling jobs in every state;
- ``operator.py``: ``list_jobs``, ``counts`` and ``retry``;
- ``results.py``: results stored by the fenced ack, and ``wait_for``;
- ``schedules.py``: schedules, their validation, and the scheduling pass (``enqueue_due``);
- ``flow.py``: flow control: pausing a queue, its limits (``max_running``,
  ``max_per_second``) and job groups;
- ``notices.py``: notices and statement statistics;
- ``crashes.py``: attempts that end without an outcome (a worker that died): the claim's
  record of them, quarantine (a job run alone) and parking;
- ``attempts.py``: the attempts table (one fenced row per attempt, lost attempts, timings)
  and cancellations told apart from failures (docs/protocol.rst §14, I15);
- ``controls.py``: the operator's controls: bulk retry and delete in batches, schedules
  enabled, disabled and run now, the audit log, table health;
- ``retention.py``: retention policies, bounded prune batches fenced by the maintainer
  lease, and the lease's claim, renewal and release (docs/protocol.rst §15, I16, I17);
- ``duplicates.py``: what a held dedup key does under each ``on_duplicate`` policy (keep,
  replace, debounce), a running holder left alone (docs/protocol.rst §18, I20);
- ``dead_letters.py``: dead letters, their filters, pages and bounded summary, and their
  redrive in batches (docs/protocol.rst §19, I21);
- ``checkpoints.py``: checkpoints stored by the fenced renewal and outcome writes, kept
  by the claim and delivered with it (docs/protocol.rst §16, I18);
- ``snoozes.py``: snoozes, fenced and uncharged, counted on the row, run after their
  delay, bounded by ``max_snoozes`` (docs/protocol.rst §17, I19);
- ``dependencies.py``: jobs enqueued with ``depends_on`` wait for their dependencies'
  success and fail by policy when one fails for good (docs/protocol.rst §21, I23, I24);
- ``trees.py``: children enqueued under a parent, and a tree's reads (docs/protocol.rst
  §22, as far as this build goes);
- ``dashboard.py``: searching, sorting, counting and deleting jobs, a job's lease details,
  worker pools and their beats, finished-job history;
- ``_base.py``: what they share (the clock fixture, the timings, helpers, bad inputs).
"""

from __future__ import annotations

from trioqueue.testing._conformance.attempts import AttemptConformance
from trioqueue.testing._conformance.cancel import CancelConformance
from trioqueue.testing._conformance.checkpoints import CheckpointConformance
from trioqueue.testing._conformance.claim import ClaimConformance
from trioqueue.testing._conformance.controls import ControlsConformance
from trioqueue.testing._conformance.crashes import CrashConformance
from trioqueue.testing._conformance.dashboard import DashboardConformance
from trioqueue.testing._conformance.dead_letters import DeadLetterConformance
from trioqueue.testing._conformance.dependencies import DependencyConformance
from trioqueue.testing._conformance.duplicates import DuplicateConformance
from trioqueue.testing._conformance.enqueue import EnqueueConformance
from trioqueue.testing._conformance.flow import FlowConformance
from trioqueue.testing._conformance.notices import NoticeConformance
from trioqueue.testing._conformance.operator import OperatorConformance
from trioqueue.testing._conformance.outcomes import OutcomeConformance
from trioqueue.testing._conformance.renew import RenewConformance
from trioqueue.testing._conformance.results import ResultConformance
from trioqueue.testing._conformance.retention import RetentionConformance
from trioqueue.testing._conformance.schedules import ScheduleConformance
from trioqueue.testing._conformance.snoozes import SnoozeConformance
from trioqueue.testing._conformance.trees import ChildWaitConformance, TreeConformance

__all__ = ["BackendConformance"]


class BackendConformance(
    EnqueueConformance,
    ClaimConformance,
    RenewConformance,
    OutcomeConformance,
    CancelConformance,
    OperatorConformance,
    ResultConformance,
    ScheduleConformance,
    FlowConformance,
    NoticeConformance,
    DashboardConformance,
    CrashConformance,
    AttemptConformance,
    ControlsConformance,
    RetentionConformance,
    DuplicateConformance,
    DeadLetterConformance,
    CheckpointConformance,
    SnoozeConformance,
    DependencyConformance,
    TreeConformance,
    ChildWaitConformance,
):
    """What every backend must do, as tests. Subclass it in a test module::

        class TestMemoryConformance(BackendConformance):
            @pytest.fixture
            async def backend(self):
                async with trioqueue.open_memory() as backend:
                    yield backend

            @pytest.fixture
            def clock(self):
                return trio.testing.MockClock(autojump_threshold=0)

    The ``backend`` fixture must yield an open, migrated, empty backend. Override ``clock``
    to run the tests on a fake clock (only for a backend whose times come from trio). The
    class attributes ``short_timeout``, ``slack``, ``long_timeout`` and ``notice_timeout``
    tune the timings to a backend's clock resolution. The schedule tests let ticks pass by
    moving a schedule's next run back on PostgreSQL and by sleeping otherwise; a new
    backend on a real clock overrides ``_pass_next_tick`` (see ``schedules.py``) so that
    they need not wait for minutes.
    """
