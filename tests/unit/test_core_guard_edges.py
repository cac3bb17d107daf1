"""The guard core on the edges of its bookkeeping (trioqueue/_core/guard_rules.py).

The runtime reports a handler's exit (``work_ended``, ``job_done``) by batch and job id,
and may do so after the batch is gone (unregistered once its scope ended) or for a job the
batch does not hold: the core ignores such a report rather than fail the runtime's task.
A job looked up by the wrong id is a KeyError naming that id, in a batch of one as in a
larger one. And the pool's beat is anchored where the guard's first batch registered, at
whatever time that was (docs/protocol.rst §10, refinement 5); a batch due within half a beat
rides along with a statement that will likely take that long anyway; and a first beat
that finished work would waive is sent at once when the claim left no time to wait. Only
GuardCore's public methods are used here.
"""

from __future__ import annotations

import pytest

from trioqueue._core.guard_rules import GuardCore
from trioqueue._core.timing import Timing
from trioqueue._core.wire import Verdict

V, H = 30.0, 10.0


def _register(core: GuardCore, batch_id: int, job_ids: list[int], now: float) -> None:
    accepted = core.register(
        batch_id,
        [(job_id, 1) for job_id in job_ids],
        claim_sent=now,
        now=now,
        wall_now=now,
        row_deadlines=[now + V] * len(job_ids),
    )
    assert accepted


def _core_with(batch_id: int, job_ids: list[int], now: float = 0.0) -> GuardCore:
    core = GuardCore(Timing(visibility_timeout=V, heartbeat_interval=H))
    _register(core, batch_id, job_ids, now)
    return core


def _renew_and_extend(core: GuardCore, now: float, answered: float | None = None) -> frozenset[int]:
    renewal = core.next_renewal(now)
    assert renewal is not None
    extended = {item.job_id: Verdict.EXTENDED for item in renewal.items}
    core.answered(renewal.token, now if answered is None else answered, extended)
    return renewal.batch_ids


@pytest.mark.parametrize("job_ids", [[7], [7, 8]], ids=["batch of one", "batch of two"])
def test_a_report_for_a_batch_that_is_gone_or_a_job_it_lacks_is_ignored(
    job_ids: list[int],
) -> None:
    core = _core_with(1, job_ids)
    core.work_ended(1, 99)
    core.job_done(1, 99)
    core.work_ended(2, 7)
    core.job_done(2, 7)
    core.unregister(1)
    core.work_ended(1, 7)
    core.job_done(1, 7)
    assert core.batch_ids() == []


@pytest.mark.parametrize("job_ids", [[7], [7, 8]], ids=["batch of one", "batch of two"])
def test_a_job_looked_up_by_another_id_is_a_key_error_naming_it(job_ids: list[int]) -> None:
    core = _core_with(1, job_ids)
    assert core.job(1, 7).job_id == 7
    with pytest.raises(KeyError) as raised:
        core.job(1, 99)
    assert raised.value.args == (99,)


def test_a_batch_claimed_between_beats_joins_the_beat_anchored_at_the_first_claim() -> None:
    # The first batch registers at 100 s: the pool beats at 110, 120, ... A batch claimed at
    # 105 has its first beat at once, then rides on the pool's beat at 110 (the earlier of
    # 110 and 105 + H), in one statement with the first batch.
    core = _core_with(1, [1], now=100.0)
    assert _renew_and_extend(core, 100.0) == {1}
    _register(core, 2, [2], 105.0)
    assert _renew_and_extend(core, 105.0) == {2}
    assert core.next_renewal(109.9) is None
    assert _renew_and_extend(core, 110.0) == {1, 2}


def test_a_batch_due_within_half_a_beat_rides_along_when_statements_are_slow() -> None:
    # The last renewal took 5 s (H / 2), so a statement sent at 6 s is likely back at 11 s:
    # the first batch, due at 10 s (4 s later, more than H / 3), goes along rather than
    # waiting for the slot and then going alone.
    core = _core_with(1, [1], now=0.0)
    assert _renew_and_extend(core, 0.0, answered=5.0) == {1}
    _register(core, 2, [2], 6.0)
    assert _renew_and_extend(core, 6.0) == {1, 2}


def test_a_claim_with_no_time_to_wait_beats_at_once_though_its_work_has_ended() -> None:
    # The row's lease runs out at 20 s = V - H after the claim: waiving the first beat
    # would leave no beat before the lease is down to V - H, so the beat goes out now.
    core = GuardCore(Timing(visibility_timeout=V, heartbeat_interval=H))
    accepted = core.register(
        1, [(1, 1)], claim_sent=0.0, now=0.0, wall_now=0.0, row_deadlines=[V - H]
    )
    assert accepted
    core.work_ended(1, 1)
    renewal = core.next_renewal(0.0)
    assert renewal is not None and renewal.batch_ids == {1}


def test_a_waived_first_beat_goes_out_on_the_pools_next_beat() -> None:
    # A batch claimed at 5 s whose work has already ended owes no first beat (refinement
    # 12): it is due on the pool's beat at 10 s instead, and then it is renewed, though it
    # could wait until 15 s (V - H before its lease ends).
    core = _core_with(1, [1], now=0.0)
    assert _renew_and_extend(core, 0.0) == {1}
    _register(core, 2, [2], 5.0)
    core.work_ended(2, 2)
    assert core.next_renewal(5.0) is None
    assert _renew_and_extend(core, 10.0) == {1, 2}
