"""Example tests for the sans-IO core (``trioqueue._core``) and config validation.

Each test pins one rule of docs/protocol.rst with concrete numbers; the property tests in
``test_core_guard_stateful.py`` explore the same state machine with random schedules.
No trio here: every call takes ``now`` and the clock is a plain float.
"""

from __future__ import annotations

import copy
import functools
import itertools
import math
from collections.abc import Iterable
from typing import Any

import pytest

from trioqueue._core.backoff import ExponentialBackoff
from trioqueue._core.fence import advanced_deadline, initial_deadline, local_row_deadline
from trioqueue._core.guard_rules import Effects, GuardCore, OneJob, Renewal
from trioqueue._core.outcome import Outcome, decide, decide_attempt
from trioqueue._core.progress import valid_progress
from trioqueue._core.rules import OutcomeKind, StopReason
from trioqueue._core.timing import (
    GRACE,
    MIN_RETRY,
    Timing,
    auto_heartbeat,
    renewal_timeout,
    retry_delay,
)
from trioqueue._core.wire import Verdict
from trioqueue._errors import ConfigError
from trioqueue._runtime.config import (
    MIN_INTERVAL,
    WorkerConfig,
    check,
    is_async_callable,
    problems_of,
)

V, H = 30.0, 10.0
EXT, CANCEL, RECLAIMED, GONE, UNCHANGED = (
    Verdict.EXTENDED,
    Verdict.CANCEL_REQUESTED,
    Verdict.RECLAIMED,
    Verdict.GONE,
    Verdict.UNCHANGED,
)


# -- helpers ----------------------------------------------------------------------------


def make_core(v: float = V, h: float = H, d: float | None = None) -> GuardCore:
    return GuardCore(Timing(visibility_timeout=v, heartbeat_interval=h, max_job_duration=d))


def register(
    core: GuardCore,
    batch_id: int,
    job_ids: Iterable[int],
    now: float,
    *,
    claim_sent: float | None = None,
    rows: list[float] | None = None,
) -> bool:
    """Register a batch; wall clock == local clock; rows default to ``claim_sent + V``."""
    job_ids = list(job_ids)
    sent = now if claim_sent is None else claim_sent
    if rows is None:
        rows = [sent + core.timing.visibility_timeout] * len(job_ids)
    return core.register(
        batch_id,
        [(job_id, 1) for job_id in job_ids],
        claim_sent=sent,
        now=now,
        wall_now=now,
        row_deadlines=rows,
    )


def renew(core: GuardCore, now: float) -> Renewal:
    renewal = core.next_renewal(now)
    assert renewal is not None, f"expected a renewal at {now}"
    return renewal


def all_of(renewal: Renewal, verdict: Verdict = EXT) -> dict[int, Verdict]:
    return {item.job_id: verdict for item in renewal.items}


def beat(core: GuardCore, now: float, verdicts: dict[int, Verdict] | None = None) -> Effects:
    """Send the due renewal at ``now`` and answer it at once."""
    renewal = renew(core, now)
    answer = all_of(renewal) if verdicts is None else verdicts
    return core.answered(renewal.token, now, answer)


def carried_jobs(renewal: Renewal) -> set[int]:
    return {item.job_id for item in renewal.items}


def slots(core: GuardCore) -> tuple[Renewal | None, Renewal | None]:
    """The renewal slot and the abandoned slot."""
    return core.current, core.abandoned


def state(core: GuardCore) -> dict[str, Any]:
    return copy.deepcopy(core.__dict__)


# -- fence.py ---------------------------------------------------------------------------


def test_initial_deadline_is_claim_sent_plus_v_when_rows_lease_longer() -> None:
    # The database granted wall 5031 and 5040, i.e. local 132 and 141: claim_sent + V wins.
    deadline = initial_deadline(
        100.0, V, local_now=101.0, wall_now=5000.0, row_deadlines=[5031.0, 5040.0]
    )
    assert deadline == 130.0


def test_initial_deadline_takes_the_earliest_row_translated_to_the_local_clock() -> None:
    # Row 5025 is 25 s after wall_now, so local 101 + 25 = 126 < claim_sent + V = 130.
    assert local_row_deadline(5025.0, local_now=101.0, wall_now=5000.0) == 126.0
    deadline = initial_deadline(
        100.0, V, local_now=101.0, wall_now=5000.0, row_deadlines=[5040.0, 5025.0, 5031.0]
    )
    assert deadline == 126.0


def test_initial_deadline_of_an_already_expired_row_lies_in_the_past() -> None:
    deadline = initial_deadline(
        100.0, V, local_now=101.0, wall_now=5000.0, row_deadlines=[5031.0, 4999.0]
    )
    assert deadline == 100.0 < 101.0


def test_initial_deadline_without_rows_is_claim_sent_plus_v() -> None:
    assert initial_deadline(7.0, V, local_now=8.0, wall_now=1e9, row_deadlines=[]) == 37.0


def test_I7_expired_batch_is_refused_at_registration() -> None:
    core = make_core()
    # One of the two rows expired a second ago (wall time = local time here).
    assert not register(core, 1, [1, 2], now=50.0, claim_sent=49.0, rows=[79.0, 49.0])
    # A deadline exactly at ``now`` is expired too.
    assert not register(core, 2, [3], now=50.0, claim_sent=20.0)
    assert core.batch_ids() == []
    assert core.next_renewal(50.0) is None
    assert not core.request_renewal(1, 50.0)
    # A batch with a single live row is accepted.
    assert register(core, 3, [4], now=50.0, claim_sent=49.0)
    assert core.batch_ids() == [3]


def test_I7_row_lease_translated_through_clock_offset_decides_expiry() -> None:
    core = make_core()
    # Wall clock runs 1000 s ahead of local; the row lease ends 0.5 s after wall_now.
    accepted = core.register(
        1, [(1, 1)], claim_sent=9.0, now=10.0, wall_now=1010.0, row_deadlines=[1010.5]
    )
    assert accepted
    assert core.batch(1).lease_deadline == 10.5
    refused = core.register(
        2, [(2, 1)], claim_sent=9.0, now=10.0, wall_now=1010.0, row_deadlines=[1009.5]
    )
    assert not refused


def test_advanced_deadline_moves_forward_after_a_renewal() -> None:
    assert advanced_deadline(previous=40.0, renewal_sent=20.0, visibility_timeout=V) == 50.0


def test_advanced_deadline_never_moves_backwards() -> None:
    # An older renewal (sent at 5) cannot shorten a lease a newer one granted (until 40).
    assert advanced_deadline(previous=40.0, renewal_sent=5.0, visibility_timeout=V) == 40.0
    assert advanced_deadline(previous=40.0, renewal_sent=10.0, visibility_timeout=V) == 40.0


# -- timing.py --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("heartbeat", "remaining", "expected"),
    [
        (10.0, 100.0, 10.0),  # plenty left: at most H
        (10.0, 20.0, 10.0),  # remaining/2 == H
        (10.0, 10.0, 5.0),  # half of what is left
        (10.0, 1.0, 0.5),
        (10.0, 0.5, 0.25),  # remaining/2 == floor
        (10.0, 0.3, 0.25),  # never faster than 0.25 s
        (10.0, 0.0, 0.25),
        (10.0, -5.0, 0.25),  # lease already gone: still not a busy loop
        (0.1, 100.0, 0.1),  # H below the floor: H wins (min is outermost)
    ],
)
def test_retry_delay(heartbeat: float, remaining: float, expected: float) -> None:
    assert retry_delay(heartbeat, remaining) == expected
    assert expected == min(heartbeat, max(MIN_RETRY, remaining / 2))


@pytest.mark.parametrize(
    ("remaining", "expected"),
    [
        (100.0, 30.0),  # never longer than V
        (30.0, 30.0),
        (10.0, 10.0),  # bounded by the earliest lease
        (0.3, 0.3),
        (0.1, 0.25),  # never shorter than 0.25 s
        (-1.0, 0.25),
        (math.nan, 30.0),
    ],
)
def test_renewal_timeout(remaining: float, expected: float) -> None:
    assert renewal_timeout(V, remaining) == expected


@pytest.mark.parametrize(
    ("visibility", "expected"),
    [(6.0, 10.0), (20.0, 10.0), (30.0, 10.0), (60.0, 20.0), (90.0, 30.0)],
)
def test_auto_heartbeat_is_max_of_10s_and_a_third_of_v(visibility: float, expected: float) -> None:
    assert auto_heartbeat(visibility) == expected


# -- progress.py (I11) ------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 0.0, 0.5, 1, 1.0, 1e-300, 0.999999])
def test_I11_valid_progress_accepts_finite_values_in_unit_interval(value: float) -> None:
    result = valid_progress(value)
    assert result == float(value)
    assert type(result) is float


@pytest.mark.parametrize(
    "value",
    [
        *[math.nan, math.inf, -math.inf, -0.1, 1.1, 2, -1, True, False, "0.5", None, [0.5], 1 + 0j],
        # ints beyond the float range: ignored too, no OverflowError
        pytest.param(10**400, id="10**400"),
        pytest.param(-(10**400), id="-10**400"),
    ],
)
def test_I11_valid_progress_refuses_everything_else(value: object) -> None:
    assert valid_progress(value) is None


# -- backoff.py -------------------------------------------------------------------------


def test_backoff_grows_exponentially_without_jitter_at_midpoint() -> None:
    backoff = ExponentialBackoff(initial=1.0, base=2.0, cap=300.0, jitter=0.1)
    # unit=0.5 is the middle of the jitter band: no spread.
    assert [backoff.delay(n, 0.5) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
    assert backoff.delay(0, 0.5) == 1.0  # attempt numbers below 1 count as the first


def test_backoff_is_capped() -> None:
    backoff = ExponentialBackoff(initial=1.0, base=2.0, cap=300.0, jitter=0.0)
    assert backoff.delay(9, 0.5) == 256.0
    assert backoff.delay(10, 0.5) == 300.0
    assert backoff.delay(60, 0.5) == 300.0


@pytest.mark.parametrize("base", [2.0, 2])
def test_backoff_overflow_at_huge_attempt_gives_the_cap(base: float) -> None:
    backoff = ExponentialBackoff(initial=1.0, base=base, cap=300.0, jitter=0.1)
    assert backoff.delay(5000, 0.5) == 300.0
    assert 270.0 <= backoff(5000) <= 330.0


def test_backoff_jitter_bounds() -> None:
    backoff = ExponentialBackoff(initial=1.0, base=2.0, cap=300.0, jitter=0.1)
    assert backoff.delay(3, 0.0) == pytest.approx(4.0 * 0.9)
    assert backoff.delay(3, 0.999999) == pytest.approx(4.0 * 1.1, rel=1e-5)
    assert backoff.delay(3, 0.999999) < 4.0 * 1.1
    assert backoff.delay(20, 0.0) == pytest.approx(300.0 * 0.9)
    for attempt in range(1, 30):
        delay = backoff(attempt)
        raw = min(300.0, 2.0 ** (attempt - 1))
        assert raw * 0.9 <= delay <= raw * 1.1


def test_backoff_full_jitter_never_goes_negative() -> None:
    backoff = ExponentialBackoff(initial=1.0, base=2.0, cap=300.0, jitter=1.0)
    assert backoff.delay(1, 0.0) == 0.0
    assert backoff.delay(1, 0.75) == 1.5


def test_backoff_problems() -> None:
    assert ExponentialBackoff().problems() == []
    bad = ExponentialBackoff(initial=0.0, base=0.5, cap=-1.0, jitter=1.5)
    problems = bad.problems()
    assert len(problems) == 4
    for word in ("initial", "base", "cap", "jitter"):
        assert any(f"backoff.{word}" in p for p in problems), word
    assert ExponentialBackoff(initial=math.nan).problems() == [
        "backoff.initial must be positive",
        "backoff.cap must be at least backoff.initial",
    ]


# -- outcome.py (I8, I12, I4) -----------------------------------------------------------

DURATION_300 = "claim hooks and handler ran past max_job_duration of 300s"


def outcome(
    job_stop: StopReason | None = None,
    batch_stop: StopReason | None = None,
    error: str | None = None,
    attempt: int = 1,
    max_attempts: int = 3,
    no_connection: str | None = None,
) -> Outcome:
    return decide(
        job_stop=job_stop,
        batch_stop=batch_stop,
        error=error,
        attempt=attempt,
        max_attempts=max_attempts,
        max_job_duration=300.0,
        no_connection=no_connection,
    )


def test_decide_success() -> None:
    assert outcome() == Outcome(OutcomeKind.SUCCEEDED)


@pytest.mark.parametrize("error", [None, "CancelledError: ..."])
def test_I12_decide_cancel_fails_and_is_not_retried(error: str | None) -> None:
    result = outcome(job_stop=StopReason.CANCELLED, error=error, attempt=1, max_attempts=10)
    assert result.kind is OutcomeKind.FAILED
    assert result.message is not None
    assert result.message.startswith("cancelled")
    if error:
        assert error in result.message


@pytest.mark.parametrize(
    "reason", [StopReason.RECLAIMED, StopReason.GONE, StopReason.LEASE_EXPIRED]
)
@pytest.mark.parametrize("level", ["job", "batch"])
def test_decide_lost_attempt_is_unavailable(reason: StopReason, level: str) -> None:
    kwargs = {"job_stop": reason} if level == "job" else {"batch_stop": reason}
    result = outcome(**kwargs, error="ValueError: boom")  # type: ignore[arg-type]
    assert result == Outcome(OutcomeKind.UNAVAILABLE, reason.value)


def test_decide_lease_expired_message() -> None:
    assert outcome(batch_stop=StopReason.LEASE_EXPIRED).message == "lease expired without renewal"


def test_decide_shutdown_releases() -> None:
    result = outcome(batch_stop=StopReason.SHUTDOWN, error="Cancelled", attempt=3)
    assert result == Outcome(OutcomeKind.RELEASE, StopReason.SHUTDOWN.value)


def test_I4_decide_duration_is_retried_with_the_duration_message() -> None:
    assert outcome(batch_stop=StopReason.DURATION, error="Cancelled") == Outcome(
        OutcomeKind.RETRY, DURATION_300
    )
    assert outcome(batch_stop=StopReason.DURATION) == Outcome(OutcomeKind.RETRY, DURATION_300)


def test_I4_decide_duration_fails_when_attempts_are_exhausted() -> None:
    result = outcome(batch_stop=StopReason.DURATION, attempt=3, max_attempts=3)
    assert result == Outcome(OutcomeKind.FAILED, DURATION_300)


def test_decide_duration_message_formats_fractions() -> None:
    result = decide(
        job_stop=None,
        batch_stop=StopReason.DURATION,
        error=None,
        attempt=1,
        max_attempts=2,
        max_job_duration=2.5,
    )
    assert result.message == "claim hooks and handler ran past max_job_duration of 2.5s"


def test_decide_error_retries_then_fails() -> None:
    assert outcome(error="ValueError: x", attempt=2) == Outcome(OutcomeKind.RETRY, "ValueError: x")
    assert outcome(error="ValueError: x", attempt=3) == Outcome(OutcomeKind.FAILED, "ValueError: x")
    assert outcome(error="ValueError: x", attempt=4) == Outcome(OutcomeKind.FAILED, "ValueError: x")


def test_I8_decide_job_stop_beats_batch_stop() -> None:
    assert outcome(job_stop=StopReason.RECLAIMED, batch_stop=StopReason.DURATION) == Outcome(
        OutcomeKind.UNAVAILABLE, StopReason.RECLAIMED.value
    )
    assert outcome(job_stop=StopReason.CANCELLED, batch_stop=StopReason.SHUTDOWN).kind is (
        OutcomeKind.FAILED
    )
    assert outcome(job_stop=StopReason.GONE, batch_stop=StopReason.LEASE_EXPIRED).message == (
        StopReason.GONE.value
    )


@pytest.mark.parametrize(
    ("job_stop", "scope_fired", "batch", "error", "attempt", "no_connection"),
    list(
        itertools.product(
            [None, *StopReason],
            [False, True],
            [None, *StopReason],
            [None, "ValueError: x"],
            [1, 3],
            [None, "too many clients"],
        )
    ),
)
def test_decide_attempt_is_decide_with_the_stop_it_reads(
    job_stop: StopReason | None,
    scope_fired: bool,
    batch: StopReason | None,
    error: str | None,
    attempt: int,
    no_connection: str | None,
) -> None:
    """Whatever the facts, decide_attempt answers what decide says of the stop it reads:
    the job's own, else, only when the batch scope fired, the batch's (a lost lease when
    the core names none); it asks for the batch's stop only then, since asking freezes it.
    Its way for attempts that nothing stopped must agree too."""
    asked: list[bool] = []

    def batch_stop() -> StopReason | None:
        asked.append(True)
        return batch

    stop = job_stop
    if job_stop is None and scope_fired:
        stop = batch or StopReason.LEASE_EXPIRED
    got = decide_attempt(
        job_stop=job_stop,
        scope_fired=scope_fired,
        batch_stop=batch_stop,
        error=error,
        attempt=attempt,
        max_attempts=3,
        max_job_duration=300.0,
        no_connection=no_connection,
    )
    batch_stop_read = None if stop is job_stop else stop
    expected = outcome(job_stop, batch_stop_read, error, attempt, no_connection=no_connection)
    assert got == (expected, stop)
    assert asked == ([True] if scope_fired and job_stop is None else [])


# -- _runtime/config.py (I1) -----------------------------------------------------------


async def handler(payload: object, ctx: object) -> None:
    pass


async def async_hook(job: object) -> None:
    pass


def sync_hook(job: object) -> None:
    pass


def config_problems(**options: Any) -> list[str]:
    config = WorkerConfig(**{"handler": handler, **options})
    with pytest.raises(ConfigError) as info:
        check(config)
    assert list(info.value.problems) == problems_of(config)
    return list(info.value.problems)


def test_I1_valid_config_gives_its_timings() -> None:
    timing = check(
        WorkerConfig(
            handler=handler, visibility_timeout=60, heartbeat_interval=20, max_job_duration=300
        )
    )
    assert timing == Timing(
        visibility_timeout=60.0, heartbeat_interval=20.0, max_job_duration=300.0
    )
    assert check(WorkerConfig(handler=handler)).max_job_duration is None


def test_I1_all_violations_are_reported_in_one_config_error() -> None:
    config = WorkerConfig(
        handler=handler,
        queue="",
        concurrency=0,
        batch_size=True,
        poll_interval=0,
        on_job_claimed=sync_hook,  # type: ignore[arg-type]
    )
    with pytest.raises(ConfigError) as info:
        check(config)
    problems = info.value.problems
    assert len(problems) == 5, problems
    for name in ("queue", "concurrency", "batch_size", "poll_interval", "on_job_claimed"):
        assert sum(p.startswith(name) for p in problems) == 1, (name, problems)
    assert "(5 problems)" in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(("visibility", "heartbeat"), [(10, 10), (10, 20), (0.5, 0.75)])
def test_I1_heartbeat_not_below_visibility_is_refused(visibility: float, heartbeat: float) -> None:
    [problem] = config_problems(visibility_timeout=visibility, heartbeat_interval=heartbeat)
    assert "heartbeat_interval" in problem
    assert "visibility_timeout" in problem


def test_I1_heartbeat_just_below_visibility_is_accepted() -> None:
    timing = check(WorkerConfig(handler=handler, visibility_timeout=10, heartbeat_interval=9.99))
    assert timing.heartbeat_interval == 9.99


def test_I1_auto_heartbeat_with_v_20_is_10() -> None:
    timing = check(WorkerConfig(handler=handler, visibility_timeout=20, heartbeat_interval="auto"))
    assert timing == Timing(visibility_timeout=20.0, heartbeat_interval=10.0)
    timing = check(WorkerConfig(handler=handler, visibility_timeout=90, heartbeat_interval="auto"))
    assert timing.heartbeat_interval == 30.0


@pytest.mark.parametrize("visibility", [6, 10])
def test_I1_auto_heartbeat_not_below_v_is_refused(visibility: float) -> None:
    [problem] = config_problems(visibility_timeout=visibility, heartbeat_interval="auto")
    assert "heartbeat_interval" in problem
    assert "visibility_timeout" in problem


@pytest.mark.filterwarnings("ignore:WorkerConfig.max_attempts has no effect")
@pytest.mark.parametrize("name", ["concurrency", "batch_size", "max_attempts"])
@pytest.mark.parametrize("value", [True, False])
def test_I1_bool_is_not_a_whole_number(name: str, value: bool) -> None:
    [problem] = config_problems(**{name: value})
    assert problem.startswith(name)


@pytest.mark.parametrize(
    "name", ["visibility_timeout", "poll_interval", "shutdown_grace", "max_job_duration"]
)
def test_I1_bool_is_not_a_number_of_seconds(name: str) -> None:
    options: dict[str, Any] = {name: True}
    if name == "visibility_timeout":
        options["heartbeat_interval"] = 0.5
    [problem] = config_problems(**options)
    assert problem.startswith(name)


@pytest.mark.parametrize("value", [0, -1, math.nan, math.inf, "30"])
def test_I1_visibility_must_be_positive_finite_seconds(value: object) -> None:
    problems = config_problems(visibility_timeout=value)
    assert len(problems) == 1
    assert problems[0].startswith("visibility_timeout")


def test_I1_bad_heartbeat_and_bad_visibility_are_both_reported() -> None:
    problems = config_problems(visibility_timeout=-1, heartbeat_interval=0)
    assert [p.split()[0] for p in problems] == ["visibility_timeout", "heartbeat_interval"]


def test_I1_shutdown_grace_may_be_zero() -> None:
    check(WorkerConfig(handler=handler, shutdown_grace=0))
    [problem] = config_problems(shutdown_grace=-0.5)
    assert problem.startswith("shutdown_grace")


class AsyncCallable:
    async def __call__(self, job: object) -> None:
        pass


@pytest.mark.parametrize(
    "hook",
    ["on_job_claimed", "on_job_unavailable", "on_job_succeeded", "on_job_failed", "on_job_retry"],
)
def test_I1_hooks_must_be_async(hook: str) -> None:
    [problem] = config_problems(**{hook: sync_hook})
    assert problem.startswith(hook)
    assert "async" in problem
    [problem] = config_problems(**{hook: lambda job: None})
    assert problem.startswith(hook)


@pytest.mark.parametrize("hook", [async_hook, functools.partial(async_hook), AsyncCallable(), None])
def test_I1_async_hooks_are_accepted(hook: object) -> None:
    check(WorkerConfig(handler=handler, on_job_claimed=hook))  # type: ignore[arg-type]


def test_I1_handler_and_backoff_must_be_callable() -> None:
    config = WorkerConfig(handler=42, backoff="fast")  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as info:
        check(config)
    assert [p.split()[0] for p in info.value.problems] == ["handler", "backoff"]


def test_I1_exponential_backoff_problems_are_included() -> None:
    problems = config_problems(backoff=ExponentialBackoff(initial=-1, jitter=2))
    assert problems == [
        "backoff.initial must be positive",
        "backoff.jitter must be between 0 and 1",
    ]


def test_I1_problems_of_something_else() -> None:
    assert problems_of({"visibility_timeout": 30}) == ["expected a WorkerConfig, got dict"]


# Values a backend would refuse later, or that cannot be floats at all, are refused with the
# other violations (issue 7 items 6 and 7), never as an OverflowError or a claim that fails
# forever.
HUGE = 10**400  # an int beyond the float range


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"visibility_timeout": 1e10}, id="V-past-a-backends-range"),
        pytest.param({"visibility_timeout": HUGE}, id="V-beyond-float"),
        pytest.param({"heartbeat_interval": HUGE}, id="H-beyond-float"),
        pytest.param({"max_job_duration": HUGE}, id="D-beyond-float"),
        pytest.param({"max_job_duration": 1e10}, id="D-past-a-century"),
        pytest.param({"shutdown_grace": HUGE}, id="grace-beyond-float"),
        pytest.param({"poll_interval": -HUGE}, id="poll-beyond-float"),
        pytest.param({"blocking_threshold": 1e10}, id="threshold-past-a-century"),
        pytest.param({"queue": "report\ud800"}, id="queue-lone-surrogate"),
        pytest.param({"queue": "\udcff"}, id="queue-argv-byte-ff"),
        pytest.param({"queue": "q" * 129}, id="queue-too-long"),
    ],
)
def test_I1_values_a_backend_would_refuse_are_refused_up_front(options: dict[str, Any]) -> None:
    [name] = options
    [problem] = config_problems(**options)
    assert problem.startswith(name), problem
    assert len(problem) < 200  # a huge int is described, not printed


def test_I1_argv_bytes_that_are_not_utf8_are_named_so() -> None:
    """``--queue $'\\xff'`` arrives as U+DCFF (surrogateescape): the message says what it is."""
    [problem] = config_problems(queue=b"\xff".decode("utf-8", "surrogateescape"))
    assert problem == "queue must not contain bytes that are not valid UTF-8 (a lone surrogate)"


def test_I1_out_of_range_values_are_listed_with_the_other_violations() -> None:
    problems = config_problems(
        queue="\udcff",
        visibility_timeout=1e10,
        heartbeat_interval=1e-6,
        max_job_duration=HUGE,
        shutdown_grace=HUGE,
        concurrency=0,
    )
    assert [p.split()[0] for p in problems] == [
        "queue",
        "concurrency",
        "visibility_timeout",
        "heartbeat_interval",
        "shutdown_grace",
        "max_job_duration",
    ]


@pytest.mark.parametrize(
    "name", ["visibility_timeout", "heartbeat_interval", "poll_interval", "blocking_threshold"]
)
def test_I1_cadences_below_the_floor_are_refused(name: str) -> None:
    """heartbeat_interval=1e-6 made about 8,800 renewals a second: 10 ms is the floor."""
    options: dict[str, Any] = {name: MIN_INTERVAL / 2}
    if name == "visibility_timeout":
        options["heartbeat_interval"] = MIN_INTERVAL / 4
    problems = config_problems(**options)
    assert problems[0] == f"{name} must be a number >= 0.01 and <= 3155760000, not 0.005"


def test_I1_cadences_at_the_floor_are_accepted() -> None:
    timing = check(
        WorkerConfig(
            handler=handler,
            visibility_timeout=2 * MIN_INTERVAL,
            heartbeat_interval=MIN_INTERVAL,
            poll_interval=MIN_INTERVAL,
            blocking_threshold=MIN_INTERVAL,
            max_job_duration=0.001,  # no cadence: a short D costs nothing
            shutdown_grace=0,
        )
    )
    assert timing == Timing(
        visibility_timeout=0.02, heartbeat_interval=0.01, max_job_duration=0.001
    )


def test_I1_a_backoff_past_a_backends_retry_delay_range_is_refused() -> None:
    [problem] = config_problems(backoff=ExponentialBackoff(cap=1e10))
    assert problem.startswith("backoff.cap must be at most 3155760000 seconds")


# Handlers and hooks that would be called and never run (issue 7 item 12).


async def async_generator(payload: object, ctx: object) -> Any:
    yield payload


def sync_generator(payload: object, ctx: object) -> Any:
    yield payload


class AsyncCallableWithFuncAttribute:
    """Not a partial, though it has a ``func`` attribute."""

    func = None

    async def __call__(self, payload: object, ctx: object) -> None:
        pass


class AsyncCallableClass:
    """Calling the *class* makes an instance (synchronously); its instances are async."""

    async def __call__(self, payload: object, ctx: object) -> None:
        pass


@pytest.mark.parametrize(
    "fn", [async_generator, sync_generator, functools.partial(async_generator)]
)
def test_I1_generator_handlers_are_refused(fn: object) -> None:
    [problem] = config_problems(handler=fn)
    assert problem.startswith("handler must not be a generator function (it uses yield)")


def test_I1_generator_hooks_are_refused() -> None:
    async def hook(job: object) -> Any:
        yield job

    [problem] = config_problems(on_job_succeeded=hook)
    assert problem.startswith("on_job_succeeded must not be a generator function")


def test_is_async_callable_looks_through_partials_and_call_methods_only() -> None:
    assert is_async_callable(handler)
    assert is_async_callable(functools.partial(functools.partial(handler, 1)))
    assert is_async_callable(AsyncCallableWithFuncAttribute())
    assert is_async_callable(functools.partial(AsyncCallableWithFuncAttribute()))
    assert is_async_callable(AsyncCallableClass())
    assert not is_async_callable(AsyncCallableClass)
    assert not is_async_callable(sync_hook)
    assert not is_async_callable(print)
    assert not is_async_callable(async_generator)


# -- GuardCore: a batch of one ---------------------------------------------------------


def test_a_batch_of_one_keeps_its_lease_in_a_mapping_of_one() -> None:
    """A batch of one holds its job's lease in a OneJob, not a dict (memory per job): it
    must answer as the dict would, and the batch is renewed and settled like any other."""
    core = make_core()
    assert register(core, 1, [11], now=5.0)
    jobs = core.batch(1).jobs
    assert isinstance(jobs, OneJob)
    lease = core.job(1, 11)
    assert (len(jobs), list(jobs), tuple(jobs.values()), dict(jobs)) == (
        1,
        [11],
        (lease,),
        {11: lease},
    )
    assert 11 in jobs and 12 not in jobs
    assert jobs.get(12) is None
    with pytest.raises(KeyError):
        core.job(1, 12)
    assert carried_jobs(renew(core, 5.0)) == {11}
    core.job_done(1, 12)  # not the batch's job: changes nothing
    assert lease.pending
    core.job_done(1, 11)
    assert (lease.pending, lease.renewed) == (False, False)


# -- GuardCore: beats (I10) -------------------------------------------------------------


def test_I10_first_beat_is_immediate() -> None:
    core = make_core()
    assert core.next_wake(0.0) == math.inf
    assert register(core, 1, [11, 12], now=5.0, claim_sent=4.5)
    assert core.next_wake(5.0) == 5.0
    renewal = renew(core, 5.0)
    assert renewal.batch_ids == frozenset({1})
    assert carried_jobs(renewal) == {11, 12}
    assert renewal.sent_at == 5.0
    assert core.fence_time(core.batch(1)) == 34.5


def test_I10_first_beat_is_not_owed_once_every_job_of_the_batch_has_ended() -> None:
    """Outcomes decided before the first beat went out (no cancel directive could change
    them): the batch is passed over, and is due on the pool's next beat, still renewed then
    if its writes are not done."""
    core = make_core()
    assert register(core, 1, [11, 12], now=5.0)
    core.work_ended(1, 11)
    core.work_ended(1, 12)
    assert core.next_renewal(5.0) is None
    assert core.next_wake(5.0) == 15.0  # anchor 5 + H
    assert core.next_renewal(14.9) is None
    late = renew(core, 15.0)
    assert carried_jobs(late) == {11, 12}  # ended, not yet written: still renewed


def test_I10_first_beat_goes_out_while_any_job_of_the_batch_runs() -> None:
    core = make_core()
    assert register(core, 1, [11, 12], now=5.0)
    core.work_ended(1, 11)
    assert carried_jobs(renew(core, 5.0)) == {11, 12}


def test_I10_first_beat_goes_out_for_a_cancel_notice_even_when_the_work_ended() -> None:
    core = make_core()
    assert register(core, 1, [11], now=5.0)
    core.work_ended(1, 11)
    assert core.request_renewal(11, 5.0)
    assert carried_jobs(renew(core, 5.0)) == {11}


def test_I10_first_beat_goes_out_when_the_claim_left_less_than_a_beat_of_lease() -> None:
    """A row whose lease ends within H of now: waiting for the pool's beat could outlast it,
    so the first beat goes out after all."""
    core = make_core()
    assert register(core, 1, [11], now=5.0, rows=[5.0 + H / 2])
    core.work_ended(1, 11)
    assert carried_jobs(renew(core, 5.0)) == {11}


def test_I10_a_waived_first_beat_is_due_v_minus_h_before_the_claims_lease() -> None:
    """A claim whose lease is shorter than V (it waited on a lock) and ends before the
    pool's next beat + (V - H): the batch is due V - H before that lease ends, as after a
    renewal."""
    core = make_core()
    assert register(core, 1, [1], now=0.0)
    assert carried_jobs(renew(core, 0.0)) == {1}  # anchors the pool's beat at 0
    core.answered(core.current.token, 0.0, {1: EXT})  # type: ignore[union-attr]
    assert register(core, 2, [21], now=8.0, rows=[8.0 + 22.0])  # lease until 30
    core.work_ended(2, 21)
    assert core.next_renewal(8.0) is None
    assert core.batch(2).next_due == 30.0 - (V - H)  # 10 = the pool's beat here, too
    assert register(core, 3, [31], now=8.5, rows=[8.5 + 21.0])  # lease until 29.5
    core.work_ended(3, 31)
    assert core.next_renewal(8.5) is None
    assert core.batch(3).next_due == 29.5 - (V - H)


def test_I10_one_renewal_carries_all_due_batches_of_the_pool() -> None:
    core = make_core()
    jobs_per_batch = 3
    for i in range(50):
        now = i * 0.1
        job_ids = range(i * jobs_per_batch, (i + 1) * jobs_per_batch)
        assert register(core, i, job_ids, now=now)
        first = renew(core, now)  # each batch's own first beat
        assert first.batch_ids == frozenset({i})
        core.answered(first.token, now, all_of(first))
    statements: list[Renewal] = []
    for step in range(100, 2100):  # t = 5.00 .. 104.95 in 0.05 s steps
        now = step / 20
        core.poll(now)
        renewal = core.next_renewal(now)
        if renewal is not None:
            statements.append(renewal)
            core.answered(renewal.token, now + 0.01, all_of(renewal))
    assert len(statements) == 10
    assert [r.sent_at for r in statements] == [10.0 * k for k in range(1, 11)]
    for renewal in statements:
        assert renewal.batch_ids == frozenset(range(50))
        assert len(renewal.items) == 50 * jobs_per_batch
    assert all(core.batch_stop(b, 104.95) is None for b in range(50))


def test_I10_statements_longer_than_half_a_beat_still_merge_into_one() -> None:
    """H = 1 s, every renewal takes 0.6 s. Batch 2's first beat has to wait for batch 1's,
    so the two are renewed 0.6 s apart; without merging early they would alternate in two
    statements per beat for ever. Batches due before a statement is likely back ride along."""
    core = make_core(v=30.0, h=1.0)
    register(core, 1, [1], now=0.0)
    register(core, 2, [2], now=0.1)
    in_flight: tuple[Renewal, float] | None = None
    statements: list[Renewal] = []
    for step in range(1000):  # t = 0.00 .. 9.99 in 0.01 s steps
        now = step / 100
        if in_flight is not None and now >= in_flight[1]:
            core.answered(in_flight[0].token, now, all_of(in_flight[0]))
            in_flight = None
        renewal = core.next_renewal(now)
        if renewal is not None:
            statements.append(renewal)
            in_flight = (renewal, now + 0.6)
    late = [r for r in statements if r.sent_at >= 3.0]
    assert len(late) == 7  # one per beat from t = 3
    assert all(r.batch_ids == frozenset({1, 2}) for r in late)


def test_I10_batch_registered_between_beats_joins_the_pool_beat() -> None:
    core = make_core()
    register(core, 1, [1], now=0.0)
    beat(core, 0.0)
    register(core, 2, [2], now=3.7)
    beat(core, 3.7)  # first beat of batch 2, alone
    assert core.next_wake(3.7) == 10.0
    assert core.next_renewal(9.99) is None
    assert renew(core, 10.0).batch_ids == frozenset({1, 2})


# -- GuardCore: verdicts ----------------------------------------------------------------


def test_gone_needs_two_consecutive_sightings() -> None:
    core = make_core()
    register(core, 1, [1, 2], now=0.0)
    beat(core, 0.0)
    first = renew(core, 10.0)
    effects = core.answered(first.token, 10.1, {1: GONE, 2: EXT})
    assert effects.stops == []
    assert core.job(1, 1).pending
    assert core.batch(1).lease_deadline == 30.0  # not every pending job was extended
    # The confirming renewal is due within 0.25 s.
    due = core.batch(1).next_due
    assert 10.1 < due <= 10.1 + MIN_RETRY
    assert core.next_wake(10.1) == due
    confirm = renew(core, due)
    assert carried_jobs(confirm) == {1, 2}
    effects = core.answered(confirm.token, due, {1: GONE, 2: EXT})
    assert effects.stops == [(1, 1, StopReason.GONE)]
    assert core.job(1, 1).pending  # its handler may still be running: job_done says when
    assert not core.job(1, 1).renewed
    assert core.job(1, 1).stop is StopReason.GONE
    assert core.batch(1).lease_deadline == due + V  # the remaining job was extended
    assert carried_jobs(renew(core, 20.0)) == {2}


@pytest.mark.parametrize("between", [EXT, UNCHANGED, CANCEL, None])
def test_gone_sightings_must_be_consecutive(between: Verdict | None) -> None:
    core = make_core()
    register(core, 1, [1, 2], now=0.0)
    for now, verdict in [(0.0, GONE), (1.0, between), (2.0, GONE)]:
        core.request_renewal(1, now)
        verdicts = {2: EXT} if verdict is None else {1: verdict, 2: EXT}  # None: missing
        effects = beat(core, now, verdicts)
        assert effects.stops == []
    assert core.job(1, 1).pending
    assert core.job(1, 1).gone_seen


def test_reclaimed_stops_only_that_job_and_siblings_lease_advances() -> None:
    core = make_core()
    register(core, 1, [1, 2, 3], now=0.0)
    beat(core, 0.0)
    renewal = renew(core, 10.0)
    effects = core.answered(renewal.token, 10.2, {1: RECLAIMED, 2: EXT, 3: EXT})
    assert effects.stops == [(1, 1, StopReason.RECLAIMED)]
    assert effects.cancels == []
    assert core.job(1, 1).stop is StopReason.RECLAIMED
    assert not core.job(1, 1).renewed
    assert [core.job(1, j).stop for j in (2, 3)] == [None, None]
    assert core.batch(1).lease_deadline == 10.0 + V
    assert core.scope_deadline(1) == 40.0
    assert core.batch_stop(1, 10.2) is None
    assert carried_jobs(renew(core, 20.0)) == {2, 3}


def test_I12_cancel_requested_is_delivered_once_and_extends_the_lease() -> None:
    core = make_core()
    register(core, 1, [1, 2], now=0.0)
    beat(core, 0.0)
    effects = beat(core, 10.0, {1: CANCEL, 2: EXT})
    assert effects.cancels == [(1, 1)]
    assert effects.stops == []
    assert core.job(1, 1).stop is StopReason.CANCELLED
    assert core.job(1, 1).pending  # still renewed until its handler returns
    assert core.batch(1).lease_deadline == 40.0
    effects = beat(core, 20.0, {1: CANCEL, 2: EXT})
    assert effects.cancels == []
    assert core.batch(1).lease_deadline == 50.0


def test_I12_cancelled_job_later_reclaimed_is_stopped_once() -> None:
    core = make_core()
    register(core, 1, [1], now=0.0)
    assert beat(core, 0.0, {1: CANCEL}).cancels == [(1, 1)]
    effects = beat(core, 10.0, {1: RECLAIMED})
    assert effects.stops == [(1, 1, StopReason.RECLAIMED)]
    assert effects.cancels == []
    assert core.job(1, 1).stop is StopReason.RECLAIMED


def test_missing_verdict_counts_as_unchanged() -> None:
    results = []
    for verdicts in ({1: EXT}, {1: EXT, 2: UNCHANGED}):
        core = make_core()
        register(core, 1, [1, 2], now=0.0)
        beat(core, 0.0)
        effects = beat(core, 10.0, verdicts)
        assert core.batch(1).lease_deadline == 30.0
        assert core.batch(1).next_due == 20.0
        results.append((effects, state(core)))
    assert results[0] == results[1]


def test_partial_extension_does_not_advance_the_lease_and_retries_faster() -> None:
    core = make_core()
    register(core, 1, [1, 2], now=0.0)
    beat(core, 0.0)
    # next try after min(H, max(0.25, remaining / 2)), remaining = 30 - now
    for now, expected_next in [(10.0, 20.0), (20.0, 25.0), (25.0, 27.5), (27.5, 28.75)]:
        assert core.next_wake(now) == now
        effects = beat(core, now, {1: EXT, 2: UNCHANGED})
        assert effects.stops == []
        assert core.batch(1).lease_deadline == 30.0
        assert core.scope_deadline(1) == 30.0
        assert core.batch(1).next_due == expected_next
    assert core.batch_stop(1, 29.99) is None  # a failed heartbeat never stops a job by itself
    assert core.batch_stop(1, 30.0) is StopReason.LEASE_EXPIRED


def test_failed_renewal_retries_faster_as_the_lease_runs_down() -> None:
    core = make_core()
    register(core, 1, [1], now=0.0)
    beat(core, 0.0)
    sends = []
    now = 10.0
    while core.batch_stop(1, now) is None:
        renewal = renew(core, now)
        sends.append(renewal.sent_at)
        effects = core.failed(renewal.token, now)
        assert effects.moved == {1}
        assert not effects.stops
        assert not effects.cancels
        now = core.next_wake(now)
    assert sends[:6] == [10.0, 20.0, 25.0, 27.5, 28.75, 29.375]
    assert all(b - a >= MIN_RETRY for a, b in itertools.pairwise(sends))
    assert sends[-1] < 30.0 <= now


def test_answered_and_failed_move_the_carried_batches_only() -> None:
    core = make_core()
    register(core, 1, [1], now=0.0)
    register(core, 2, [2], now=0.0)
    beat(core, 0.0)
    core.request_renewal(2, 1.0)
    renewal = renew(core, 1.0)
    assert renewal.batch_ids == frozenset({2})
    assert core.answered(renewal.token, 1.0, all_of(renewal)).moved == {2}


def test_I6_stale_token_answer_changes_nothing() -> None:
    core = make_core()
    register(core, 1, [1, 2], now=0.0)
    old = renew(core, 0.0)
    core.answered(old.token, 0.1, {1: EXT, 2: UNCHANGED})
    current = renew(core, core.batch(1).next_due)
    before = state(core)
    for verdict in (EXT, CANCEL, RECLAIMED, GONE):
        assert core.answered(old.token, 5.0, all_of(old, verdict)) == Effects()
    assert core.failed(old.token, 5.0) == Effects()
    assert core.answered(12345, 5.0, all_of(old)) == Effects()
    assert state(core) == before
    assert core.current is current


def test_job_done_is_renewed_no_more_and_does_not_block_the_lease() -> None:
    core = make_core()
    register(core, 1, [1, 2], now=0.0)
    beat(core, 0.0)
    renewal = renew(core, 10.0)
    core.job_done(1, 1)  # settled while the renewal is out: its verdict no longer counts
    core.answered(renewal.token, 10.0, {1: UNCHANGED, 2: EXT})
    assert core.batch(1).lease_deadline == 40.0
    assert carried_jobs(renew(core, 20.0)) == {2}
    core.job_done(1, 99)  # unknown job: ignored
    core.job_done(7, 1)  # unknown batch: ignored


def test_I11_latest_valid_progress_goes_out_with_the_next_renewal() -> None:
    core = make_core()
    register(core, 1, [1, 2], now=0.0)
    first = renew(core, 0.0)
    assert [item.progress for item in first.items] == [None, None]
    core.answered(first.token, 0.0, all_of(first))
    core.job(1, 1).progress = 0.25  # what JobContext.report_progress stores
    core.job(1, 1).progress = 0.5  # the latest wins
    items = {item.job_id: item for item in renew(core, 10.0).items}
    assert items[1].progress == 0.5
    assert items[2].progress is None
    assert items[1].claim_seq == 1


def test_unregister_forgets_the_batch_but_not_a_newer_claim_of_the_same_job() -> None:
    core = make_core()
    register(core, 1, [1, 2], now=0.0)
    register(core, 2, [2], now=1.0)  # job 2 claimed again (its old attempt is unwinding)
    core.unregister(1)
    assert core.batch_ids() == [2]
    assert not core.request_renewal(1, 2.0)
    assert core.request_renewal(2, 2.0)
    assert core.batch(2).next_due == 1.0
    core.unregister(1)  # twice: harmless
    core.unregister(2)
    assert not core.request_renewal(2, 3.0)
    assert core.next_wake(3.0) == math.inf


# -- GuardCore: the abandoned slot (I5, I6) ---------------------------------------------


def stuck_setup() -> tuple[GuardCore, Renewal]:
    """Batch 1 registered at 0 with a renewal stuck since 0 (give-up 30, abandon 30.25)."""
    core = make_core()
    register(core, 1, [1], now=0.0)
    stuck = renew(core, 0.0)
    assert stuck.give_up_at == 30.0
    assert stuck.abandon_at == 30.0 + GRACE
    register(core, 2, [2], now=20.0)  # lease 50; waits behind the stuck renewal
    assert core.next_renewal(20.0) is None
    return core, stuck


def test_I5_abandon_after_give_up_plus_grace() -> None:
    core, stuck = stuck_setup()
    assert core.next_wake(20.0) == 30.25
    assert core.poll(30.0) == Effects()
    assert core.poll(30.2499) == Effects()
    assert core.current is stuck
    effects = core.poll(30.25)
    assert effects.abandoned == stuck.token
    assert effects.moved == {1}
    assert slots(core) == (None, stuck)  # (current, abandoned)
    assert core.connections_held() == 1
    assert core.batch_stop(1, 30.25) is StopReason.LEASE_EXPIRED
    # The freed slot renews the later batch on another connection.
    second = renew(core, 30.25)
    assert second.batch_ids == frozenset({2})
    assert core.connections_held() == 2


def test_I5_second_stuck_renewal_is_not_abandoned_while_one_is() -> None:
    core, first = stuck_setup()
    core.poll(30.25)
    second = renew(core, 30.25)
    assert second.give_up_at == 50.0
    assert core.next_wake(30.25) == math.inf
    assert core.poll(50.25) == Effects()
    assert core.poll(1000.0) == Effects()
    assert core.current is second
    assert core.abandoned is first
    assert core.connections_held() == 2
    assert core.next_renewal(1000.0) is None
    # The abandoned call exits (late, "extended"): the stuck one is abandoned in its place.
    effects = core.answered(first.token, 1000.0, all_of(first))
    assert effects.abandoned == second.token
    assert not effects.stops
    assert not effects.cancels
    assert slots(core) == (None, second)
    assert core.connections_held() == 1
    assert core.batch(1).lease_deadline == 30.0  # the late answer extended nothing
    assert core.batch_stop(1, 1000.0) is StopReason.LEASE_EXPIRED


def test_I5_abandoned_exit_before_current_is_due_for_abandon() -> None:
    core, first = stuck_setup()
    core.poll(30.25)
    second = renew(core, 30.25)
    effects = core.failed(first.token, 40.0)
    assert effects == Effects()
    assert core.abandoned is None
    assert core.current is second
    assert core.next_wake(40.0) == second.abandon_at == 50.25
    assert core.poll(50.2).abandoned is None
    assert core.poll(50.25).abandoned == second.token


def test_I6_abandoned_answer_cannot_clear_the_current_slot_or_extend() -> None:
    core, first = stuck_setup()
    core.poll(30.25)
    second = renew(core, 30.25)
    before = state(core)
    for stale in (second.token + 100, 12345):  # tokens never issued
        assert core.answered(stale, 31.0, {1: CANCEL, 2: RECLAIMED}) == Effects()
        assert core.failed(stale, 31.0) == Effects()
    assert state(core) == before  # the abandoned slot is freed by its own call only
    effects = core.answered(first.token, 31.0, {1: CANCEL, 2: RECLAIMED})
    assert effects == Effects()
    after = state(core)
    assert after.pop("abandoned") is None
    before.pop("abandoned")
    assert after == before
    assert core.current is second


# -- GuardCore: the fence and deadlines (I2, I4) ----------------------------------------


def short_lease_core() -> tuple[GuardCore, Renewal]:
    """Batch 1's lease ends at 30; its first renewal goes out at 29.9 (give-up 30.15)."""
    core = make_core()
    assert register(core, 1, [1], now=29.9, claim_sent=0.0)
    renewal = renew(core, 29.9)
    assert renewal.give_up_at == pytest.approx(30.15)
    return core, renewal


def test_I2_fence_waits_for_in_flight_renewal_give_up() -> None:
    core, renewal = short_lease_core()
    assert core.batch(1).lease_deadline == 30.0
    assert core.fence_time(core.batch(1)) == renewal.give_up_at
    assert core.scope_deadline(1) == renewal.give_up_at
    assert core.batch_stop(1, 30.1) is None
    assert core.batch_stop(1, renewal.give_up_at) is StopReason.LEASE_EXPIRED


def test_I2_fence_does_not_wait_for_a_renewal_that_does_not_carry_the_batch() -> None:
    core, renewal = short_lease_core()
    assert register(core, 2, [2], now=29.95, claim_sent=0.0)  # lease 30, after the send
    assert 2 not in renewal.batch_ids
    assert core.fence_time(core.batch(2)) == 30.0


def test_I2_fence_does_not_wait_for_a_renewal_sent_after_the_deadline() -> None:
    # Unreachable through the public calls (a batch must be live to be carried), so the
    # renewal is built by hand: the guard clause must still hold.
    core = make_core()
    register(core, 1, [1], now=0.0)
    core.current = Renewal(
        token=99, batch_ids=frozenset({1}), items=(), sent_at=30.0, give_up_at=30.25
    )
    assert core.fence_time(core.batch(1)) == 30.0
    core.current = Renewal(
        token=99, batch_ids=frozenset({1}), items=(), sent_at=29.99, give_up_at=30.24
    )
    assert core.fence_time(core.batch(1)) == 30.24


def test_I2_failed_in_flight_renewal_stops_waiting_at_once() -> None:
    core, renewal = short_lease_core()
    effects = core.failed(renewal.token, 30.05)
    assert effects.moved == {1}
    assert core.fence_time(core.batch(1)) == 30.0
    assert core.batch_stop(1, 30.05) is StopReason.LEASE_EXPIRED


def test_I2_answer_before_give_up_but_after_old_lease_still_extends() -> None:
    core, renewal = short_lease_core()
    effects = core.answered(renewal.token, 30.1, {1: EXT})
    assert effects.moved == {1}
    assert core.batch_stop(1, 30.1) is None
    assert core.batch(1).lease_deadline == pytest.approx(29.9 + V)
    assert core.scope_deadline(1) == core.batch(1).lease_deadline


def test_I2_answer_at_give_up_is_too_late() -> None:
    core, renewal = short_lease_core()
    effects = core.answered(renewal.token, renewal.give_up_at, {1: CANCEL})
    assert effects.cancels == []
    assert core.batch_stop(1, renewal.give_up_at) is StopReason.LEASE_EXPIRED
    assert core.batch(1).lease_deadline == 30.0


def test_I2_fence_stays_within_grace_of_the_lease() -> None:
    # Whatever is in flight, the fence never passes the granted lease by more than 0.25 s.
    core = make_core()
    register(core, 1, [1], now=0.0)
    beat(core, 0.0)
    now = 10.0
    while core.batch_stop(1, now) is None:
        renewal = renew(core, now)
        assert renewal.give_up_at <= max(30.0, now + MIN_RETRY)
        assert core.fence_time(core.batch(1)) <= 30.0 + GRACE
        core.failed(renewal.token, now)
        now = core.next_wake(now)


def test_I8_frozen_stop_is_not_revived_by_a_later_answer() -> None:
    core = make_core(d=5.0)
    register(core, 1, [1, 2], now=0.0)
    beat(core, 0.0)
    core.request_renewal(1, 4.9)
    renewal = renew(core, 4.9)
    assert core.batch_stop(1, 5.0) is StopReason.DURATION
    effects = core.answered(renewal.token, 5.1, {1: CANCEL, 2: RECLAIMED})
    # The scope already cancelled both handlers: no second cancellation for either (I8).
    assert effects.cancels == []
    assert effects.stops == []
    assert core.job(1, 1).stop is None  # the duration came first: it decides the outcome
    assert core.job(1, 2).stop is StopReason.RECLAIMED  # lost: nothing may be written
    assert core.batch_stop(1, 5.1) is StopReason.DURATION
    assert core.scope_deadline(1) == 5.0
    # Job 1's handler is still unwinding, so its lease is renewed (CANCEL renews too).
    assert core.batch(1).lease_deadline == 4.9 + V
    assert carried_jobs(renew(core, 10.0)) == {1}


def test_stopped_batch_keeps_its_lease_until_its_last_handler_exits() -> None:
    """docs/protocol.rst §4: a handler unwinding past its duration still owns its job."""
    core = make_core(d=5.0)
    register(core, 1, [1, 2], now=0.0)
    beat(core, 0.0)
    assert core.batch_stop(1, 5.0) is StopReason.DURATION
    for now in (10.0, 20.0, 30.0, 40.0):  # well past the first lease (30)
        assert core.next_wake(now) == now
        effects = beat(core, now)
        assert effects == Effects(moved={1})
        assert core.batch(1).lease_deadline == now + V
        assert core.scope_deadline(1) == 5.0  # the scope stays stopped: one cancellation
        assert core.batch_stop(1, now) is StopReason.DURATION
    core.job_done(1, 1)  # one handler exited and its outcome is written
    renewal = renew(core, 50.0)
    assert carried_jobs(renewal) == {2}
    core.answered(renewal.token, 50.0, {2: EXT})
    core.job_done(1, 2)  # the last one too: nothing left to renew
    assert core.next_wake(50.0) == math.inf
    assert core.next_renewal(60.0) is None


@pytest.mark.parametrize(
    ("stop", "expected"),
    [
        ("duration", StopReason.DURATION),
        ("shutdown", StopReason.SHUTDOWN),
        ("cancel, then duration", StopReason.DURATION),
    ],
)
def test_stopped_batch_is_renewed_through_every_kind_of_stop(
    stop: str, expected: StopReason
) -> None:
    core = make_core(d=15.0 if stop.startswith("cancel") else 5.0)
    register(core, 1, [1], now=0.0)
    beat(core, 0.0)
    verdict = EXT
    if stop == "shutdown":
        core.begin_shutdown(now=1.0, grace=2.0)
    if stop.startswith("cancel"):
        assert beat(core, 10.0, {1: CANCEL}).cancels == [(1, 1)]
        verdict = CANCEL  # the row says so at every renewal from now on
    for now in (20.0, 30.0, 40.0, 50.0):  # the stop passed; so did the first lease (30)
        effects = beat(core, now, {1: verdict})
        assert effects.cancels == [] and effects.stops == []
        assert core.batch(1).lease_deadline == now + V
        assert core.scope_deadline(1) < now
    assert core.batch_stop(1, 50.0) is expected
    # A cancel that came first stays the job's stop: it decides the outcome (first wins).
    assert core.job(1, 1).stop is (StopReason.CANCELLED if stop.startswith("cancel") else None)


def test_stopped_batch_renewals_end_when_its_lease_runs_out() -> None:
    """Renewals that keep failing lose the lease of a stopped batch: then none is sent; the
    first stop stands (it decides the outcome, written fenced by claim_seq)."""
    core = make_core(d=5.0)
    register(core, 1, [1], now=0.0)
    beat(core, 0.0)
    assert core.batch_stop(1, 5.0) is StopReason.DURATION
    last, now = 0.0, 10.0
    while now < math.inf and (renewal := core.next_renewal(now)) is not None:
        core.failed(renewal.token, now)
        last, now = now, core.next_wake(now)
    # The last retry went out before the fence; the next would come after it, so the guard
    # does not wake for it (docs/protocol.rst §10, refinement 16).
    assert last < 30.0 and now == math.inf
    assert core.batch(1).next_due >= 30.0
    assert not core.batch(1).lost
    assert core.next_wake(30.0) == math.inf
    assert core.batch(1).lost  # judged at the fence
    assert core.batch_stop(1, 30.0) is StopReason.DURATION
    assert core.next_renewal(1000.0) is None
    assert core.request_renewal(1, 1000.0)  # a cancel notice cannot revive it either
    assert core.next_renewal(1000.0) is None


def test_I12_cancel_first_then_lease_lost_stays_cancelled() -> None:
    """A job whose cancel came first and whose lease then expired before its handler
    returned ends failed (cancelled): the first stop wins."""
    core = make_core()
    register(core, 1, [1], now=0.0)
    assert beat(core, 0.0, {1: CANCEL}).cancels == [(1, 1)]
    now = 10.0
    while core.batch_stop(1, now) is None:
        core.failed(renew(core, now).token, now)
        now = core.next_wake(now)
    assert core.batch_stop(1, now) is StopReason.LEASE_EXPIRED and core.batch(1).lost
    result = decide(
        job_stop=core.job(1, 1).stop,
        batch_stop=core.batch_stop(1, now),
        error=None,
        attempt=1,
        max_attempts=3,
        max_job_duration=None,
    )
    assert result == Outcome(OutcomeKind.FAILED, "cancelled: cancel requested")


def test_I8_stop_reason_is_the_first_deadline_however_late_the_core_looks() -> None:
    # Nothing looks at the batch between its duration deadline (5) and its fence (30): the
    # scope stopped it at 5, for its duration, and that is its reason.
    core = make_core(d=5.0)
    register(core, 1, [1], now=0.0)
    assert core.batch_stop(1, 100.0) is StopReason.DURATION
    assert core.batch(1).lost
    core = make_core()
    register(core, 1, [1], now=0.0)
    core.begin_shutdown(now=0.0, grace=50.0)
    assert core.batch_stop(1, 100.0) is StopReason.LEASE_EXPIRED  # the fence came first


def test_I4_scope_deadline_is_min_of_fence_duration_and_shutdown() -> None:
    core = make_core(d=20.0)
    register(core, 1, [1], now=5.0)  # lease 35, duration 25
    register(core, 2, [2], now=5.0, claim_sent=-10.0)  # lease 20
    assert core.scope_deadline(1) == 25.0
    assert core.scope_deadline(2) == 20.0
    effects = core.begin_shutdown(now=10.0, grace=2.0)
    assert effects.moved == {1, 2}
    assert core.scope_deadline(1) == core.scope_deadline(2) == 12.0
    core.begin_shutdown(now=11.0, grace=30.0)  # a later, longer shutdown does not extend
    assert core.scope_deadline(1) == 12.0


def test_I4_duration_counts_from_registration_not_claim() -> None:
    core = make_core(d=20.0)
    register(core, 1, [1], now=5.0, claim_sent=1.0)
    assert core.batch(1).duration_deadline == 25.0
    beat(core, 5.0)
    beat(core, 15.0)  # the pool beat is anchored at the first registration
    assert core.batch(1).lease_deadline == 45.0
    assert core.scope_deadline(1) == 25.0
    assert core.batch_stop(1, 24.99) is None
    assert core.batch_stop(1, 25.0) is StopReason.DURATION


@pytest.mark.parametrize(
    ("duration", "shutdown_after", "expected"),
    [
        (30.0, 30.0, StopReason.LEASE_EXPIRED),  # all three together: lease wins
        (30.0, None, StopReason.LEASE_EXPIRED),
        (None, 30.0, StopReason.LEASE_EXPIRED),
        (20.0, 20.0, StopReason.DURATION),  # duration and shutdown together
        (20.0, None, StopReason.DURATION),
        (None, 20.0, StopReason.SHUTDOWN),
    ],
)
def test_I8_batch_stop_order_when_deadlines_coincide(
    duration: float | None, shutdown_after: float | None, expected: StopReason
) -> None:
    core = make_core(d=duration)
    register(core, 1, [1], now=0.0)  # lease 30
    if shutdown_after is not None:
        core.begin_shutdown(now=0.0, grace=shutdown_after)
    deadline = core.scope_deadline(1)
    assert core.batch_stop(1, deadline - 0.001) is None
    assert core.batch_stop(1, deadline) is expected
    assert core.batch_stop(1, deadline + 100) is expected  # frozen at first sight


# -- GuardCore: cancel notices (I12) ----------------------------------------------------


def test_I12_cancel_notice_renews_the_batch_at_once() -> None:
    core = make_core()
    register(core, 1, [1], now=0.0)
    register(core, 2, [2], now=0.0)
    beat(core, 0.0)
    assert core.next_wake(0.0) == 10.0
    assert core.request_renewal(2, 3.0)
    assert core.next_wake(3.0) == 3.0
    renewal = renew(core, 3.0)
    assert renewal.batch_ids == frozenset({2})
    effects = core.answered(renewal.token, 3.05, {2: CANCEL})
    assert effects.cancels == [(2, 2)]
    assert not core.request_renewal(999, 3.1)


def test_I12_cancel_notice_during_an_in_flight_renewal_is_not_lost() -> None:
    core = make_core()
    register(core, 1, [1], now=0.0)
    beat(core, 0.0)
    renewal = renew(core, 10.0)  # executes before the cancel flag is committed
    assert core.request_renewal(1, 10.05)  # NOTIFY arrives while it is in flight
    core.answered(renewal.token, 10.1, {1: EXT})  # so it could not see the flag
    assert core.next_wake(10.1) <= 10.1  # the batch must be renewed again at once


@pytest.mark.parametrize("ending", ["error", "abandoned"])
def test_I12_cancel_notice_during_a_renewal_that_fails_is_not_lost(ending: str) -> None:
    core = make_core()
    register(core, 1, [1], now=0.0, claim_sent=-25.0)  # lease 5: bounds the renewal timeout
    register(core, 2, [2], now=0.0)  # lease 30
    renewal = renew(core, 0.0)
    assert renewal.batch_ids == frozenset({1, 2})
    assert renewal.abandon_at == 5.25
    assert core.request_renewal(2, 1.0)  # NOTIFY arrives while it is in flight
    if ending == "error":
        now = 1.1
        core.failed(renewal.token, now)
    else:
        now = renewal.abandon_at
        assert core.poll(now).abandoned == renewal.token
    assert core.next_wake(now) <= now  # not after retry_delay(H, remaining) = 10 s
    assert 2 in renew(core, now).batch_ids


@pytest.mark.parametrize("now", [4.3, 8.1, 16.2])
def test_I10_extended_batch_is_not_due_again_at_once(now: float) -> None:
    # (k + 1) * 0.1 can round down onto ``now`` itself; the next beat must still be later.
    core = make_core(v=1.0, h=0.1)
    register(core, 1, [1], now=0.0)  # anchors the pool beat at 0
    register(core, 2, [2], now=now)
    effects = beat(core, now)
    assert effects.moved == {2}
    assert now < core.next_wake(now) <= now + 0.1
    assert core.next_renewal(now) is None


# -- a small driver: database loss (I3) -------------------------------------------------


@pytest.mark.parametrize("loss", [0.5, 9.99, 10.0, 10.01, 15.0, 19.99, 25.0])
@pytest.mark.parametrize("mode", ["error", "timeout"])
def test_I3_after_database_loss_handler_stops_within_v_minus_h_and_v(
    loss: float, mode: str
) -> None:
    """Renewals succeed before ``loss`` and fail after it (at once, or at their give-up)."""
    core = make_core()
    register(core, 1, [1], now=0.0)
    last_ok_sent = 0.0
    pending: tuple[Renewal, float] | None = None  # a failing renewal and when it fails
    now = 0.0
    for step in range(200_000):
        now = step / 1000
        core.poll(now)
        if pending is not None and pending[1] <= now:
            core.failed(pending[0].token, now)
            pending = None
        if core.batch_stop(1, now) is not None:
            break
        renewal = core.next_renewal(now)
        if renewal is None:
            continue
        if now < loss:
            core.answered(renewal.token, now, all_of(renewal))
            last_ok_sent = now
        else:
            pending = (renewal, now if mode == "error" else renewal.give_up_at)
    assert core.batch_stop(1, now) is StopReason.LEASE_EXPIRED
    assert loss + V - H <= now <= loss + V
    assert now <= last_ok_sent + V + 0.001


def _fail_until_due_past_the_fence(core: GuardCore, now: float) -> float:
    """Fail batch 1's renewals until its next retry lies at or past its fence; the time of
    the last failure."""
    while core.batch(1).next_due < core.batch(1).lease_deadline:
        now = core.next_wake(now)
        core.failed(renew(core, now).token, now)
    return now


def test_next_wake_skips_a_retry_due_past_the_fence() -> None:
    """docs/protocol.rst §10, refinement 16: a retry that falls at or after the batch's
    fence would renew nothing (the lease is lost by then), so the guard does not wake for
    it; once the fence passes, the batch is lost."""
    core = make_core()
    register(core, 1, [1], now=0.0)
    beat(core, 0.0)
    now = _fail_until_due_past_the_fence(core, 10.0)
    batch = core.batch(1)
    assert now < batch.lease_deadline <= batch.next_due
    assert core.next_wake(now) == math.inf
    assert not batch.lost
    assert core.next_wake(batch.lease_deadline) == math.inf
    assert batch.lost


def test_a_batch_due_past_its_fence_still_rides_along_before_it() -> None:
    """The wake is skipped, not the batch: a renewal sent before its fence for another
    batch still carries it when it is due within the ride-along window (refinement 10),
    and its answer renews it."""
    core = make_core()
    register(core, 1, [1], now=0.0)
    first = renew(core, 0.0)
    core.answered(first.token, 0.5, all_of(first))  # the window: min(0.5 s, H / 2)
    now = _fail_until_due_past_the_fence(core, 10.0)
    due = core.batch(1).next_due
    fence = core.batch(1).lease_deadline
    when = (now + fence) / 2  # before the fence, with batch 1 due within 0.5 s
    assert now < when < fence <= due <= when + 0.5
    assert core.next_wake(now) == math.inf  # no wake for batch 1 (refinement 16)
    register(core, 2, [2], now=when)
    renewal = renew(core, when)
    assert renewal.batch_ids == {1, 2}
    core.answered(renewal.token, when, all_of(renewal))
    assert core.batch(1).lease_deadline == when + V
    assert not core.batch(1).lost
