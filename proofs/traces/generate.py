"""Write the conformance traces of proofs/traces/ from the reference core.

Each named scenario below is a script played through :class:`trioqueue.testing.traces.Recorder`
(the real guard core in the runtime's order of calls); its trace is written as
``<name>.json``. The ``drawn-*.json`` traces were drawn by hypothesis and shrunk
(``--draw``); a plain run re-records them from their own inputs, so every file here is what
the current core decides. ``tests/unit/test_traces.py`` checks that a plain run reproduces
every file byte for byte.

    python proofs/traces/generate.py            # rewrite every trace
    python proofs/traces/generate.py --check    # exit 1 if any file would change
    python proofs/traces/generate.py --draw [NAME ...]  # draw and shrink drawn-*.json anew

Times are sums of multiples of 1/8 s, so every number in a trace is exact in binary
floating point and a port can compare them exactly (docs/porting.rst, "Tolerances").
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from trioqueue._core.timing import Timing
from trioqueue.testing.traces import Json, Recorder, dumps, load, record, script_of, traces_in

HERE = Path(__file__).resolve().parent

V30_H10 = Timing(visibility_timeout=30.0, heartbeat_interval=10.0)


# -- script helpers -----------------------------------------------------------------------


def feed(r: Recorder, given: Json) -> None:
    """One input at its time, after the guard's wakes and the scope deadlines before it:
    a scenario never skips what the runtime would do meanwhile."""
    r.catch_up(given["at"])
    r.feed(given)


def claim(
    r: Recorder,
    job_ids: Sequence[int],
    *,
    at: float | None = None,
    sent: float | None = None,
    locked_after: float = 0.0,
    lease_until: float | None = None,
    attempt: int = 1,
    max_attempts: int = 3,
    batch_handler: bool = False,
) -> None:
    """A claim answered at ``at`` (now), sent at ``sent`` (``at``); each row leased by the
    database until ``V`` after its lock, unless ``lease_until`` (wall time) says otherwise.
    ``batch_handler``: the pool runs the batch in one batch handler call (§20)."""
    at = r.now if at is None else at
    sent = at if sent is None else sent
    if lease_until is None:
        lease_until = r.wall_offset + sent + locked_after + r.timing.visibility_timeout
    jobs = [
        {
            "job_id": job_id,
            "claim_seq": 1,
            "lease_until": lease_until,
            "locked_after": locked_after,
            "attempt": attempt,
            "max_attempts": max_attempts,
        }
        for job_id in job_ids
    ]
    given: Json = {"kind": "claim", "at": at, "claim_sent": sent, "jobs": jobs}
    if batch_handler:
        given["batch_handler"] = True
    feed(r, given)


def answer(r: Recorder, at: float, verdict: str = "extended", **per_job: str) -> None:
    """The current renewal answers at ``at``: ``verdict`` for each job it carries, or the
    one named as ``job<id>=...``."""
    current = r.current()
    assert current is not None, f"no renewal is out at {at}"
    verdicts = [
        [item.job_id, per_job.get(f"job{item.job_id}", verdict)]
        for item in sorted(current.items, key=lambda item: item.job_id)
    ]
    feed(r, {"kind": "answer", "at": at, "token": current.token, "verdicts": verdicts})


def fail(r: Recorder, at: float | None = None, how: str = "error") -> None:
    """The current renewal raises at ``at``, or times out at its give-up time."""
    current = r.current()
    assert current is not None, "no renewal is out"
    when = current.give_up_at if at is None else at
    feed(r, {"kind": "fail", "at": when, "token": current.token, "how": how})


def sleep(r: Recorder, until: float) -> None:
    r.feed({"kind": "sleep", "until": until})


def exit_(
    r: Recorder, job_id: int, at: float, error: str | None = None, snooze: float | None = None
) -> None:
    given: Json = {"kind": "handler_exit", "at": at, "job_id": job_id, "error": error}
    if snooze is not None:  # only then: the traces of handlers that never snooze stay as they were
        given["snooze"] = snooze
    feed(r, given)


def checkpoint(r: Recorder, job_id: int, at: float, text: str) -> None:
    feed(r, {"kind": "checkpoint", "at": at, "job_id": job_id, "value": text})


def batch_exit(r: Recorder, batch_id: int, at: float, answer: Json) -> None:
    feed(r, {"kind": "batch_exit", "at": at, "batch_id": batch_id, "answer": answer})


def beats(r: Recorder, until: float, lag: float = 0.25) -> None:
    """Sleep to ``until``, each renewal answered ``extended`` ``lag`` after it is sent."""
    while True:
        wake = r.core.next_wake(r.now)
        if wake > until:
            break
        sleep(r, wake)
        if r.current() is not None:
            answer(r, r.now + lag)
    r.catch_up(until)


# -- the scenarios of docs/protocol.rst and docs/usage.rst ---------------------------------


def healthy_renewals(r: Recorder) -> None:
    """One job, renewed on the pool's beat every H = 10 s; each answer moves the fence to
    sent_at + V. The handler succeeds; after it, nothing is renewed."""
    claim(r, [1])
    answer(r, 0.5)
    beats(r, 32.0, lag=0.5)
    exit_(r, 1, 33.0)
    sleep(r, 45.0)


def first_renewal_at_once(r: Recorder) -> None:
    """A claimed batch's first renewal goes out at registration (I10); a batch claimed while
    a renewal is out goes as soon as the slot is free, then joins the shared beat."""
    claim(r, [1])
    claim(r, [2], at=0.25)
    answer(r, 0.5)
    answer(r, 0.75)
    beats(r, 12.0)
    exit_(r, 1, 12.5)
    exit_(r, 2, 13.0)


def shared_statement(r: Recorder) -> None:
    """Three batches claimed at different moments share one renewal statement per beat
    (I10): the anchor of the beat is the first registration."""
    claim(r, [1])
    answer(r, 0.25)
    claim(r, [2, 3], at=3.0)
    answer(r, 3.25)
    claim(r, [4], at=6.0)
    answer(r, 6.25)
    beats(r, 24.0)
    for job_id, at in ((1, 24.5), (2, 25.0), (3, 25.5), (4, 26.0)):
        exit_(r, job_id, at)


def failed_renewal_retry(r: Recorder) -> None:
    """Failed renewals are retried after min(H, max(0.25 s, remaining / 2)): faster as the
    lease runs down. One that fails by its timeout gives up at sent + min(V, remaining)."""
    claim(r, [1])
    answer(r, 0.5)
    sleep(r, 10.0)
    fail(r, 10.5)
    sleep(r, r.core.next_wake(r.now))
    fail(r, r.now + 0.25)
    sleep(r, r.core.next_wake(r.now))
    answer(r, r.now + 0.25)
    exit_(r, 1, 27.0)


def lease_lost_fence(r: Recorder) -> None:
    """Every renewal fails: the local fence stops the handler when the lease runs out,
    without any answer from the database (I2, I3). The attempt writes nothing
    (unavailable), and the lost batch is renewed no more."""
    claim(r, [1])
    answer(r, 0.5)
    while r.now < 30.0:
        sleep(r, min(r.core.next_wake(r.now), 30.0))
        if r.current() is not None:
            fail(r, r.now + 0.125)
    sleep(r, 30.0)
    exit_(r, 1, 30.5)
    sleep(r, 45.0)


def wedged_renewal_abandoned(r: Recorder) -> None:
    """A renewal wedges: abandoned at its give-up time plus 0.25 s, and the next one goes
    on another connection. That one wedges too, and is not abandoned while the first is
    out: two connections at most (I5). The fences fire meanwhile; when the first call
    finally exits, the stuck second one is abandoned in its place."""
    claim(r, [1])
    answer(r, 0.5)
    sleep(r, 10.0)  # renewal 2 goes, and never answers
    claim(r, [2], at=12.0)
    # The fence of batch 1 fires at 30; renewal 2 is abandoned at 30.25, renewal 3 goes.
    exit_(r, 1, 30.5)
    exit_(r, 2, 44.0)  # renewal 3 is past its abandon time, but the ceiling holds
    token = r.abandoned_token()
    feed(r, {"kind": "fail", "at": 50.0, "token": token, "how": "error"})
    late = r.abandoned_token()
    feed(r, {"kind": "fail", "at": 55.0, "token": late, "how": "error"})


def late_answer_ignored(r: Recorder) -> None:
    """A renewal carrying two batches is abandoned; its answer, when it finally comes, is
    from a superseded token and changes nothing (I6), though its connection is back."""
    claim(r, [1])
    answer(r, 0.25)
    claim(r, [2], at=5.0)
    answer(r, 5.25)
    sleep(r, 30.25)  # renewal 3 (both batches) never answers: abandoned at 30.25
    exit_(r, 1, 30.5)
    sleep(r, r.core.next_wake(r.now))  # batch 2 is retried on another connection
    answer(r, r.now + 0.25)
    stale = r.issued_tokens()[2]
    feed(
        r,
        {
            "kind": "answer",
            "at": 34.0,
            "token": stale,
            "verdicts": [[1, "extended"], [2, "extended"]],
        },
    )
    exit_(r, 2, 40.0)


def gone_seen_twice(r: Recorder) -> None:
    """A first ``gone`` may be this worker's own ack racing the renewal: it is believed
    only when the next renewal, 0.25 s later, says it again. Then the job stops, and
    nothing is written."""
    claim(r, [1])
    answer(r, 0.5)
    sleep(r, 10.0)
    answer(r, 10.25, "gone")
    sleep(r, r.core.next_wake(r.now))
    answer(r, r.now + 0.25, "gone")
    exit_(r, 1, 11.0)


def reclaimed(r: Recorder) -> None:
    """One job of a batch of two is reclaimed (its claim_seq moved on): it alone stops and
    writes nothing; its sibling keeps its lease and is renewed alone."""
    claim(r, [1, 2])
    answer(r, 0.5, job2="reclaimed")
    exit_(r, 2, 1.0)
    beats(r, 12.0)
    exit_(r, 1, 12.0)


def unchanged_and_partial(r: Recorder) -> None:
    """A job whose row was locked by someone else is skipped (``unchanged``), and a job an
    answer leaves out counts the same: the batch's fence does not move, and the batch is
    retried at the failed-renewal pace. A later full answer renews it."""
    claim(r, [1, 2])
    answer(r, 0.5)
    sleep(r, 10.0)
    answer(r, 10.25, job2="unchanged")
    sleep(r, r.core.next_wake(r.now))
    current = r.current()
    assert current is not None
    feed(
        r,
        {
            "kind": "answer",
            "at": r.now + 0.25,
            "token": current.token,
            "verdicts": [[1, "extended"]],
        },
    )
    sleep(r, r.core.next_wake(r.now))
    answer(r, r.now + 0.25)
    exit_(r, 1, 28.0)
    exit_(r, 2, 28.5)


def cancel_directive(r: Recorder) -> None:
    """A renewal says ``cancel_requested``: the lease is extended, the handler is cancelled,
    and the attempt fails for good (never retried)."""
    claim(r, [1])
    answer(r, 0.5)
    sleep(r, 10.0)
    answer(r, 10.25, "cancel_requested")
    exit_(r, 1, 11.0)


def cancel_notice(r: Recorder) -> None:
    """A cancel notice renews the job's batch at once, to fetch the directive; a notice
    that arrives while a renewal is out is remembered, and renewed right after it."""
    claim(r, [1])
    answer(r, 0.5)
    feed(r, {"kind": "cancel_notice", "at": 4.0, "job_id": 1})
    answer(r, 4.25, "cancel_requested")
    exit_(r, 1, 5.0)
    claim(r, [2], at=6.0)
    feed(r, {"kind": "cancel_notice", "at": 6.25, "job_id": 2})  # renewal 3 is out
    answer(r, 6.5)
    answer(r, 6.75, "cancel_requested")
    exit_(r, 2, 7.0)


def progress_on_renewals(r: Recorder) -> None:
    """Progress reports ride on the next renewal (I11): no statement of their own."""
    claim(r, [1])
    answer(r, 0.5)
    feed(r, {"kind": "progress", "at": 3.0, "job_id": 1, "value": 0.25})
    beats(r, 12.0)
    feed(r, {"kind": "progress", "at": 12.0, "job_id": 1, "value": 0.5})
    feed(r, {"kind": "progress", "at": 15.0, "job_id": 1, "value": 0.75})
    beats(r, 21.0)
    exit_(r, 1, 21.0)


def progress_out_of_range(r: Recorder) -> None:
    """Only finite numbers in [0, 1] count as progress; anything else is ignored and the
    latest valid value rides on (I11)."""
    claim(r, [1])
    answer(r, 0.5)
    values: list[Any] = [0.5, 1.5, -0.25, {"float": "nan"}, {"float": "inf"}, True, "half", None]
    for index, value in enumerate(values):
        feed(r, {"kind": "progress", "at": 1.0 + index / 2, "job_id": 1, "value": value})
    beats(r, 11.0)  # renewal 2 carries 0.5
    feed(r, {"kind": "progress", "at": 12.0, "job_id": 1, "value": 1})  # an int counts
    beats(r, 22.0)
    exit_(r, 1, 22.0)


def max_job_duration(r: Recorder) -> None:
    """The claim hooks and the handler run past max_job_duration (15 s here): the scope
    stops them at registration + D (I4), and the attempt is a charged failure, retried."""
    claim(r, [1])
    answer(r, 0.5)
    beats(r, 15.0)
    exit_(r, 1, 15.5)


def max_job_duration_last_attempt(r: Recorder) -> None:
    """As max-job-duration, on the job's last attempt: the charged failure is final."""
    claim(r, [1], attempt=3, max_attempts=3)
    answer(r, 0.5)
    beats(r, 15.0)
    exit_(r, 1, 15.125)


def shutdown_release(r: Recorder) -> None:
    """Shutdown with a 5 s grace: every scope's deadline becomes at most now + 5; a handler
    stopped by it gives its job back uncharged (release)."""
    claim(r, [1])
    answer(r, 0.5)
    beats(r, 12.0)
    feed(r, {"kind": "shutdown", "at": 12.0, "grace": 5.0})
    beats(r, 17.0)
    exit_(r, 1, 17.25)


def stopped_batch_keeps_lease(r: Recorder) -> None:
    """§4: a batch stopped by max_job_duration (15 s) whose handler is still unwinding (a
    shielded ``finally``) keeps its lease: it is renewed until the handler exits. Its stop
    was frozen at 15 s and decides the outcome."""
    claim(r, [1])
    answer(r, 0.5)
    beats(r, 33.0)
    exit_(r, 1, 33.0)
    sleep(r, 45.0)


def expired_at_registration(r: Recorder) -> None:
    """I7: a claim whose rows' lease already ran out is refused at registration; no handler
    runs, the hooks say claimed then unavailable."""
    claim(r, [1, 2], at=5.0, sent=0.0, lease_until=r.wall_offset + 3.0)
    sleep(r, 10.0)


def claim_delayed_by_locks(r: Recorder) -> None:
    """§1: a claim that waited 40 s on a row lock (longer than V) still delivers a live
    lease, because the lease counts from the lock (``locked_after``), and so does the
    fence. Counted from the send, it would be expired."""
    claim(r, [1], at=40.5, sent=0.0, locked_after=40.0)
    answer(r, 40.75)
    beats(r, 52.0)
    exit_(r, 1, 52.0)


def cancels_across_batches(r: Recorder) -> None:
    """One renewal carries batches 1 and 8 (batches 2 to 7 arrive expired), and its answer
    cancels one job in each and reclaims the others. Cancels and stops are delivered in
    order of batch id, then job id (docs/protocol.rst §10, refinement 13), whatever order
    the jobs were claimed in and however a set of batch ids would iterate."""
    claim(r, [2, 1])
    answer(r, 0.25)
    for job_id in range(3, 9):  # batches 2 to 7: expired on arrival, never registered
        claim(r, [job_id], at=0.5, sent=0.0, lease_until=r.wall_offset + 0.25)
    claim(r, [11, 10, 9], at=1.0)
    answer(r, 1.25)
    sleep(r, 10.0)  # the beat: one renewal carries both batches
    answer(r, 10.25, "reclaimed", job1="cancel_requested", job10="cancel_requested")
    for job_id, at in ((1, 11.0), (2, 11.0), (9, 11.5), (10, 11.5), (11, 11.5)):
        exit_(r, job_id, at)


def handler_errors(r: Recorder) -> None:
    """A handler's error is the attempt's message: a charged failure, retried while
    attempts remain (job 2), final on the last attempt (job 3). A cancelled handler that
    raised fails for good, its message "cancelled: cancel requested (<error>)" (job 1)
    (docs/protocol.rst §10, refinement 14)."""
    claim(r, [1, 2])
    claim(r, [3], at=0.25, attempt=3, max_attempts=3)
    answer(r, 0.5)
    answer(r, 0.75)
    sleep(r, 10.0)
    answer(r, 10.25, job1="cancel_requested")
    exit_(r, 1, 11.0, error="ValueError: boom")
    exit_(r, 2, 11.5, error="KeyError: 'row'")
    exit_(r, 3, 12.0, error="RuntimeError: still broken")


def handler_snoozes(r: Recorder) -> None:
    """A handler that answers ``Snooze(seconds)`` snoozes: the outcome ``snooze``, the
    attempt not charged, no hook (job 1, whose attempt is its last: a snooze is never a
    failure). A snooze beside an error is that error's charged failure (job 2), and a stop
    decides before a snooze: a cancel asked fails the job for good (job 3)
    (docs/protocol.rst §17)."""
    claim(r, [1], attempt=3, max_attempts=3)
    claim(r, [2, 3], at=0.25)
    answer(r, 0.5)
    answer(r, 0.75)
    sleep(r, 10.0)
    answer(r, 10.25, job3="cancel_requested")
    exit_(r, 1, 11.0, snooze=5.0)
    exit_(r, 2, 11.5, error="ExceptionGroup: both (2 sub-exceptions)", snooze=5.0)
    exit_(r, 3, 12.0, snooze=0.0)


def max_job_duration_message(r: Recorder) -> None:
    """max_job_duration is 2.0000002 s: the message formats it as C's printf("%g"), six
    significant digits and no trailing zeros, so it says "2s", not "2.0000002s"
    (docs/protocol.rst §10, refinement 15)."""
    claim(r, [1])
    answer(r, 0.5)
    sleep(r, 2.125)
    exit_(r, 1, 2.25)


def _fail_until_last_chance(r: Recorder, fence: float) -> None:
    """Every renewal fails 0.125 s after it is sent, until one goes out so close to the
    fence that its give-up time lies past it (at most 0.25 s past, docs/protocol.rst §6)."""
    while True:
        sleep(r, r.core.next_wake(r.now))
        current = r.current()
        assert current is not None, f"no renewal at {r.now}"
        if current.give_up_at > fence:
            return
        fail(r, r.now + 0.125)


def in_flight_rescue(r: Recorder) -> None:
    """§3, a renewal in flight: renewals keep failing until one goes out 0.13 s before the
    fence (30 s), with its give-up time at 30.12 s. The scope waits for it; its answer at
    30.06 s, after the old lease ran out but before the give-up time, is in time: expiry
    is judged while the renewal still counts as in flight, so it extends the fence to
    sent + V and the handler goes on (docs/protocol.rst §10, refinement 17)."""
    claim(r, [1])
    answer(r, 0.5)
    _fail_until_last_chance(r, 30.0)
    answer(r, 30.0625)
    beats(r, 45.0)
    exit_(r, 1, 45.0)


def failure_past_fence(r: Recorder) -> None:
    """As in-flight-rescue, but the last renewal fails at 30.06 s, past the lease deadline
    and before its give-up time: the scope, which waited for the give-up time, moves back
    to the fence (30 s) and fires at once, in the same step; the lease is lost, nothing is
    renewed any more, and the attempt writes nothing (docs/protocol.rst §10, refinements
    16 and 18)."""
    claim(r, [1])
    answer(r, 0.5)
    _fail_until_last_chance(r, 30.0)
    fail(r, 30.0625)
    exit_(r, 1, 30.5)
    sleep(r, 40.0)


def abandoned_past_fence(r: Recorder) -> None:
    """One renewal carries batch 1 (fence 40 s) and batch 2 (fence 42 s) and wedges: it
    gives up at 40 s, when batch 1's scope fires, and is abandoned at 40.25 s. The
    abandonment counts as a failed renewal: batch 2 is retried after
    min(H, max(0.25, remaining / 2)) = 0.875 s, on another connection, and renewed; batch
    1 is lost. The wedged call's answer, when it comes, changes nothing (I6)
    (docs/protocol.rst §10, refinement 22)."""
    claim(r, [1])
    answer(r, 0.25)
    beats(r, 12.0)
    claim(r, [2], at=12.0)
    answer(r, 12.25)
    sleep(r, 20.0)  # the beat: one renewal carries both batches, and never answers
    sleep(r, r.core.next_wake(r.now))  # abandoned at its give-up time plus 0.25 s
    sleep(r, r.core.next_wake(r.now))  # batch 2's retry, on another connection
    answer(r, r.now + 0.25)
    stale = r.issued_tokens()[-2]
    feed(
        r,
        {"kind": "answer", "at": 44.0, "token": stale, "verdicts": [[1, "extended"]]},
    )
    exit_(r, 1, 44.5)
    exit_(r, 2, 46.0)


def cancel_then_reclaimed(r: Recorder) -> None:
    """Job 1 is cancelled at 10 s, and its handler unwinds under a shield, still renewed.
    At 20 s its row is reclaimed: reclaimed replaces the earlier cancel, the stop is
    delivered (the batch itself is not stopped), and the attempt ends unavailable, not
    failed: the failure could not be written, another attempt owns the row
    (docs/protocol.rst §10, refinement 19). Its sibling, job 2, succeeds."""
    claim(r, [1, 2])
    answer(r, 0.5)
    sleep(r, 10.0)
    answer(r, 10.25, job1="cancel_requested")
    sleep(r, 20.0)
    answer(r, 20.25, job1="reclaimed")
    exit_(r, 1, 20.5)
    exit_(r, 2, 21.0)


def batch_of_one_stopped(r: Recorder) -> None:
    """Batch 1 is one job, batch 2 two jobs; D = 15 s. At 10 s job 1 and job 2 are
    cancelled and unwind under a shield. In a batch of one the job's scope is the batch's,
    so the cancel cancels batch 1's scope and its duration deadline (15 s) never fires; batch
    2's scope fires at its own (15.25 s), and its job 3 ends by max_job_duration (docs/protocol.rst §10,
    refinement 20)."""
    claim(r, [1])
    claim(r, [2, 3], at=0.25)
    answer(r, 0.5)
    answer(r, 0.75)
    sleep(r, 10.0)
    answer(r, 10.25, job1="cancel_requested", job2="cancel_requested")
    beats(r, 16.0)
    for job_id in (1, 2, 3):
        exit_(r, job_id, 16.0)


def gone_reset_by_another_verdict(r: Recorder) -> None:
    """A first ``gone`` is not believed; any other verdict for the job in an answer that is
    taken (``unchanged`` here, or the job left out) resets the count, so the ``gone`` after
    it is a first sighting again, and only the next one in a row stops the job
    (docs/protocol.rst §2, "Why gone needs two sightings")."""
    claim(r, [1])
    answer(r, 0.5)
    sleep(r, 10.0)
    answer(r, 10.25, "gone")
    sleep(r, r.core.next_wake(r.now))
    answer(r, r.now + 0.25, "unchanged")
    sleep(r, r.core.next_wake(r.now))
    answer(r, r.now + 0.125, "gone")
    sleep(r, r.core.next_wake(r.now))
    answer(r, r.now + 0.25, "gone")
    exit_(r, 1, r.now + 0.5)


def gone_across_a_failure(r: Recorder) -> None:
    """A failed renewal between two ``gone`` answers does not reset the count: the
    ``gone`` of the retry, seconds later, is the second sighting in a row and stops the
    job. The confirming renewal is due 0.25 s after the first sighting; that is its
    pace, not a deadline (docs/protocol.rst §2, "Why gone needs two sightings")."""
    claim(r, [1])
    answer(r, 0.5)
    sleep(r, 10.0)
    answer(r, 10.25, "gone")
    sleep(r, r.core.next_wake(r.now))
    fail(r, r.now + 0.25)
    sleep(r, r.core.next_wake(r.now))
    answer(r, r.now + 0.125, "gone")
    exit_(r, 1, r.now + 0.5)


def shutdown_twice(r: Recorder) -> None:
    """Each shutdown makes every scope's deadline at most ``now + grace``, and a later one
    never extends it: a grace of 20 s at 1 s, then 1 s at 2 s, stops the handler at 3 s;
    a third of 20 s at 2.5 s changes nothing (docs/protocol.rst §4)."""
    claim(r, [1])
    answer(r, 0.5)
    feed(r, {"kind": "shutdown", "at": 1.0, "grace": 20.0})
    feed(r, {"kind": "shutdown", "at": 2.0, "grace": 1.0})
    feed(r, {"kind": "shutdown", "at": 2.5, "grace": 20.0})
    sleep(r, 3.0)
    exit_(r, 1, 3.5)


def fence_never_moves_back(r: Recorder) -> None:
    """The fence after an extending answer is ``max(fence, sent + V)``: here the claim's
    lease began 1 s after it was sent (``locked_after``), so its fence (31 s) is later than
    the first renewal's ``sent + V`` (30 s), and stays (docs/protocol.rst §3, "After a
    renewal")."""
    claim(r, [1], locked_after=1.0)
    answer(r, 0.5)
    sleep(r, 10.0)
    answer(r, 10.25)
    exit_(r, 1, 11.0)


def verdicts_of_exited_jobs(r: Recorder) -> None:
    """Job 2's handler exits while a renewal carrying it is out: the answer's verdict for it
    (``unchanged``, then ``cancel_requested``) changes nothing, and the batch extends on job
    1's ``extended`` alone. After job 1 exits too, nothing is left to renew
    (docs/protocol.rst §2, "Which verdicts count")."""
    claim(r, [1, 2])
    answer(r, 0.5)
    sleep(r, 10.0)
    exit_(r, 2, 10.125)
    answer(r, 10.25, job2="unchanged")
    sleep(r, 20.0)
    answer(r, 20.25)
    exit_(r, 1, 21.0)


def cancel_notice_answers(r: Recorder) -> None:
    """What a cancel notice answers (``requested``): yes for a job of a registered batch,
    whatever its state (its handler exited, job 2; its row reclaimed, job 3), and the
    batch is then due at once; no for a job never claimed (99) or of a batch refused at
    registration (job 7) (docs/protocol.rst §5, "Cancellation")."""
    claim(r, [1, 2, 3])
    answer(r, 0.5)
    exit_(r, 2, 1.0)
    feed(r, {"kind": "cancel_notice", "at": 2.0, "job_id": 2})
    answer(r, 2.25, job3="reclaimed")
    feed(r, {"kind": "cancel_notice", "at": 3.0, "job_id": 3})
    answer(r, 3.25)
    feed(r, {"kind": "cancel_notice", "at": 4.0, "job_id": 99})
    claim(r, [7], at=5.0, sent=0.0, lease_until=r.wall_offset + 4.0)
    feed(r, {"kind": "cancel_notice", "at": 6.0, "job_id": 7})
    exit_(r, 3, 6.5)
    exit_(r, 1, 7.0)


def refused_at_the_fence(r: Recorder) -> None:
    """A batch is refused when its fence at registration is at or before now: a row leased
    until exactly the registration's wall time is refused (I7), one leased 1/8 s longer is
    taken (docs/protocol.rst §4, "A batch that arrives expired")."""
    claim(r, [1], at=5.0, sent=0.0, lease_until=r.wall_offset + 5.0)
    claim(r, [2], at=5.0, sent=0.0, lease_until=r.wall_offset + 5.125)
    fail(r, 5.125)
    exit_(r, 2, 5.25)


def duration_during_in_flight_wait(r: Recorder) -> None:
    """The lease deadline (30 s) passes while a renewal carrying the batch is in flight, so
    the fence waits for its give-up time (30.12 s); max_job_duration (30.0625 s) passes
    during that wait and fires the scope first. When the renewal then fails, at 30.09 s,
    the lease is lost, but the stop stays the first deadline of the scope to pass: the
    duration, a retried failure, not an unavailable attempt (docs/protocol.rst §10,
    refinements 3 and 16)."""
    claim(r, [1])
    answer(r, 0.5)
    _fail_until_last_chance(r, 30.0)
    fail(r, 30.09375)
    exit_(r, 1, 30.5)


def progress_while_unwinding(r: Recorder) -> None:
    """Progress belongs to the running handler: job 2's row is reclaimed, but its handler
    still runs, and the values it reports are kept (they ride on no renewal, as the job is
    renewed no more) (docs/protocol.rst §5, "Progress")."""
    claim(r, [1, 2])
    answer(r, 0.5)
    feed(r, {"kind": "progress", "at": 1.0, "job_id": 2, "value": 0.25})
    sleep(r, 10.0)
    answer(r, 10.25, job2="reclaimed")
    feed(r, {"kind": "progress", "at": 11.0, "job_id": 2, "value": 0.75})
    sleep(r, 20.0)
    answer(r, 20.25)
    exit_(r, 2, 21.0)
    exit_(r, 1, 21.0)


def checkpoint_sent_once(r: Recorder) -> None:
    """A checkpoint rides on the next renewal, once (docs/protocol.rst §16, I18): the
    renewal at 10 carries page 1 and is extended, so the database holds it and the renewal
    at 20 carries none, nor does the same value set again at 13. Page 2 rides on the
    renewal at 30, which fails: it may or may not have been stored, so the next renewal
    sends it again; once that one is extended, the renewal at 50 carries none. The attempt's
    final write (the success at 52) carries the latest checkpoint, page 2."""
    claim(r, [1])
    answer(r, 0.5)
    checkpoint(r, 1, 2.0, '{"page": 1}')
    beats(r, 12.0)
    checkpoint(r, 1, 13.0, '{"page": 1}')  # what the database holds already
    beats(r, 22.0)
    checkpoint(r, 1, 24.0, '{"page": 2}')
    sleep(r, 30.0)
    fail(r, 30.5)
    sleep(r, r.core.next_wake(r.now))
    answer(r, r.now + 0.25)
    beats(r, 52.0)
    exit_(r, 1, 52.0)


def batch_handler_outcomes(r: Recorder) -> None:
    """Batches run by a batch handler (docs/protocol.rst §20, I22): one call per batch
    under the batch's scope, one outcome per job. Batch 1: job 2's cancel directive does
    not cancel the call, and job 2 ends as a cancellation although the answer says
    succeeded; job 1 succeeds, job 3 retries after the 7.5 s the handler asks, job 4, left
    out of the answer, is a charged failure. Batch 2: an answer of the wrong length is
    unusable, so both jobs fail, charged, with the reason. Batch 3: once both its jobs
    are cancelled, the call is cancelled, and unwinds with no answer. Batch 4, on its last
    attempt: the call raises, and every job fails for good with its error."""
    claim(r, [1, 2, 3, 4], batch_handler=True)
    claim(r, [5, 6], at=0.25, batch_handler=True)
    claim(r, [7, 8], at=0.375, batch_handler=True)
    claim(r, [9, 10], at=0.5, attempt=3, max_attempts=3, batch_handler=True)
    answer(r, 0.75)  # batch 1's first renewal
    answer(r, 1.0)  # the first renewal of batches 2 to 4, claimed while it was out
    sleep(r, 10.0)
    answer(r, 10.25, job2="cancel_requested", job7="cancel_requested", job8="cancel_requested")
    succeeded = {"kind": "succeeded"}
    by_id = [[1, succeeded], [2, succeeded], [3, {"kind": "retry", "delay": 7.5}]]
    batch_exit(r, 1, 12.0, {"by_id": by_id})
    batch_exit(r, 2, 12.5, {"in_order": [succeeded]})
    batch_exit(r, 3, 13.0, {"unwound": True})
    batch_exit(r, 4, 13.5, {"raised": "ValueError: upstream down"})


D15 = Timing(visibility_timeout=30.0, heartbeat_interval=10.0, max_job_duration=15.0)
#: A D whose message needs %g: six significant digits make it "2s" (refinement 15).
#: A D that passes while the fence waits for a renewal in flight (30 s to 30.12 s).
D30_0625 = Timing(visibility_timeout=30.0, heartbeat_interval=10.0, max_job_duration=30.0625)
D2_0000002 = Timing(visibility_timeout=30.0, heartbeat_interval=10.0, max_job_duration=2.0000002)

#: name → (timing, script). The description of each trace is its function's docstring.
SCENARIOS: dict[str, tuple[Timing, Callable[[Recorder], None]]] = {
    "healthy-renewals": (V30_H10, healthy_renewals),
    "first-renewal-at-once": (V30_H10, first_renewal_at_once),
    "shared-statement": (V30_H10, shared_statement),
    "failed-renewal-retry": (V30_H10, failed_renewal_retry),
    "lease-lost-fence": (V30_H10, lease_lost_fence),
    "wedged-renewal-abandoned": (V30_H10, wedged_renewal_abandoned),
    "late-answer-ignored": (V30_H10, late_answer_ignored),
    "gone-seen-twice": (V30_H10, gone_seen_twice),
    "reclaimed": (V30_H10, reclaimed),
    "unchanged-and-partial": (V30_H10, unchanged_and_partial),
    "cancel-directive": (V30_H10, cancel_directive),
    "cancel-notice": (V30_H10, cancel_notice),
    "progress-on-renewals": (V30_H10, progress_on_renewals),
    "progress-out-of-range": (V30_H10, progress_out_of_range),
    "max-job-duration": (D15, max_job_duration),
    "max-job-duration-last-attempt": (D15, max_job_duration_last_attempt),
    "shutdown-release": (V30_H10, shutdown_release),
    "stopped-batch-keeps-lease": (D15, stopped_batch_keeps_lease),
    "expired-at-registration": (V30_H10, expired_at_registration),
    "claim-delayed-by-locks": (V30_H10, claim_delayed_by_locks),
    "cancels-across-batches": (V30_H10, cancels_across_batches),
    "handler-errors": (V30_H10, handler_errors),
    "handler-snoozes": (V30_H10, handler_snoozes),
    "max-job-duration-message": (D2_0000002, max_job_duration_message),
    "in-flight-rescue": (V30_H10, in_flight_rescue),
    "failure-past-fence": (V30_H10, failure_past_fence),
    "abandoned-past-fence": (V30_H10, abandoned_past_fence),
    "cancel-then-reclaimed": (V30_H10, cancel_then_reclaimed),
    "batch-of-one-stopped": (D15, batch_of_one_stopped),
    "gone-reset-by-another-verdict": (V30_H10, gone_reset_by_another_verdict),
    "gone-across-a-failure": (V30_H10, gone_across_a_failure),
    "shutdown-twice": (V30_H10, shutdown_twice),
    "fence-never-moves-back": (V30_H10, fence_never_moves_back),
    "verdicts-of-exited-jobs": (V30_H10, verdicts_of_exited_jobs),
    "cancel-notice-answers": (V30_H10, cancel_notice_answers),
    "refused-at-the-fence": (V30_H10, refused_at_the_fence),
    "duration-during-in-flight-wait": (D30_0625, duration_during_in_flight_wait),
    "progress-while-unwinding": (V30_H10, progress_while_unwinding),
    "checkpoint-sent-once": (V30_H10, checkpoint_sent_once),
    "batch-handler-outcomes": (V30_H10, batch_handler_outcomes),
}


def scenario_trace(name: str) -> Json:
    timing, play = SCENARIOS[name]
    description = " ".join((play.__doc__ or "").split())
    recorder = Recorder(timing, name=name, description=description)
    play(recorder)
    return recorder.trace()


# -- drawn scripts --------------------------------------------------------------------------

#: The timings drawn scripts use: small, exact in binary.
DRAWN_TIMINGS = [
    Timing(visibility_timeout=4.0, heartbeat_interval=1.0),
    Timing(visibility_timeout=4.0, heartbeat_interval=2.0, max_job_duration=2.0),
]

VERDICT_NAMES = ["extended", "extended", "cancel_requested", "reclaimed", "gone", "unchanged"]
PROGRESS = st.sampled_from([0.0, 0.25, 1.0, 1.5, -0.5, True, "x", None, {"float": "nan"}])
CHECKPOINTS = st.sampled_from(['{"page": 1}', '{"page": 2}', "null"])
STEPS = st.sampled_from([0.0, 0.125, 0.25, 0.5, 1.0, 2.0, 4.5])


ANSWERED = st.sampled_from(
    [
        {"kind": "succeeded"},
        {"kind": "succeeded"},
        {"kind": "failed", "error": "ValueError: boom"},
        {"kind": "retry", "delay": 2.5},
        {"kind": "snooze", "seconds": 2.0},
        {"kind": "not_an_outcome"},
    ]
)


def batch_answer(draw: st.DrawFn, job_ids: list[int]) -> Json:
    """What a batch handler's call came to (schema.json, ``batch_exit``): mostly an answer
    for its jobs; sometimes one that leaves a job out, names no job of the batch or has the
    wrong length; or the call raised, unwound, or returned None. A plain function of
    ``draw`` (no composite of its own), so the corpus's seeded draw can answer it too."""
    form = draw(st.sampled_from(["by_id", "by_id", "in_order", "raised", "unwound", "none"]))
    if form == "raised":
        return {"raised": "RuntimeError: the call failed"}
    if form in ("unwound", "none"):
        return {form: True}
    kept = [job_id for job_id in job_ids if draw(st.sampled_from([True, True, True, False]))]
    if form == "by_id":
        keys = kept + ([999] if draw(st.sampled_from([False, False, False, True])) else [])
        return {"by_id": [[key, draw(ANSWERED)] for key in keys]}
    return {"in_order": [draw(ANSWERED) for _ in kept]}


@st.composite
def scripts(draw: st.DrawFn, max_inputs: int = 24) -> Json:
    """A script of inputs the runtime could see, drawn against the recorder's own state
    (so tokens and jobs named are ones it issued), times in eighths of a second."""
    timing = draw(st.sampled_from(DRAWN_TIMINGS))
    r = Recorder(timing, name="drawn", description="drawn by hypothesis")
    inputs: list[Json] = []
    next_job = 1

    def feed(given: Json) -> None:
        r.feed(given)
        inputs.append(given)

    for _ in range(draw(st.integers(1, max_inputs))):
        at = r.now + draw(STEPS)
        tokens = [t for t in (r.current_token(), r.abandoned_token()) if t is not None]
        running, own = r.running_jobs(), r.handler_jobs()
        calls = r.batch_calls()
        # Repeated entries weigh the draw: answers often, shutdown (which ends it all) rarely.
        options = ["claim", "claim", "sleep", "sleep", "wake"]
        options += ["answer"] * 4 + ["fail"] if tokens else []
        options += ["progress", "cancel_notice"] if running else []
        options += ["exit", "exit", "checkpoint"] if own else []
        options += ["batch_exit"] if calls else []
        options += ["stale"] if r.issued_tokens() else []
        options += ["shutdown"] if math_inf(r.core.shutdown_at) else []
        kind = draw(st.sampled_from(options))
        if kind == "claim":
            count = draw(st.integers(1, 2))
            lag = draw(st.sampled_from([0.0, 0.25, 1.0]))
            row = draw(st.sampled_from([timing.visibility_timeout, 0.5, -0.25]))
            jobs = [
                {
                    "job_id": next_job + i,
                    "claim_seq": draw(st.integers(1, 3)),
                    "lease_until": r.wall_offset + at - lag + row,
                    "locked_after": 0.0,
                    "attempt": draw(st.integers(1, 2)),
                    "max_attempts": 2,
                }
                for i in range(count)
            ]
            next_job += count
            claimed: Json = {"kind": "claim", "at": at, "claim_sent": at - lag, "jobs": jobs}
            if draw(st.sampled_from([False, False, True])):
                claimed["batch_handler"] = True
            feed(claimed)
        elif kind == "sleep":
            feed({"kind": "sleep", "until": at})
        elif kind == "wake":
            feed({"kind": "wake", "at": at})
        elif kind in ("answer", "fail"):
            token = draw(st.sampled_from(tokens))
            if kind == "fail":
                how = draw(st.sampled_from(["error", "timeout"]))
                feed({"kind": "fail", "at": at, "token": token, "how": how})
            else:
                jobs_named = r.claimed_jobs()
                verdicts = [
                    [job_id, draw(st.sampled_from(VERDICT_NAMES))]
                    for job_id in jobs_named
                    if draw(st.booleans())
                ]
                feed({"kind": "answer", "at": at, "token": token, "verdicts": verdicts})
        elif kind == "stale":
            token = draw(st.sampled_from(r.issued_tokens()))
            feed({"kind": "answer", "at": at, "token": token, "verdicts": []})
        elif kind == "exit":
            job_id = draw(st.sampled_from(own))
            # One draw for how the handler ended (a success, an error, a snooze of 2 s).
            ending = draw(st.sampled_from([None, "ValueError: boom", 2.0]))
            given: Json = {"kind": "handler_exit", "at": at, "job_id": job_id}
            if isinstance(ending, float):
                given |= {"error": None, "snooze": ending}
            else:
                given["error"] = ending
            feed(given)
        elif kind == "progress":
            job_id = draw(st.sampled_from(running))
            feed({"kind": "progress", "at": at, "job_id": job_id, "value": draw(PROGRESS)})
        elif kind == "batch_exit":
            batch_id = draw(st.sampled_from(sorted(calls)))
            answer = batch_answer(draw, calls[batch_id])
            feed({"kind": "batch_exit", "at": at, "batch_id": batch_id, "answer": answer})
        elif kind == "checkpoint":
            job_id = draw(st.sampled_from(own))
            feed({"kind": "checkpoint", "at": at, "job_id": job_id, "value": draw(CHECKPOINTS)})
        elif kind == "cancel_notice":
            feed({"kind": "cancel_notice", "at": at, "job_id": draw(st.sampled_from(running))})
        else:
            feed({"kind": "shutdown", "at": at, "grace": draw(st.sampled_from([0.0, 1.0, 4.0]))})
    return {
        "name": "drawn",
        "description": "drawn by hypothesis",
        "timing": {
            "visibility_timeout": timing.visibility_timeout,
            "heartbeat_interval": timing.heartbeat_interval,
            "max_job_duration": timing.max_job_duration,
        },
        "wall_offset": r.wall_offset,
        "inputs": inputs,
    }


def math_inf(value: float) -> bool:
    return value == float("inf")


def _decisions(trace: Json) -> Iterable[Json]:
    return (step["decisions"] for step in trace["steps"])


#: name → (what the drawn trace shows, a test of its trace). ``--draw`` asks hypothesis
#: for the smallest script whose trace passes the test.
DRAWN: dict[str, tuple[str, Callable[[Json], bool]]] = {
    "drawn-abandoned": (
        "the smallest drawn run in which a renewal is abandoned",
        lambda t: any(d["abandoned"] is not None for d in _decisions(t)),
    ),
    "drawn-two-connections": (
        "the smallest drawn run holding two connections at once (the ceiling, I5)",
        lambda t: any(d["connections_held"] == 2 for d in _decisions(t)),
    ),
    "drawn-job-stopped": (
        "the smallest drawn run in which a job's row is lost (reclaimed or gone) and its "
        "handler's outcome writes nothing",
        lambda t: any(
            (d["result"] or {}).get("outcome", {}).get("stop") in ("RECLAIMED", "GONE")
            for d in _decisions(t)
        ),
    ),
    "drawn-duration-retry": (
        "the smallest drawn run in which max_job_duration stops a handler",
        lambda t: any(
            (d["result"] or {}).get("outcome", {}).get("stop") == "DURATION" for d in _decisions(t)
        ),
    ),
}


class _Found(Exception):
    pass


def draw_trace(name: str) -> Json:
    """The smallest drawn script whose trace shows what ``DRAWN[name]`` asks for: a search
    that fails on it, so hypothesis shrinks it and plays the smallest one last."""
    from hypothesis import HealthCheck, Verbosity, given, settings

    description, wanted = DRAWN[name]
    found: list[Json] = []

    @settings(
        database=None,
        derandomize=True,
        max_examples=2000,
        verbosity=Verbosity.quiet,
        suppress_health_check=list(HealthCheck),
        deadline=None,
    )
    @given(scripts())
    def search(script: Json) -> None:
        if wanted(record(script)):
            found.append(script)
            raise _Found

    try:
        search()
    except _Found:
        return record({**found[-1], "name": name, "description": description})
    raise LookupError(f"no drawn script shows {description}")


# -- the files ------------------------------------------------------------------------------


def expected_files() -> dict[Path, str]:
    """Every trace file as the current core writes it."""
    files = {HERE / f"{name}.json": dumps(scenario_trace(name)) for name in SCENARIOS}
    for path in traces_in(HERE):
        if path.name.startswith("drawn-"):
            files[path] = dumps(record(script_of(load(path))))
    return files


def main(argv: Sequence[str]) -> int:
    if "--draw" in argv:
        for name in [a for a in argv if a in DRAWN] or DRAWN:
            (HERE / f"{name}.json").write_text(dumps(draw_trace(name)), encoding="utf-8")
    stale = []
    for path, text in expected_files().items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            stale.append(path.name)
            if "--check" not in argv:
                path.write_text(text, encoding="utf-8")
    if "--check" in argv and stale:
        print("would change:", ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
