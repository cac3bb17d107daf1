"""trioqueue: a PostgreSQL-backed job queue for trio, with a precise lease protocol.

A job is a row; a claim is a lease on the row. One guard per worker pool renews every due
lease in one shared statement, every write about an attempt is fenced by ``claim_seq``, and
each batch runs in one cancel scope whose deadline is its local lease fence.
"""

from trioqueue._backends.cursors import job_cursor
from trioqueue._backends.memory import MemoryBackend, open_memory
from trioqueue._backends.postgres import PostgresBackend, open_postgres
from trioqueue._core.backoff import ExponentialBackoff
from trioqueue._core.batch_outcome import JobFailed, JobRetry, JobSucceeded
from trioqueue._core.snooze import Snooze
from trioqueue._core.tracebacks import MAX_TRACEBACK_CHARS
from trioqueue._core.wire import Verdict
from trioqueue._errors import (
    BackendError,
    ConfigError,
    TrioqueueError,
    UnknownDependencyError,
    UnknownJobError,
)
from trioqueue._operator_types import (
    AttemptBucket,
    AttemptInfo,
    AttemptOutcome,
    AuditEntry,
    DeadLetter,
    DeadLetterSummary,
    MaintainerInfo,
    PruneBatch,
    QueueTimings,
    Retention,
    RetentionPolicy,
    RetentionPreview,
    TableHealth,
    TableSize,
)
from trioqueue._runtime.batch_context import BatchContext
from trioqueue._runtime.config import WorkerConfig, transactional_worker_config
from trioqueue._runtime.context import JobContext
from trioqueue._runtime.observer import PoolObserver
from trioqueue._runtime.pool import run_worker_pool
from trioqueue._runtime.workers import run_workers
from trioqueue._types import (
    BackendStatistics,
    DependencyInfo,
    Enqueued,
    EnqueueOutcome,
    FinishedBucket,
    Job,
    JobCount,
    JobDependencies,
    JobInfo,
    JobSort,
    JobStatus,
    OnDependencyFailure,
    OnDuplicate,
    QueueStats,
    ScheduleInfo,
    TruncatedText,
    UndecodablePayload,
    WorkerInfo,
)

__version__ = "0.1.0.dev0"

__all__ = [
    "MAX_TRACEBACK_CHARS",
    "AttemptBucket",
    "AttemptInfo",
    "AttemptOutcome",
    "AuditEntry",
    "BackendError",
    "BackendStatistics",
    "BatchContext",
    "ConfigError",
    "DeadLetter",
    "DeadLetterSummary",
    "DependencyInfo",
    "EnqueueOutcome",
    "Enqueued",
    "ExponentialBackoff",
    "FinishedBucket",
    "Job",
    "JobContext",
    "JobCount",
    "JobDependencies",
    "JobFailed",
    "JobInfo",
    "JobRetry",
    "JobSort",
    "JobStatus",
    "JobSucceeded",
    "MaintainerInfo",
    "MemoryBackend",
    "OnDependencyFailure",
    "OnDuplicate",
    "PoolObserver",
    "PostgresBackend",
    "PruneBatch",
    "QueueStats",
    "QueueTimings",
    "Retention",
    "RetentionPolicy",
    "RetentionPreview",
    "ScheduleInfo",
    "Snooze",
    "TableHealth",
    "TableSize",
    "TrioqueueError",
    "TruncatedText",
    "UndecodablePayload",
    "UnknownDependencyError",
    "UnknownJobError",
    "Verdict",
    "WorkerConfig",
    "WorkerInfo",
    "job_cursor",
    "open_memory",
    "open_postgres",
    "run_worker_pool",
    "run_workers",
    "transactional_worker_config",
]
