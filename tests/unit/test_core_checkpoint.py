"""What the guard's renewals carry of a job's checkpoint (docs/protocol.rst §16, I18).

A renewal carries the latest checkpoint unless the row surely holds it already: a renewal
that carried it came back with a verdict that renewed the row. A failed, abandoned or
non-renewing answer leaves it unsure, so the next renewal sends the latest again, even when
the latest is the value stored before (the lost renewal may have overwritten it). The
stateful test (test_core_guard_stateful.py) checks the same on random runs; these are the
sequences it could miss.
"""

from __future__ import annotations

import pytest

from trioqueue._core.checkpoint import CheckpointSlot, latest_checkpoint
from trioqueue._core.guard_rules import GuardCore
from trioqueue._core.timing import Timing
from trioqueue._core.wire import Verdict

V, H = 30.0, 10.0
JOB = 7


def _core() -> GuardCore:
    core = GuardCore(Timing(visibility_timeout=V, heartbeat_interval=H))
    assert core.register(1, [(JOB, 1)], claim_sent=0.0, now=0.0, wall_now=0.0, row_deadlines=[V])
    return core


def _checkpoint(core: GuardCore, text: str) -> None:
    """What ``ctx.checkpoint`` does with the encoded value."""
    lease = core.job(1, JOB)
    if lease.checkpoint is None:
        lease.checkpoint = CheckpointSlot(text)
    else:
        lease.checkpoint.latest = text


def _send(core: GuardCore, now: float) -> tuple[int, str | None]:
    renewal = core.next_renewal(now)
    assert renewal is not None
    [item] = renewal.items
    return renewal.token, item.checkpoint


def test_the_latest_goes_once_and_an_unchanged_one_is_not_sent_again() -> None:
    core = _core()
    token, carried = _send(core, 0.0)
    assert carried is None  # none set yet
    core.answered(token, 0.1, {JOB: Verdict.EXTENDED})
    _checkpoint(core, "1")
    _checkpoint(core, "2")  # the latest wins
    token, carried = _send(core, H)
    assert carried == "2"
    core.answered(token, H + 0.1, {JOB: Verdict.CANCEL_REQUESTED})  # renews: stored
    token, carried = _send(core, 2 * H)
    assert carried is None  # I18: the row holds it; not re-sent each beat
    core.answered(token, 2 * H + 0.1, {JOB: Verdict.CANCEL_REQUESTED})
    _checkpoint(core, "2")  # the same value again: still held
    token, carried = _send(core, 3 * H)
    assert carried is None


def test_a_value_set_while_its_renewal_is_out_goes_with_the_next() -> None:
    core = _core()
    _checkpoint(core, "1")
    token, carried = _send(core, 0.0)
    assert carried == "1"
    _checkpoint(core, "2")
    core.answered(token, 0.1, {JOB: Verdict.EXTENDED})
    assert _send(core, H)[1] == "2"


@pytest.mark.parametrize("how", ["failed", "abandoned", "unchanged", "left out", "gone once"])
def test_an_unsure_renewal_makes_the_next_send_the_latest_even_the_old_value(how: str) -> None:
    """A stored, B carried by a renewal that may or may not have written it, then A set
    again: the row may hold B, so A goes out."""
    core = _core()
    _checkpoint(core, "1")
    token, _ = _send(core, 0.0)
    core.answered(token, 0.1, {JOB: Verdict.EXTENDED})  # "1" stored
    _checkpoint(core, "2")
    token, carried = _send(core, H)
    assert carried == "2"
    now = H + 0.1
    if how == "failed":
        core.failed(token, now)
    elif how == "abandoned":
        # Abandoned only past the fence (its timeout ends at the earliest lease): the
        # batch is renewed no more, and only the final write, which carries the latest
        # anyway, is left; the slot knows nothing stored.
        current = core.current
        assert current is not None
        assert core.poll(current.abandon_at).abandoned == token
        slot = core.job(1, JOB).checkpoint
        assert slot is not None
        assert (slot.stored, slot.carried) == (None, None)
        return
    else:
        verdicts = {"unchanged": {JOB: Verdict.UNCHANGED}, "left out": {}}.get(
            how, {JOB: Verdict.GONE}
        )
        core.answered(token, now, verdicts)
    _checkpoint(core, "1")
    renewal = core.next_renewal(max(now, core.batch(1).next_due))
    assert renewal is not None
    assert [item.checkpoint for item in renewal.items] == ["1"]


def test_the_final_write_carries_the_latest_stored_or_not() -> None:
    core = _core()
    assert latest_checkpoint(core.job(1, JOB).checkpoint) is None
    _checkpoint(core, "1")
    token, _ = _send(core, 0.0)
    core.answered(token, 0.1, {JOB: Verdict.EXTENDED})
    assert latest_checkpoint(core.job(1, JOB).checkpoint) == "1"  # stored, and carried again
