"""What backs each guarantee: the invariants of docs/protocol.rst (§9), and its rules §1 and §4.

One source of truth for two tables: the one in proofs/README.md (section "Every invariant
and what backs it", written by ``python proofs/backers.py --write``) and the one
docs/guarantees.rst includes (rendered by docs/render_reference.py at every docs build).
tests/unit/test_backers.py checks that the README's table is this render, that every test
file named here exists, that every test named here is defined in its file, and that every
proof named here is a function of proofs/timing.py.

Two kinds of backer count only once they exist, so that the tables are true before and
after they land, with nothing to edit here:

- the exhaustive model check, ``proofs/model_check.py``: the rows with ``model_check=True``;
- the conformance traces, ``proofs/traces/``: a row I2 to I13, I18 or I22 cites them when a
  file in that folder names the row's id as a word (``I5``, say in a header line
  ``invariants: I5 I6``).

The README's last section, on mutation testing, is written from proofs/mutants/ (the last
run's numbers and the survivors listed as equivalent); tests/unit/test_mutants_report.py
checks that it is current.

Plain data and string functions only: no import beyond the standard library.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL_CHECK = "proofs/model_check.py"
TRACES = "proofs/traces"


@dataclass(frozen=True)
class Proof:
    """A z3 proof of proofs/timing.py, by the label of the README's proof table."""

    label: str
    function: str
    note: str = ""


@dataclass(frozen=True)
class Tests:
    """Tests in one file under ``tests/``: ``names`` are test (or state machine invariant)
    names, or a prefix ending in ``*`` (``test_I2_*``: every test so named in the file)."""

    file: str
    names: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class Guarantee:
    """One row: an invariant (``I1``) or a rule (``§1``) of docs/protocol.rst.

    ``title`` is the README's short name, ``statement`` what a user can rely on (reST inline
    markup: double backquotes and ``:class:`` roles only).
    """

    id: str
    title: str
    statement: str
    proofs: tuple[Proof, ...] = ()
    tests: tuple[Tests, ...] = ()
    model_check: bool = False


_UNITS = "unit/test_core_units.py"
_POOL = "unit/test_pool_examples.py"
_GUARD = "unit/test_core_guard_stateful.py"
_PROPS = "unit/test_pool_properties.py"
_MODEL = "unit/test_memory_model_stateful.py"
_MACHINE = "state machine, after every step"
_SUITE = "the conformance suite: stale writes, a reclaimed attempt fenced out"
_CRASHES = "the conformance suite: attempts without an outcome, quarantine, parking"
_ATTEMPTS = "the conformance suite: attempt rows, lost attempts, cancellations, timings"
_RETENTION = "the conformance suite: policies, bounded fenced batches, the maintainer lease"
_RETENTION_MODEL = "unit/test_retention_model_stateful.py"
_DUPLICATES = "the conformance suite: keep, replace, debounce, a running holder left alone"
_CHECKPOINTS = "the conformance suite: stored by renewals and outcomes, fenced, delivered"
_SNOOZES = "the conformance suite: fenced, uncharged, counted, its delay, the bound, a cancel"
_DEAD = "the conformance suite: dead letters, their filters and summary, redrive in batches"
_TRACE_TESTS = "unit/test_traces.py"
_CHECKPOINT_TRACE_TEST = "test_a_checkpoint_is_sent_once_and_again_after_a_failed_renewal"
_BATCH_TRACE_TEST = "test_a_batch_handler_call_gives_each_job_one_outcome"
_DEPENDENCIES = "the conformance suite: chains, fan-ins, failures by policy, retry, reads"
_DEPENDENCY_RACES = "an ack racing an enqueue or a retry, both lock orders"
_DEPENDENCY_PROPS = "random DAGs on whole pools under faults"
_TREES = "the conformance suite: children, the wait for them, both policies, a tree's cancel"

_CLAIM = Proof("(a) registration", "registration_fence")
_RENEWAL = Proof("(a) renewal", "renewal_fence")
_LOCK = Proof("(e)", "delayed_claim")
_IN_FLIGHT = Proof("(f) in flight", "in_flight_wait")
_RESCUE = Proof("S1", "in_flight_rescue")

GUARANTEES: tuple[Guarantee, ...] = (
    Guarantee(
        "I1",
        "bad config refused, every violation listed",
        "A pool with a bad timing configuration never starts: it raises one "
        ":class:`~trioqueue.ConfigError` that lists every violation at once, before it "
        "touches the backend.",
        tests=(Tests(_UNITS, ("test_I1_*",)), Tests(_POOL, ("test_I1_*",))),
    ),
    Guarantee(
        "I2",
        "nothing runs past the local fence",
        "No claim hook or handler runs past its batch's local lease fence (plus scheduling "
        "slack, and at most 0.25 s for a renewal in flight), and the fence never outlives "
        "the lease stored in the row: while your handler runs, no other worker can claim "
        "its job (with synchronised clocks).",
        proofs=(_CLAIM, _RENEWAL, _IN_FLIGHT, _RESCUE),
        model_check=True,
        tests=(
            Tests(_UNITS, ("test_I2_*",)),
            Tests(_GUARD, ("I2_fence_never_outlives_the_granted_lease",), _MACHINE),
            Tests(_PROPS, (), "two attempts of one job never run at once"),
        ),
    ),
    Guarantee(
        "I3",
        "stop within ``[V − H, V]`` of the loss",
        "When the database goes away, a handler is stopped between ``V - H`` and ``V`` "
        "after it went away (at most ``V`` after the last successful renewal was sent, "
        "plus 0.25 s for one in flight), without any answer from the database.",
        proofs=(Proof("(b)", "database_loss"),),
        tests=(
            Tests(_POOL, ("test_I3_*",)),
            Tests(_PROPS, ("test_I3_*",)),
            Tests(_UNITS, ("test_I3_*",)),
        ),
    ),
    Guarantee(
        "I4",
        "hooks + handler stop at registration + D",
        "With ``max_job_duration`` set to ``D``, a job's claim hooks and handler together "
        "are stopped ``D`` after its batch registered; running past it is a retryable "
        "failure.",
        proofs=(Proof("(d) scope", "duration_deadline"), Proof("(d) outcome", "duration_outcome")),
        tests=(
            Tests(_UNITS, ("test_I4_*",)),
            Tests(_POOL, ("test_I4_*",)),
            Tests(_GUARD, ("I4_scope_deadline_is_min_of_fence_duration_and_shutdown",), _MACHINE),
            Tests(_PROPS),
        ),
        model_check=True,
    ),
    Guarantee(
        "I5",
        "two-connection ceiling",
        "A wedged database holds at most two of a pool's connections for its renewals: one "
        "abandoned call and the current one. The fences keep stopping handlers meanwhile.",
        proofs=(Proof("I5", "one_abandoned_at_a_time"), Proof("(f) abandon", "abandonment_time")),
        tests=(
            Tests(_UNITS, ("test_I5_*",)),
            Tests(_POOL, ("test_I5_*",)),
            Tests(_GUARD, ("I5_at_most_two_connections",), _MACHINE),
            Tests("postgres/test_postgres_wedge.py"),
        ),
        model_check=True,
    ),
    Guarantee(
        "I6",
        "late answers change nothing",
        "The answer of an abandoned or superseded renewal, whenever it arrives, changes no "
        "lease, deadline, verdict or renewal slot.",
        proofs=(Proof("I6", "late_answer"),),
        tests=(Tests(_UNITS, ("test_I6_*",)), Tests(_POOL, ("test_I6_*",)), Tests(_GUARD)),
        model_check=True,
    ),
    Guarantee(
        "I7",
        "expired at registration: no handler",
        "A batch whose lease had already run out when it registered never runs a handler; "
        "each of its jobs fires ``on_job_claimed`` then ``on_job_unavailable``.",
        proofs=(Proof("(e)", "delayed_claim", "when it cannot happen"),),
        tests=(Tests(_UNITS, ("test_I7_*",)), Tests(_POOL, ("test_I7_*",)), Tests(_GUARD)),
    ),
    Guarantee(
        "I8",
        "one cancellation, one outcome per attempt",
        "Each attempt is cancelled at most once and gets exactly one outcome. Its reason is "
        "the first deadline to pass (lease, then ``max_job_duration``, then shutdown when "
        "they coincide), and nothing that happens later changes it.",
        tests=(
            Tests(_UNITS, ("test_I8_*",)),
            Tests(_POOL, ("test_I8_*",)),
            Tests(_GUARD, ("I8_each_job_stopped_and_cancelled_at_most_once",), _MACHINE),
            Tests(_PROPS, (), "one outcome per claimed attempt"),
            Tests("unit/test_worker_exits.py", (), "a handler's exit is never a success"),
        ),
        model_check=True,
    ),
    Guarantee(
        "I9",
        "stale ``claim_seq`` writes nothing",
        "A write about an attempt that is no longer the row's (a renewal, progress, an ack, "
        "a failure, a release naming a stale ``claim_seq``) changes nothing: a worker that "
        "lost its job cannot overwrite the attempt that replaced it.",
        tests=(
            Tests(_MODEL, (), _MACHINE),
            Tests("unit/test_memory_backend.py", (), _SUITE),
            Tests("postgres/test_postgres_backend.py", (), _SUITE),
        ),
    ),
    Guarantee(
        "I10",
        "first beat at once, one statement per beat",
        "A batch's first renewal goes out as soon as it registers (unless every job of it "
        "has already finished, docs/protocol.rst §10, refinement 12); after that a pool "
        "sends one renewal statement per beat, however many jobs it holds.",
        proofs=(Proof("(c)", "retry_pace", "finitely many on failure"),),
        tests=(Tests(_UNITS, ("test_I10_*",)), Tests(_POOL, ("test_I10_*",)), Tests(_GUARD)),
    ),
    Guarantee(
        "I11",
        "progress rides on the heartbeat",
        "``report_progress`` keeps only finite values in ``[0, 1]``; the latest wins and "
        "the next renewal stores it, at no cost of a statement of its own.",
        tests=(Tests(_UNITS, ("test_I11_*",)), Tests(_POOL, ("test_I11_*",)), Tests(_GUARD)),
    ),
    Guarantee(
        "I12",
        "cancel within a beat, job failed",
        "A cancel reaches a running handler within one heartbeat (almost at once with "
        "``NOTIFY``); the job ends ``failed`` and is not retried.",
        tests=(
            Tests(_UNITS, ("test_I12_*",)),
            Tests(_POOL, ("test_I12_*",)),
            Tests(_GUARD),
            Tests(_PROPS, (), "a cancelled job is never claimed again"),
        ),
    ),
    Guarantee(
        "I13",
        "no job lost",
        "Once failures stop (a worker crashed, the database was lost), every enqueued job "
        "ends ``succeeded`` or ``failed``; in transactional mode its effects commit exactly "
        "once.",
        tests=(
            Tests(_POOL, ("test_I13_*",)),
            Tests(_GUARD, ("I13_running_handler_keeps_its_lease_renewed",), _MACHINE),
            Tests(_MODEL, ("no_job_is_lost",), _MACHINE),
            Tests(_PROPS, (), "every fault lifted, every job ends"),
            Tests("postgres/test_postgres_pool.py"),
            Tests("postgres/test_postgres_restart.py"),
            Tests("postgres/test_postgres_transactional.py"),
            Tests("postgres/test_worker_exits.py", (), "an exiting handler commits nothing"),
        ),
    ),
    Guarantee(
        "I14",
        "a job that kills its worker runs alone, then is parked",
        "A claim that takes a job again after its attempt ended without an outcome (the "
        "worker running it died) says so in ``last_error``. A job whose last "
        "``quarantine_after`` attempts (default 2) all ended so runs alone: the only job of "
        "its claim, in a pool with nothing else in flight, which claims nothing more until it "
        "ends. Only if that run ends so too is the job failed (parked), with a "
        "``last_error`` that says so; the jobs beside it are not taken down again.",
        tests=(
            Tests("unit/test_crash_quarantine.py", ("test_I14_*",)),
            Tests("unit/test_memory_backend.py", (), _CRASHES),
            Tests("postgres/test_postgres_backend.py", (), _CRASHES),
            Tests("postgres/test_worker_crash.py", ("test_I14_*",), "a real worker process"),
        ),
    ),
    Guarantee(
        "I15",
        "every attempt leaves one row, and a cancellation is told from a failure",
        "Each attempt whose outcome was recorded (succeeded, retried, failed, cancelled, "
        "released) leaves one row in the attempts table, written by the same statement as "
        "the outcome; an attempt whose worker died leaves one ``lost`` row, written by the "
        "claim that took the job over; a late write of an attempt that lost its lease leaves "
        "none. ``JobInfo.cancelled`` is true exactly for the failed jobs that failed because a "
        "cancel was asked.",
        tests=(
            Tests("unit/test_attempts_model.py", (), "the reference model, after every step"),
            Tests("unit/test_memory_backend.py", (), _ATTEMPTS),
            Tests("postgres/test_postgres_backend.py", (), _ATTEMPTS),
        ),
    ),
    Guarantee(
        "I16",
        "retention deletes only finished jobs past their policy",
        "Retention never deletes a job that is not finished (queued, scheduled or running, "
        "whatever its age), nor a finished job within its queue's retention policy or kept "
        "for ever, nor an audit entry within the audit log's keep-time; a job's attempts and "
        "result go with it.",
        tests=(
            Tests(_RETENTION_MODEL, (), "the reference model, after every step"),
            Tests("unit/test_memory_backend.py", (), _RETENTION),
            Tests("postgres/test_postgres_backend.py", (), _RETENTION),
            Tests("postgres/test_postgres_retention.py", (), "bounded batches, their index"),
        ),
    ),
    Guarantee(
        "I17",
        "one maintainer prunes at a time",
        "Prune batches are fenced by the maintainer lease: a batch deletes only while its "
        "fence is the live lease's, by the database's clock, so at most one pool's batches "
        "delete at a time and a pool whose lease ran out or moved on deletes nothing; only "
        "the live lease's holder renews or releases it.",
        tests=(
            Tests(_RETENTION_MODEL, (), "the reference model, after every step"),
            Tests("unit/test_memory_backend.py", (), _RETENTION),
            Tests("postgres/test_postgres_backend.py", (), _RETENTION),
            Tests("postgres/test_postgres_retention.py", (), "the lease row, a claim waits"),
        ),
    ),
    Guarantee(
        "I18",
        "a checkpoint is stored only by its own attempt",
        "A handler's latest checkpoint rides in the pool's one renewal statement and in its "
        "attempt's final write, fenced by ``claim_seq``: a stale attempt's checkpoint is never "
        "stored, a value already held is not sent again, and the next attempt is delivered "
        "the last one stored (``ctx.last_checkpoint``).",
        tests=(
            Tests("unit/test_core_checkpoint.py", (), "the guard's send-once rule"),
            Tests("unit/test_pool_checkpoints.py", (), "whole pools under a mock clock"),
            Tests("unit/test_memory_backend.py", (), _CHECKPOINTS),
            Tests("postgres/test_postgres_backend.py", (), _CHECKPOINTS),
            Tests("postgres/test_postgres_checkpoints.py", (), "late renewals, HOT updates"),
            Tests(_TRACE_TESTS, (_CHECKPOINT_TRACE_TEST,), "the trace checkpoint-sent-once"),
        ),
    ),
    Guarantee(
        "I19",
        "a snooze gives its attempt back, fenced and bounded",
        "A handler's ``Snooze(seconds)`` puts its job back at the database's ``now() + "
        "seconds`` with the attempt not charged and one more ``snoozes``, only while the "
        "attempt still holds the row (fenced by ``claim_seq``); a job that snoozed "
        "``max_snoozes`` times fails for good instead, and a stale snooze changes nothing.",
        tests=(
            Tests("unit/test_pool_snoozes.py", ("test_I19_*",), "whole pools under a mock clock"),
            Tests("unit/test_memory_backend.py", (), _SNOOZES),
            Tests("postgres/test_postgres_backend.py", (), _SNOOZES),
            Tests("postgres/test_differential.py", (), "both backends, step by step"),
            Tests("postgres/test_postgres_snoozes.py", (), "a late snooze after a reclaim"),
        ),
    ),
    Guarantee(
        "I20",
        "a duplicate changes only a waiting job",
        "An enqueue whose dedup key an unfinished job holds changes that job only while it "
        "waits, exactly as its ``on_duplicate`` policy says (replace: payload, priority and "
        "run time; debounce: the run time); a running job is left as it was, and the answer "
        "says ``running``; a worker never runs a payload that an answer says was replaced.",
        tests=(
            Tests(
                "unit/test_duplicates_model_stateful.py",
                (),
                "the reference model, after every step",
            ),
            Tests("unit/test_memory_backend.py", (), _DUPLICATES),
            Tests("postgres/test_postgres_backend.py", (), _DUPLICATES),
            Tests(
                "postgres/test_postgres_duplicates.py",
                (),
                "a replace racing a claim, two connections",
            ),
        ),
    ),
    Guarantee(
        "I21",
        "a redrive retries only dead letters",
        "The dead letters listed are exactly the failed jobs their filters match; a redrive "
        "changes only jobs still ``failed`` and matching when its batch locks them, each as "
        "``retry`` changes one (attempts and ``claim_seq`` kept), in bounded batches and at "
        "most once per call; every other job is left as it was.",
        tests=(
            Tests("unit/test_dead_letters_model.py", (), "the reference model, property test"),
            Tests("unit/test_memory_backend.py", (), _DEAD),
            Tests("postgres/test_postgres_backend.py", (), _DEAD),
            Tests("postgres/test_postgres_dead_letters.py", (), "batches, locks, the index"),
        ),
    ),
    Guarantee(
        "I22",
        "a batch handler's jobs each get exactly one outcome",
        "Each job of a batch run by one batch handler call gets exactly one outcome: its own "
        "stop's if it has one, else its batch's stop's, else the handler's answer for it (a "
        "missing or unusable answer is a charged failure). The call runs once, under the "
        "batch's scope, and stops at the lease fence, at ``max_job_duration`` or once every "
        "job is stopped, never because one job is; a lost lease writes nothing.",
        tests=(
            Tests("unit/test_pool_batch_handler.py", (), "outcomes, stops, fence, duration"),
            Tests("unit/test_batch_handler_properties.py", (), "random answers, cancels, D"),
            Tests("postgres/test_postgres_batch_handler.py", (), "real rows, a cancel by NOTIFY"),
            Tests(_TRACE_TESTS, (_BATCH_TRACE_TEST,), "the trace batch-handler-outcomes"),
        ),
    ),
    Guarantee(
        "I23",
        "a dependent runs only after its dependencies succeeded",
        "A job enqueued with ``depends_on`` is claimable only once every one of its "
        "dependencies has succeeded; the statement that records the last success makes it "
        "claimable and wakes its queue, and a dependency finishing while the dependent is "
        "being enqueued never strands it.",
        tests=(
            Tests("unit/test_memory_backend.py", (), _DEPENDENCIES),
            Tests("postgres/test_postgres_backend.py", (), _DEPENDENCIES),
            Tests("postgres/test_postgres_dependencies.py", (), _DEPENDENCY_RACES),
            Tests("unit/test_dependencies_properties.py", (), _DEPENDENCY_PROPS),
        ),
    ),
    Guarantee(
        "I24",
        "a dependency's failure reaches every dependent",
        "When a dependency fails for good (or is deleted unfinished), every unfinished "
        "dependent, directly or through others, fails or is cancelled by its own policy in "
        "that same statement, naming the dependency; no dependent waits for ever.",
        tests=(
            Tests("unit/test_memory_backend.py", (), _DEPENDENCIES),
            Tests("postgres/test_postgres_backend.py", (), _DEPENDENCIES),
            Tests("unit/test_dependencies_properties.py", (), _DEPENDENCY_PROPS),
        ),
    ),
    Guarantee(
        "I25",
        "a parent's continuation runs once, after its children",
        "A job that answered ``AwaitChildren`` is claimable only once every child it waited "
        'for has finished (succeeded, or failed under ``"continue"``); the statement that '
        "finishes the last one makes it claimable, once, and a child finishing while the wait "
        "is written never strands it.",
        tests=(
            Tests("unit/test_memory_backend.py", (), _TREES),
            Tests("postgres/test_postgres_backend.py", (), _TREES),
            Tests(
                "postgres/test_postgres_trees.py",
                (),
                "a child's ack racing the wait, both lock orders",
            ),
        ),
    ),
    Guarantee(
        "I26",
        "a tree's failure and cancel reach every node",
        'Under ``"fail"`` a child\'s failure for good fails its waiting parent in the same '
        'statement, naming the child; under ``"continue"`` it settles the parent as a '
        "success. A cancel of a job cancels every unfinished descendant in the same statement.",
        tests=(
            Tests("unit/test_memory_backend.py", (), _TREES),
            Tests("postgres/test_postgres_backend.py", (), _TREES),
        ),
    ),
    Guarantee(
        "§1",
        "lease counted from the lock",
        "A claim's lease counts from the moment its row is locked, not from the statement's "
        "start: a claim that waited on a lock never delivers rows whose lease already ran "
        "out, so it costs them no attempt.",
        proofs=(_LOCK,),
        tests=(Tests(_POOL, ("test_claim_that_stalled_before_taking_its_rows_*",)),),
    ),
    Guarantee(
        "§4",
        "a stopped batch keeps its lease while its handler runs",
        "A stopped batch (its duration passed, a cancel, shutdown) stays leased until its "
        "last claim hook and handler have exited, a shielded ``finally`` or a synchronous "
        "handler in its thread included: no other worker runs the job beside it.",
        tests=(
            Tests("unit/test_pool_unwinding.py"),
            Tests("unit/test_pool_write_bound.py", (), "a failing write holds it one lease"),
            Tests("postgres/test_postgres_unwinding.py"),
            Tests(_GUARD),
        ),
        model_check=True,
    ),
)


@dataclass(frozen=True)
class Rule:
    """One numbered rule of docs/protocol.rst: a section (``§3``) or a refinement of §10
    (``§10.17``), and what backs it.

    ``traces`` names files of ``proofs/traces/`` (without ``.json``); ``checks`` names z3
    proofs (functions of ``proofs/timing.py`` and ``proofs/maintainer_timing.py``) and
    model-check twins (classes of ``proofs/model_check.py``), written
    ``timing.<function>``, ``maintainer_timing.<function>`` and ``model_check.<Twin>``.
    """

    id: str
    title: str
    traces: tuple[str, ...] = ()
    tests: tuple[Tests, ...] = ()
    checks: tuple[str, ...] = ()


_RUNTIME = "unit/test_runtime_batching.py"
_CONFORMANCE_CLAIM = "the conformance suite: claims"

RULES: tuple[Rule, ...] = (
    Rule(
        "§1",
        "rows, attempts and fencing by ``claim_seq``",
        ("claim-delayed-by-locks", "expired-at-registration"),
        (
            Tests(_POOL, ("test_claim_that_stalled_before_taking_its_rows_*",)),
            Tests("unit/test_memory_backend.py", (), _CONFORMANCE_CLAIM),
            Tests("postgres/test_postgres_claims.py"),
            Tests("postgres/test_postgres_backend.py", (), _SUITE),
        ),
        checks=("timing.delayed_claim",),
    ),
    Rule(
        "§2",
        "the guard: one shared statement, verdicts, retry pace",
        (
            "healthy-renewals",
            "first-renewal-at-once",
            "shared-statement",
            "failed-renewal-retry",
            "gone-seen-twice",
            "reclaimed",
            "unchanged-and-partial",
            "gone-reset-by-another-verdict",
            "gone-across-a-failure",
            "verdicts-of-exited-jobs",
        ),
        (
            Tests(_UNITS, ("test_I10_*", "test_gone_*", "test_failed_renewal_retries_*")),
            Tests(_GUARD, (), _MACHINE),
            Tests("postgres/test_postgres_renewal_writes.py"),
        ),
        checks=(
            "timing.retry_pace",
            "timing.gone_twice",
            "model_check.RetriesWithoutFloor",
            "model_check.RetriesAtTheBeat",
            "model_check.BelievesGoneAtOnce",
        ),
    ),
    Rule(
        "§3",
        "the lease fence, at registration, after a renewal, in flight",
        ("lease-lost-fence", "in-flight-rescue", "failure-past-fence", "fence-never-moves-back"),
        (Tests(_UNITS, ("test_I2_*", "test_initial_deadline_*", "test_advanced_deadline_*")),),
        checks=(
            "timing.registration_fence",
            "timing.renewal_fence",
            "timing.in_flight_wait",
            "model_check.LeaseFromAnswer",
            "model_check.IgnoresRowLeases",
            "model_check.ExpiryAfterSlotCleared",
        ),
    ),
    Rule(
        "§4",
        "one cancel scope per batch: its deadlines, its outcomes",
        (
            "max-job-duration",
            "max-job-duration-last-attempt",
            "shutdown-release",
            "stopped-batch-keeps-lease",
            "expired-at-registration",
            "refused-at-the-fence",
            "shutdown-twice",
        ),
        (
            Tests(_UNITS, ("test_I4_*", "test_I8_*", "test_decide_*")),
            Tests("unit/test_pool_unwinding.py"),
            Tests("unit/test_infrastructure_errors.py"),
        ),
        checks=(
            "timing.duration_deadline",
            "timing.duration_outcome",
            "model_check.DurationFromHandlerStart",
            "model_check.MaxDurationLate",
            "model_check.StopsStoppedBatches",
        ),
    ),
    Rule(
        "§4.1",
        "a handler that asks the process to exit",
        tests=(Tests("unit/test_worker_exits.py"), Tests("postgres/test_worker_exits.py")),
    ),
    Rule(
        "§4.2",
        "an outcome write that keeps failing, retried for one lease",
        tests=(Tests("unit/test_pool_write_bound.py"),),
    ),
    Rule(
        "§5",
        "progress and cancellation",
        (
            "cancel-directive",
            "cancel-notice",
            "progress-on-renewals",
            "progress-out-of-range",
            "cancel-then-reclaimed",
            "cancel-notice-answers",
            "progress-while-unwinding",
        ),
        (Tests(_UNITS, ("test_I11_*", "test_I12_*")), Tests(_POOL, ("test_I12_*",))),
    ),
    Rule(
        "§6",
        "a stuck renewal: give-up time, abandonment, two connections",
        ("wedged-renewal-abandoned", "late-answer-ignored", "abandoned-past-fence"),
        (
            Tests(_UNITS, ("test_I5_*", "test_I6_*")),
            Tests("postgres/test_postgres_wedge.py"),
        ),
        checks=(
            "timing.abandonment_time",
            "timing.one_abandoned_at_a_time",
            "timing.late_answer",
            "model_check.AbandonsWithoutSlot",
            "model_check.AcceptsStaleTokens",
        ),
    ),
    Rule(
        "§7",
        "timing rules and the database-loss window",
        ("lease-lost-fence",),
        (Tests(_UNITS, ("test_I1_*", "test_I3_*")), Tests(_PROPS, ("test_I3_*",))),
        checks=("timing.database_loss",),
    ),
    Rule(
        "§8",
        "clocks: the offset bounded, warned of, claiming stopped",
        tests=(
            Tests("unit/test_clock_skew.py"),
            Tests("postgres/test_postgres_clock_skew.py"),
        ),
    ),
    Rule(
        "§10.1",
        "``cancel_requested`` also extends",
        ("cancel-directive",),
        (Tests(_UNITS, ("test_I12_cancel_requested_is_delivered_once_and_extends_the_lease",)),),
    ),
    Rule(
        "§10.2",
        "reclaimed and gone are per job",
        ("reclaimed", "gone-seen-twice"),
        (Tests(_UNITS, ("test_reclaimed_stops_only_that_job_and_siblings_lease_advances",)),),
    ),
    Rule(
        "§10.3",
        "one reason: the first deadline to pass",
        ("max-job-duration", "stopped-batch-keeps-lease", "duration-during-in-flight-wait"),
        (
            Tests(
                _UNITS,
                (
                    "test_I8_stop_reason_is_the_first_deadline_however_late_the_core_looks",
                    "test_I8_batch_stop_order_when_deadlines_coincide",
                ),
            ),
        ),
    ),
    Rule(
        "§10.4",
        "a fired fence stays fired",
        ("late-answer-ignored", "failure-past-fence"),
        (Tests(_UNITS, ("test_I8_frozen_stop_is_not_revived_by_a_later_answer",)),),
    ),
    Rule(
        "§10.5",
        "the pool-wide beat",
        ("shared-statement", "first-renewal-at-once"),
        (Tests(_UNITS, ("test_I10_batch_registered_between_beats_joins_the_pool_beat",)),),
    ),
    Rule(
        "§10.6",
        "cancel notices are remembered",
        ("cancel-notice",),
        (Tests(_UNITS, ("test_I12_cancel_notice_*",)),),
    ),
    Rule(
        "§10.7",
        "a job's last write carries its progress",
        tests=(Tests("postgres/test_postgres_backend.py", (), "the conformance suite: results"),),
    ),
    Rule(
        "§10.8",
        "one claim statement may fill several free slots",
        tests=(
            Tests(
                _POOL,
                (
                    "test_one_claim_for_several_slots_still_makes_batch_size_batches",
                    "test_free_slots_are_filled_by_one_claim_each_batch_on_its_own",
                ),
            ),
        ),
    ),
    Rule(
        "§10.9",
        "a failure the database refuses to retry is final",
        tests=(
            Tests(
                _POOL, ("test_I12_failure_after_an_unseen_cancel_is_reported_final_not_retried",)
            ),
        ),
    ),
    Rule(
        "§10.10",
        "batches due soon ride along",
        tests=(
            Tests(
                _UNITS,
                (
                    "test_I10_statements_longer_than_half_a_beat_still_merge_into_one",
                    "test_a_batch_due_past_its_fence_still_rides_along_before_it",
                ),
            ),
        ),
    ),
    Rule(
        "§10.11",
        "a stopped batch is renewed until its handlers exit",
        ("stopped-batch-keeps-lease",),
        (
            Tests(_UNITS, ("test_stopped_batch_*",)),
            Tests("unit/test_pool_unwinding.py"),
        ),
        checks=("model_check.DropsStoppedBatches", "model_check.IgnoresStoppedVerdicts"),
    ),
    Rule(
        "§10.12",
        "a first beat is owed to running work only",
        tests=(Tests(_UNITS, ("test_I10_first_beat_*", "test_I10_a_waived_first_beat_*")),),
        checks=("model_check.WaivesRunningWork",),
    ),
    Rule(
        "§10.13",
        "cancels and stops in batch order, then job order",
        ("cancels-across-batches",),
        (Tests(_TRACE_TESTS, ("test_cancels_and_stops_come_in_batch_then_job_order",)),),
    ),
    Rule(
        "§10.14",
        "the message of a cancelled attempt",
        ("handler-errors",),
        (Tests(_TRACE_TESTS, ("test_messages_of_a_handler_error_and_of_max_job_duration",)),),
    ),
    Rule(
        "§10.15",
        "the message of ``max_job_duration``, ``D`` as ``%g``",
        ("max-job-duration-message",),
        (Tests(_UNITS, ("test_decide_duration_message_formats_fractions",)),),
    ),
    Rule(
        "§10.16",
        "when a lease is lost, and when the guard wakes",
        ("lease-lost-fence", "failure-past-fence"),
        (
            Tests(
                _UNITS,
                (
                    "test_next_wake_skips_a_retry_due_past_the_fence",
                    "test_stopped_batch_renewals_end_when_its_lease_runs_out",
                ),
            ),
            Tests(_GUARD, ("I13_running_handler_keeps_its_lease_renewed",), _MACHINE),
        ),
    ),
    Rule(
        "§10.17",
        "the in-flight rescue",
        ("in-flight-rescue",),
        (
            Tests(
                _UNITS,
                (
                    "test_I2_answer_before_give_up_but_after_old_lease_still_extends",
                    "test_I2_answer_at_give_up_is_too_late",
                ),
            ),
        ),
        checks=(
            "timing.in_flight_rescue",
            "model_check.ExpiryAfterSlotCleared",
        ),
    ),
    Rule(
        "§10.18",
        "which scopes an answer moves",
        ("failure-past-fence",),
        (
            Tests(
                _UNITS,
                (
                    "test_answered_and_failed_move_the_carried_batches_only",
                    "test_I2_failed_in_flight_renewal_stops_waiting_at_once",
                ),
            ),
        ),
    ),
    Rule(
        "§10.19",
        "reclaimed or gone overrides an earlier cancel",
        ("cancel-then-reclaimed",),
        (Tests(_UNITS, ("test_I12_cancelled_job_later_reclaimed_is_stopped_once",)),),
        checks=(
            "timing.reclaimed_over_cancel",
            "model_check.ReclaimedKeepsCancel",
        ),
    ),
    Rule(
        "§10.20",
        "a batch of one has one scope",
        ("batch-of-one-stopped",),
        (Tests(_RUNTIME, ("test_batch_of_one_settles_itself",)),),
    ),
    Rule(
        "§10.21",
        "the pool's beat: its anchor, the next beat in binary64",
        ("shared-statement", "abandoned-past-fence"),
        (Tests(_UNITS, ("test_I10_batch_registered_between_beats_joins_the_pool_beat",)),),
    ),
    Rule(
        "§10.22",
        "an abandoned renewal counts as a failed one",
        ("abandoned-past-fence", "wedged-renewal-abandoned"),
        (Tests(_UNITS, ("test_I5_abandon_after_give_up_plus_grace",)),),
        checks=(
            "timing.retry_pace",
            "model_check.AbandonsWithoutSlot",
        ),
    ),
    Rule(
        "§13",
        "attempts without an outcome: crash records and quarantine",
        tests=(
            Tests("unit/test_crash_quarantine.py"),
            Tests("unit/test_memory_backend.py", (), _CRASHES),
            Tests("postgres/test_worker_crash.py"),
        ),
    ),
    Rule(
        "§14",
        "attempt history: one fenced row per attempt, cancellations told apart",
        tests=(
            Tests("unit/test_attempts_model.py", (), "the reference model, after every step"),
            Tests("unit/test_memory_backend.py", (), _ATTEMPTS),
            Tests("postgres/test_postgres_backend.py", (), _ATTEMPTS),
            Tests("postgres/test_postgres_attempts.py", (), "one statement with the outcome"),
        ),
    ),
    Rule(
        "§15",
        "retention by policy in bounded batches, fenced by the maintainer lease",
        checks=(
            "maintainer_timing.fence_after_claim",
            "maintainer_timing.fence_after_renewal",
            "maintainer_timing.fired_fence",
            "maintainer_timing.refused_claim",
            "maintainer_timing.failed_renewal",
        ),
        tests=(
            Tests(_RETENTION_MODEL, (), "the reference model, after every step"),
            Tests("unit/test_memory_backend.py", (), _RETENTION),
            Tests("postgres/test_postgres_backend.py", (), _RETENTION),
            Tests("postgres/test_postgres_retention.py", (), "bounded batches, the lease row"),
        ),
    ),
    Rule(
        "§16",
        "checkpoints: stored with the renewal and the final write, fenced, delivered",
        traces=("checkpoint-sent-once",),
        tests=(
            Tests(_TRACE_TESTS, (_CHECKPOINT_TRACE_TEST,)),
            Tests("unit/test_core_checkpoint.py", (), "the guard's send-once rule"),
            Tests("unit/test_pool_checkpoints.py", (), "whole pools under a mock clock"),
            Tests("unit/test_memory_backend.py", (), _CHECKPOINTS),
            Tests("postgres/test_postgres_backend.py", (), _CHECKPOINTS),
        ),
    ),
    Rule(
        "§17",
        "snooze: a fenced, uncharged requeue after a delay, counted and bounded",
        ("handler-snoozes",),
        tests=(
            Tests("unit/test_pool_snoozes.py", (), "raised, returned, the bound, stops first"),
            Tests("unit/test_memory_backend.py", (), _SNOOZES),
            Tests("postgres/test_postgres_backend.py", (), _SNOOZES),
            Tests("postgres/test_postgres_snoozes.py", (), "a late snooze after a reclaim"),
            Tests("postgres/test_postgres_transactional.py", (), "a snooze's writes rolled back"),
        ),
    ),
    Rule(
        "§18",
        "duplicates: keep, replace or debounce a waiting holder, never a running one",
        tests=(
            Tests(
                "unit/test_duplicates_model_stateful.py",
                (),
                "the reference model, after every step",
            ),
            Tests("unit/test_memory_backend.py", (), _DUPLICATES),
            Tests("postgres/test_postgres_backend.py", (), _DUPLICATES),
            Tests(
                "postgres/test_postgres_duplicates.py",
                (),
                "a replace racing a claim, two connections",
            ),
        ),
    ),
    Rule(
        "§19",
        "dead letters and their redrive in bounded batches",
        tests=(
            Tests("unit/test_dead_letters_model.py", (), "the reference model, property test"),
            Tests("unit/test_memory_backend.py", (), _DEAD),
            Tests("postgres/test_postgres_backend.py", (), _DEAD),
            Tests("postgres/test_postgres_dead_letters.py", (), "batches, locks, the index"),
        ),
    ),
    Rule(
        "§20",
        "batch handlers: one call per batch under its scope, exactly one outcome per job",
        traces=("batch-handler-outcomes",),
        tests=(
            Tests(_TRACE_TESTS, (_BATCH_TRACE_TEST,)),
            Tests("unit/test_pool_batch_handler.py", (), "outcomes, stops, fence, duration"),
            Tests("unit/test_batch_handler_properties.py", (), "random answers, cancels, D"),
            Tests("postgres/test_postgres_batch_handler.py", (), "real rows, a cancel by NOTIFY"),
        ),
    ),
    Rule(
        "§21",
        "dependencies: wait for every dependency's success, fail by policy when one fails",
        tests=(
            Tests("unit/test_memory_backend.py", (), _DEPENDENCIES),
            Tests("postgres/test_postgres_backend.py", (), _DEPENDENCIES),
            Tests("postgres/test_postgres_dependencies.py", (), _DEPENDENCY_RACES),
            Tests("unit/test_dependencies_properties.py", (), _DEPENDENCY_PROPS),
        ),
    ),
    Rule(
        "§22",
        "job trees: children under a parent, the parent's wait for them and its continuation",
        tests=(
            Tests("unit/test_memory_backend.py", (), _TREES),
            Tests("postgres/test_postgres_backend.py", (), _TREES),
            Tests("unit/test_web_dependencies.py", (), "the job page's parent and children"),
        ),
    ),
)


def render_rules_markdown() -> str:
    """The README's table of rules (GitHub Markdown)."""
    lines = [
        "| rule | traces | proofs and model check | tests |",
        "| --- | --- | --- | --- |",
    ]
    for rule in RULES:
        traces = ", ".join(f"`{name}`" for name in rule.traces) or "—"
        checks = ", ".join(f"`{name}`" for name in rule.checks) or "—"
        tests = "; ".join(_tests_text(t, "`") for t in rule.tests) or "—"
        title = rule.title.replace("``", "`")
        lines.append(f"| {rule.id} {title} | {traces} | {checks} | {tests} |")
    return "\n".join(lines) + "\n"


#: Traces pin the invariants of the running protocol (I1, configuration, is not among them),
#: and those of checkpoints (I18) and batch handlers (I22), which the guard core decides too.
_TRACEABLE = frozenset({*(f"I{n}" for n in range(2, 14)), "I18", "I22"})


def traced(root: Path = ROOT) -> frozenset[str]:
    """The ids of :data:`_TRACEABLE` that a file of ``proofs/traces/`` names (none while it
    is missing)."""
    folder = root / TRACES
    if not folder.is_dir():
        return frozenset()
    found: set[str] = set()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            found.update(re.findall(r"\bI[1-9][0-9]?\b", text))
    return frozenset(found & _TRACEABLE)


@dataclass(frozen=True)
class Row:
    """A guarantee with the backers that exist now."""

    guarantee: Guarantee
    model_check: bool
    traces: bool


def rows(root: Path = ROOT) -> list[Row]:
    """Every guarantee, the model check and the traces counted when they exist."""
    checked = (root / MODEL_CHECK).is_file()
    pinned = traced(root)
    return [Row(g, checked and g.model_check, g.id in pinned) for g in GUARANTEES]


def _later_backers(row: Row, code: str) -> list[str]:
    texts = []
    if row.model_check:
        texts.append(f"the model check ({code}{MODEL_CHECK}{code})")
    if row.traces:
        texts.append(f"the conformance traces ({code}{TRACES}/{code})")
    return texts


def _note(text: str, note: str) -> str:
    return f"{text} ({note})" if note else text


def _tests_text(tests: Tests, code: str, prefix: str = "") -> str:
    details = [f"{code}{name}{code}" for name in tests.names]
    if tests.note:
        details.append(tests.note)
    return _note(f"{code}{prefix}{tests.file}{code}", "; ".join(details))


def render_markdown(root: Path = ROOT) -> str:
    """The README's table (GitHub Markdown)."""
    lines = [
        "| invariant | proofs | tests and property checks |",
        "| --- | --- | --- |",
    ]
    for row in rows(root):
        g = row.guarantee
        proofs = [_note(p.label, p.note) for p in g.proofs] + _later_backers(row, "`")
        tests = "; ".join(_tests_text(t, "`") for t in g.tests) or "—"
        title = g.title.replace("``", "`")
        lines.append(f"| {g.id} {title} | {', '.join(proofs) or '—'} | {tests} |")
    return "\n".join(lines) + "\n"


def render_rst(root: Path = ROOT) -> str:
    """The docs' table (reStructuredText), one row per guarantee."""
    out = [
        ".. list-table:: What you can rely on, and what backs it",
        "   :header-rows: 1",
        "   :widths: 8 52 40",
        "",
        "   * - id",
        "     - what you can rely on",
        "     - backed by",
    ]
    for row in rows(root):
        g = row.guarantee
        out.append(f"   * - {g.id}")
        out.append(f"     - {g.statement}")
        backers = [
            _note(f"z3 proof ``{p.function}`` in ``proofs/timing.py``", p.note) for p in g.proofs
        ]
        backers += _later_backers(row, "``")
        backers += [_tests_text(t, "``", "tests/") for t in g.tests]
        out.append(f"     - * {backers[0]}")
        out.extend(f"       * {b}" for b in backers[1:])
    return "\n".join(out) + "\n"


#: The README's sections that hold the tables: each table is its section's only block of
#: ``|`` lines.
README_SECTION = "## Every invariant and what backs it"
RULES_SECTION = "## Every rule and what backs it"


def table_span(lines: Sequence[str], section: str = README_SECTION) -> tuple[int, int]:
    """Where a README table is: ``lines[start:end]`` (ValueError when it is missing)."""
    start = list(lines).index(section)
    while not lines[start].startswith("|"):
        start += 1
        if start == len(lines) or lines[start].startswith("## "):
            raise ValueError("no table under " + section)
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return start, end


def readme_table(text: str, section: str = README_SECTION) -> str:
    """The table now in the README's text."""
    lines = text.splitlines()
    start, end = table_span(lines, section)
    return "\n".join(lines[start:end]) + "\n"


def with_table(text: str, table: str, section: str = README_SECTION) -> str:
    """The README's text with its table replaced by ``table``."""
    lines = text.splitlines()
    start, end = table_span(lines, section)
    return "\n".join([*lines[:start], *table.splitlines(), *lines[end:]]) + "\n"


# -- the mutants session's section (nox -s mutants, docs/testing.rst) ----------------------

#: The README's section on mutation testing: written whole from the two files of
#: proofs/mutants/ (the last run's numbers, and the survivors listed as equivalent).
MUTANTS_SECTION = "## Mutation testing, `nox -s mutants`"
MUTANTS = "proofs/mutants"


def _cell(text: str) -> str:
    return "`" + text.replace("|", "\\|") + "`" if text else "(nothing)"


def _last_run_text(run: dict[str, object]) -> str:
    minutes = round(float(str(run["seconds"])) / 60)
    retest = run.get("retest_seconds")
    again = (
        f", then its survivors re-tested with the tests as they are now ({round(float(str(retest)) / 60)} minutes)"
        if retest is not None
        else ""
    )
    return (
        f"Last run ({run['date']}, {run['tool']}, two test processes on a shared 2-core "
        f"machine: a full run in about {minutes} minutes{again}): {run['total']} mutants of "
        f"`{run['mutated']}`, {run['killed']} killed, {run['timeout']} timed out, "
        f"{run['survived']} survived, of which {run['equivalent']} are listed below as "
        f"equivalent and {run['unexplained']} are unexplained; score "
        f"{float(str(run['score'])):.1%} (mutants caught by a test or a proof, over all "
        "mutants but the equivalent ones)."
    )


def render_mutants(root: Path = ROOT) -> str:
    """The README's mutation-testing section (GitHub Markdown), heading included."""
    last = root / MUTANTS / "last-run.json"
    run = json.loads(last.read_text("utf-8")) if last.exists() else None
    listed = root / MUTANTS / "equivalent.toml"
    entries = (
        tomllib.loads(listed.read_text("utf-8")).get("equivalent", []) if listed.exists() else []
    )
    lines = [
        MUTANTS_SECTION,
        "",
        "`nox -s mutants` (or `python proofs/mutants/run.py` in the dev environment) runs mutmut",
        "over `trioqueue/_core/`, with the database-free unit tests and the pieces of `run.py`",
        "(`test_proofs.py`) as the test command, and fails on a survivor that is neither killed",
        "nor listed as equivalent in `mutants/equivalent.toml`; docs/testing.rst says how to",
        "read its report. `python proofs/backers.py --write` writes this section from",
        "`mutants/last-run.json` and `mutants/equivalent.toml`.",
        "",
        _last_run_text(run) if run else "No run recorded yet.",
        "",
        "Equivalent survivors: no test can tell them from the code, for the reason given.",
        "",
        "| file | function | line | mutated to | why no test can kill it |",
        "| --- | --- | --- | --- | --- |",
    ]
    for e in entries:
        file = str(e["file"]).removeprefix("trioqueue/")
        cells = [_cell(file), _cell(e["function"]), _cell(e["was"]), _cell(e["now"]), e["reason"]]
        lines.append("| " + " | ".join(cells) + " |")
    if not entries:
        lines.append("| — | — | — | — | none listed |")
    return "\n".join(lines) + "\n"


def mutants_span(lines: Sequence[str]) -> tuple[int, int]:
    """Where the README's mutation-testing section is, heading to the next heading (or the
    end); ``(len, len)`` when it has none yet, so that writing it appends it."""
    if MUTANTS_SECTION not in lines:
        return len(lines), len(lines)
    start = list(lines).index(MUTANTS_SECTION)
    end = start + 1
    while end < len(lines) and not lines[end].startswith("## "):
        end += 1
    return start, end


def readme_mutants(text: str) -> str:
    """The mutation-testing section now in the README's text (empty when it has none)."""
    lines = text.splitlines()
    start, end = mutants_span(lines)
    kept = "\n".join(lines[start:end]).rstrip("\n")
    return kept + "\n" if kept else ""


def with_mutants(text: str, section: str) -> str:
    """The README's text with its mutation-testing section replaced by ``section``."""
    lines = text.splitlines()
    start, end = mutants_span(lines)
    before, after = lines[:start], lines[end:]
    gap = [""] if before and before[-1] else []
    body = [*before, *gap, *section.splitlines(), *([""] if after else []), *after]
    return "\n".join(body).rstrip("\n") + "\n"


def main(argv: Iterable[str]) -> int:
    """Print the Markdown tables; with ``--write``, put them and the mutation-testing
    section into proofs/README.md."""
    if "--write" in list(argv):
        readme = ROOT / "proofs" / "README.md"
        text = readme.read_text(encoding="utf-8")
        text = with_table(text, render_markdown())
        text = with_table(text, render_rules_markdown(), RULES_SECTION)
        text = with_mutants(text, render_mutants())
        readme.write_text(text, encoding="utf-8")
    else:
        print(render_markdown(), end="")
        print()
        print(render_rules_markdown(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
