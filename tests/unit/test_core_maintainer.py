"""The maintainer's timing decisions (trioqueue._core.maintainer, docs/protocol.rst §15):
a state machine over a float clock that sends claims and renewals, answers them in every
order and at every delay, and checks the lease rules after each step."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from trioqueue._core.maintainer import Change, LeaseCall, MaintainerCore

V, H, M = 10.0, 3.0, 7.0

# Mostly answers well within a lease, sometimes past it.
delays = st.one_of(
    st.floats(min_value=0.0, max_value=1.0), st.floats(min_value=0.0, max_value=2 * V)
)


class MaintainerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.core = MaintainerCore(V, H, M)
        self.now = 0.0
        self.call: LeaseCall | None = None
        # Sends of the calls whose success was accepted while this holding lasted.
        self.accepted: list[float] = []
        self.last_pass: float | None = None
        self.passes: list[float] = []
        self.seq = 0  # the store's fence, as the claims answer it
        self.was_holding = False
        self.failures = 0  # calls that failed since the latest accepted one

    # -- the clock and the lease loop ----------------------------------------------------

    @rule(dt=delays)
    def advance(self, dt: float) -> None:
        self.now += dt
        self._observe(self.core.tick(self.now))

    @rule()
    def wake(self) -> None:
        """Jump to when the lease loop wakes, as the runtime does."""
        at = self.core.wake_at()
        if math.isfinite(at):
            self.now = max(self.now, at)
            self._observe(self.core.tick(self.now))

    @precondition(lambda self: self.call is None)
    @rule()
    def send(self) -> None:
        """Wait for the lease loop's next wake, as the runtime does, and send what is due."""
        self.now = max(self.now, self.core.wake_at())
        self._observe(self.core.tick(self.now))
        call = self.core.call(self.now)
        if call is not None:
            assert call.timeout > 0
            if call.seq is not None:
                assert call.timeout <= max(0.25, V)
            self.call = call

    @precondition(lambda self: self.call is not None and self.call.is_claim)
    @rule(dt=delays, granted=st.booleans())
    def answer_claim(self, dt: float, granted: bool) -> None:
        assert self.call is not None
        call, self.call = self.call, None
        self.now += dt
        if granted:
            self.seq += 1
        change = self.core.claimed(call, self.seq if granted else None, self.now)
        if granted and self.now < call.sent + V:
            assert change is Change.BECAME
            assert self.core.seq == self.seq
            self.accepted = [call.sent]
            self.failures = 0
        else:
            assert not self.core.holding(self.now)
        self._observe(change)

    @precondition(lambda self: self.call is not None and not self.call.is_claim)
    @rule(dt=delays, extended=st.booleans())
    def answer_renewal(self, dt: float, extended: bool) -> None:
        assert self.call is not None
        call, self.call = self.call, None
        self.now += dt
        fence_before = self.core.fence
        held_same = self.core.seq == call.seq and self.now < fence_before
        change = self.core.renewed(call, extended, self.now)
        if held_same and extended:
            assert change is Change.NONE
            assert self.core.fence >= fence_before  # never moves back
            self.accepted.append(call.sent)
            self.failures = 0
        else:
            # Refused, or answered at or after the fence: a fired fence stays fired.
            assert not self.core.holding(self.now)
        self._observe(change)

    @precondition(lambda self: self.call is not None)
    @rule(dt=delays)
    def call_fails(self, dt: float) -> None:
        assert self.call is not None
        call, self.call = self.call, None
        self.now += dt
        fence_before = self.core.fence
        self._observe(self.core.failed(call, self.now))
        self.failures += 1
        if self.core.holding(self.now):
            assert self.core.fence == fence_before  # a failure extends nothing
            # Tried again before the fence passes.
            assert self.core.wake_at() <= self.core.fence

    @rule()
    def batch_fenced_out(self) -> None:
        self._observe(self.core.refused(self.now))
        assert not self.core.holding(self.now)

    # -- passes --------------------------------------------------------------------------

    @rule()
    def make_pass(self) -> None:
        due = self.core.pass_due(self.now)
        if due is None:
            assert not self.core.holding(self.now)
            return
        assert self.core.holding(self.now)
        if due <= self.now:
            self.core.pass_started(self.now)
            self.passes.append(self.now)

    # -- the rules ------------------------------------------------------------------------

    def _observe(self, change: Change) -> None:
        holding = self.core.holding(self.now)
        if change is Change.BECAME:
            assert holding and not self.was_holding
        if change is Change.LOST:
            assert not holding
            self.accepted = []
        if not holding:
            self.accepted = [] if self.core.seq is None else self.accepted
        self.was_holding = holding

    @invariant()
    def fence_is_the_latest_accepted_send_plus_v(self) -> None:
        if self.core.holding(self.now):
            assert self.accepted, "holding without an accepted claim"
            assert self.core.fence == max(self.accepted) + V
            assert self.core.fence - self.now <= V * (1 + 1e-9)

    @invariant()
    def the_holder_renews_every_h(self) -> None:
        if self.core.holding(self.now) and self.call is None and not self.failures:
            assert self.core.wake_at() <= max(self.accepted) + H

    @invariant()
    def passes_are_an_interval_apart(self) -> None:
        for earlier, later in zip(self.passes, self.passes[1:], strict=False):
            assert later - earlier >= M

    @invariant()
    def a_call_is_always_coming(self) -> None:
        if self.call is None:
            assert self.core.wake_at() < math.inf


TestMaintainerMachine = MaintainerMachine.TestCase
TestMaintainerMachine.settings = settings(max_examples=100, stateful_step_count=40, deadline=None)


def test_a_candidate_claims_at_once_then_every_h() -> None:
    core = MaintainerCore(V, H, M)
    first = core.call(0.0)
    assert first is not None and first.is_claim
    assert core.call(0.0) is None  # one call at a time
    assert core.claimed(first, None, 0.5) is Change.NONE
    assert core.call(H - 0.1) is None
    again = core.call(H)
    assert again is not None and again.is_claim


def test_a_renewal_answered_after_the_fence_does_not_revive_the_lease() -> None:
    core = MaintainerCore(V, H, M)
    claim = core.call(0.0)
    assert claim is not None
    assert core.claimed(claim, 7, 0.1) is Change.BECAME
    renewal = core.call(H)
    assert renewal is not None and renewal.seq == 7
    assert core.renewed(renewal, True, V) is Change.LOST  # answered as the fence passed
    assert not core.holding(V)
    assert core.seq is None


def test_the_fence_passes_without_an_answer() -> None:
    core = MaintainerCore(V, H, M)
    claim = core.call(1.0)
    assert claim is not None
    core.claimed(claim, 1, 1.2)
    renewal = core.call(1.0 + H)
    assert renewal is not None  # stuck: never answered
    assert core.wake_at() == 1.0 + V
    assert core.holding(1.0 + V - 0.001)
    assert core.tick(1.0 + V) is Change.LOST
    assert not core.holding(1.0 + V)


def test_a_refused_renewal_ends_the_holding_at_once() -> None:
    core = MaintainerCore(V, H, M)
    claim = core.call(0.0)
    assert claim is not None
    core.claimed(claim, 3, 0.0)
    renewal = core.call(H)
    assert renewal is not None
    assert core.renewed(renewal, False, H + 0.01) is Change.LOST
    assert core.pass_due(H + 0.01) is None


def test_a_pass_is_due_on_becoming_the_maintainer_then_every_interval() -> None:
    core = MaintainerCore(V, H, M)
    assert core.pass_due(0.0) is None
    claim = core.call(0.0)
    assert claim is not None
    core.claimed(claim, 1, 0.0)
    assert core.pass_due(0.0) == 0.0
    core.pass_started(0.5)
    assert core.pass_due(1.0) == 0.5 + M


def test_released_sends_nothing_more() -> None:
    core = MaintainerCore(V, H, M)
    claim = core.call(0.0)
    assert claim is not None
    core.claimed(claim, 1, 0.0)
    assert core.released() is Change.RELEASED
    assert not core.holding(0.0)
    assert core.wake_at() == math.inf
    assert core.released() is Change.NONE


@given(
    sent=st.floats(0, 1e6, allow_nan=False),
    delay=st.floats(0, 3 * V, allow_nan=False),
)
def test_a_claim_holds_until_its_send_plus_v_and_no_later(sent: float, delay: float) -> None:
    core = MaintainerCore(V, H, M)
    core._next_call = sent  # the candidate's cadence reached ``sent``
    claim = core.call(sent)
    assert claim is not None
    change = core.claimed(claim, 1, sent + delay)
    if sent + delay < sent + V:
        assert change is Change.BECAME
        assert core.fence == sent + V
        assert core.holding(sent + delay)
    else:
        assert change is Change.NONE
        assert not core.holding(sent + delay)


@pytest.mark.parametrize("lease_seconds", [0.02, 60.0, 3600.0])
def test_a_renewal_timeout_never_outlasts_the_fence_by_more_than_the_floor(
    lease_seconds: float,
) -> None:
    core = MaintainerCore(lease_seconds, lease_seconds / 3, 60.0)
    claim = core.call(0.0)
    assert claim is not None
    core.claimed(claim, 1, 0.0)
    renewal = core.call(lease_seconds / 3)
    assert renewal is not None
    assert renewal.sent + renewal.timeout <= max(core.fence, renewal.sent + 0.25)
