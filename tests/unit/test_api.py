"""The public API is a contract (docs/api.rst): these names must stay importable."""

from __future__ import annotations

import dataclasses

import trioqueue
import trioqueue.testing

PUBLIC = {
    "AttemptBucket",  # attempt history (docs/api.rst, "Operators' queries")
    "AttemptInfo",
    "AttemptOutcome",
    "MAX_TRACEBACK_CHARS",
    "QueueTimings",
    "AuditEntry",
    "BackendError",
    "BackendStatistics",
    "ConfigError",
    "ExponentialBackoff",
    "FinishedBucket",
    "Job",
    "JobContext",
    "JobCount",  # big tables (docs/api.rst, "Paging through jobs")
    "JobInfo",
    "JobSort",
    "JobStatus",
    "MemoryBackend",
    "PoolObserver",
    "PostgresBackend",
    "QueueStats",
    "ScheduleInfo",
    "TableHealth",
    "MaintainerInfo",
    "PruneBatch",
    "RetentionPreview",  # prune --dry-run (docs/api.rst, "Retention")
    "Retention",
    "RetentionPolicy",
    "TableSize",
    "TrioqueueError",
    "TruncatedText",
    "UndecodablePayload",
    "UnknownJobError",
    "Verdict",
    "WorkerConfig",
    "WorkerInfo",
    "BatchContext",  # batch handlers (docs/api.rst, "Batch handlers")
    "JobSucceeded",
    "JobFailed",
    "JobRetry",
    "open_memory",
    "open_postgres",
    "run_worker_pool",
    "run_workers",
    "transactional_worker_config",
    "job_cursor",
    "Enqueued",  # on_duplicate (docs/api.rst, docs/protocol.rst §18)
    "EnqueueOutcome",
    "OnDuplicate",
    "DeadLetter",  # dead letters (docs/api.rst, docs/protocol.rst §19)
    "DeadLetterSummary",
    "Snooze",  # snoozes (docs/api.rst, docs/protocol.rst §17)
    "DependencyInfo",  # dependencies (docs/api.rst, docs/protocol.rst §21)
    "JobDependencies",
    "OnDependencyFailure",
    "UnknownDependencyError",
}


def test_exports_are_pinned() -> None:
    assert set(trioqueue.__all__) == PUBLIC
    for name in PUBLIC:
        assert getattr(trioqueue, name) is not None


def test_testing_exports_the_fault_helpers_and_the_suite() -> None:
    for name in ("hang", "delay", "error", "omit", "BackendConformance"):
        assert name in trioqueue.testing.__all__


def test_testing_exports_the_handler_harness() -> None:
    """docs/howto/testing.rst: run_handler, its scenarios and its records."""
    harness = {
        "run_handler", "run_handler_sync", "lose_lease", "cancel_job", "stuck_renewals",
        "HandlerRun", "Attempt", "RunEvent", "RecordingContext",
        "LoseLease", "CancelJob", "StuckRenewals", "Scenario",
    }  # fmt: skip
    assert harness <= set(trioqueue.testing.__all__)
    for name in harness:
        assert getattr(trioqueue.testing, name) is not None


def test_worker_config_defaults_match_the_seed() -> None:
    config = trioqueue.WorkerConfig(handler=print)
    assert dataclasses.is_dataclass(config)
    assert (config.visibility_timeout, config.heartbeat_interval) == (60, 30)
    assert config.max_job_duration is None
    assert (config.queue, config.concurrency, config.batch_size) == ("default", 1, 1)
    assert (config.poll_interval, config.max_attempts, config.shutdown_grace) == (5, 10, 30)
    assert config.max_snoozes == 100  # docs/protocol.rst §17


def test_transactional_config_sets_the_mode() -> None:
    config = trioqueue.transactional_worker_config(4, print, queue="reports")
    assert (config.concurrency, config.transactional, config.queue) == (4, True, "reports")


def test_jobinfo_has_the_documented_fields() -> None:
    fields = {f.name for f in dataclasses.fields(trioqueue.JobInfo)}
    assert fields == {
        "id", "queue", "payload", "status", "attempts", "max_attempts", "priority",
        "progress", "last_error", "created_at", "finished_at",
        # the lease details the dashboard shows (defaults keep older callers working)
        "lease_expires_at", "last_renewed_at", "cancel_requested_at", "cancel_acknowledged_at",
        "worker_id",
        "result",  # what the handler returned (docs/usage.rst, "Results")
        "group",  # enqueue(..., group=): one job of the group at a time (docs/flow.rst)
        # attempt history (docs/protocol.rst §14): cancellations, the next run, who ran it
        "cancelled", "next_attempt_at", "finished_by",
        # checkpoints (docs/protocol.rst §16)
        "checkpoint", "checkpointed_at",
        # snoozes (docs/protocol.rst §17)
        "snoozes",
        "waiting_on",  # dependencies (docs/protocol.rst §21)
        "parent_id",  # job trees (docs/protocol.rst §22)
    }  # fmt: skip


def test_dependency_types_have_the_documented_fields() -> None:
    """docs/protocol.rst §21: backend.dependencies(id) and UnknownDependencyError."""
    assert [f.name for f in dataclasses.fields(trioqueue.DependencyInfo)] == [
        "id", "queue", "status",
    ]  # fmt: skip
    assert [f.name for f in dataclasses.fields(trioqueue.JobDependencies)] == [
        "job_id", "dependencies", "dependents", "parent", "children",
    ]  # fmt: skip
    error = trioqueue.UnknownDependencyError([9, 7])
    assert error.job_ids == (7, 9)
    assert isinstance(error, LookupError) and isinstance(error, trioqueue.TrioqueueError)


def test_scheduleinfo_has_the_documented_fields() -> None:
    fields = {f.name for f in dataclasses.fields(trioqueue.ScheduleInfo)}
    assert fields == {
        "name", "queue", "cron", "timezone", "next_run_at", "last_run_at",  # docs/api.rst
        "payload", "priority", "max_attempts",  # what each tick's job gets
        "enabled",  # set_schedule_enabled (docs/scheduling.rst)
    }  # fmt: skip
