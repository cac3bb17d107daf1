"""The exhaustive model check of the guard core (proofs/model_check.py), in small scopes.

``python proofs/run.py`` explores the larger scopes; these run in seconds with the unit
tests, so a change to the core that breaks I2, I4, I5, I6, I8, docs/protocol.rst §4 (a
waived first beat included, §10), the retry pace or the two sightings of ``gone`` (§2) or
the in-flight rescue (§3) in a small scope fails here too, and every negative twin must
still be caught (the checker can fail).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from tests._modules import load_file

mc = load_file(Path(__file__).parents[2] / "proofs" / "model_check.py")

SMALL_SCOPES = [
    mc.Scope(
        "1 batch x 2 jobs, 2 renewals, every verdict, a cancel notice",
        jobs_per_batch=(2,),
        renewals=2,
        shutdowns=0,
        beats=0,
    ),
    mc.Scope(
        "2 batches x 1 job, 2 renewals, every verdict",
        jobs_per_batch=(1, 1),
        renewals=2,
        notices=0,
        shutdowns=0,
        beats=0,
    ),
    mc.Scope(
        "1 batch x 1 job, 2 renewals, every verdict, claim hooks, short claim leases",
        jobs_per_batch=(1,),
        renewals=2,
        notices=0,
        shutdowns=0,
        beats=0,
        hooks=(0.0, 0.5),
        short_leases=(0.125,),
    ),
    mc.Scope(
        "1 batch x 1 job, 2 renewals, every verdict, a cancel notice, outcomes written later",
        jobs_per_batch=(1,),
        renewals=2,
        shutdowns=0,
        beats=0,
        writes=True,
    ),
]


@pytest.mark.parametrize("scope", SMALL_SCOPES, ids=lambda scope: str(scope.name))
def test_I2_I4_I5_I6_I8_and_sections_2_to_4_hold_in_every_reachable_state(scope: object) -> None:
    result = mc.explore(scope)
    assert result.violation is None, (result.violation, result.trace)
    assert result.states > 1000  # the search went somewhere: renewals, answers, stops
    assert result.transitions > result.states


@pytest.mark.parametrize("twin", mc.TWINS, ids=lambda twin: str(twin[0].__name__))
def test_each_negative_twin_is_caught_with_a_trace(twin: tuple[type, str]) -> None:
    core, invariant = twin
    result = mc.explore(mc.TWIN_SCOPE, core)
    assert mc.twin_found(result, invariant), result.violation
    assert result.trace, "a counterexample comes with the steps that lead to it"


def test_the_canonical_key_ignores_the_absolute_time() -> None:
    """Dedup is real: the same world shifted in time is one state."""
    scope = SMALL_SCOPES[1]
    worlds = []
    for start in (0.0, 1000.0):
        world = mc.World(core=mc.GuardCore(scope.timing), now=start)
        (_, world), *_ = mc.register(world, scope)
        worlds.append(world)
    assert mc.key(worlds[0]) == mc.key(worlds[1])


#: One batch whose claim arrives with 0.125 s of lease: its first renewal gives up at 0.25 s,
#: after the fence, so its answer may come in between (docs/protocol.rst §3).
SHORT = mc.Scope(
    "1 batch x 1 job, 1 renewal, a short claim lease",
    jobs_per_batch=(1,),
    renewals=1,
    notices=0,
    shutdowns=0,
    beats=0,
    short_leases=(0.125,),
)


def take(world: Any, scope: Any, label: str) -> Any:
    """The successor of ``world`` whose step is named ``label``."""
    for name, nxt in mc.successors(world, scope):
        if name == label:
            return nxt
    raise AssertionError(f"no step {label!r} from {world.now}")


def sent_with_short_lease(core: type) -> Any:
    world = mc.World(core=core(SHORT.timing))
    for label in (
        "batch 1 registers at 0.0, 0.125 s of lease",
        "guard sends renewal 1 of [1] (interruptible)",
        "time passes to 0.125",
    ):
        world = take(world, SHORT, label)
    return world


def test_an_answer_in_flight_after_the_lease_before_give_up_extends_the_fence() -> None:
    world = take(
        sent_with_short_lease(mc.GuardCore), SHORT, "time passes to 0.1875, half-way to 0.25"
    )
    world = take(world, SHORT, "renewal 1 answers at 0.1875: all renewed")
    batch = world.core.batch(1)
    assert not batch.lost
    assert batch.lease_deadline == 2.0  # sent at 0 + V


def test_an_answer_at_the_give_up_time_finds_the_fence_fired() -> None:
    world = take(sent_with_short_lease(mc.GuardCore), SHORT, "time passes to 0.25")
    world = take(world, SHORT, "renewal 1 answers at 0.25: all renewed")
    assert world.core.batch(1).lost
    assert world.core.batch(1).lease_deadline == 0.125


def test_a_core_that_clears_the_slot_before_judging_expiry_breaks_the_rescue() -> None:
    world = sent_with_short_lease(mc.ExpiryAfterSlotCleared)
    with pytest.raises(mc.Violation, match=r"^§3 in flight: batch 1 renewed at 0\.125"):
        take(world, SHORT, "renewal 1 answers at 0.125: all renewed")


def test_clone_core_copies_every_field_even_one_the_core_gains() -> None:
    core = mc.GuardCore(mc.TIMING)
    core.register(1, [(10, 1)], claim_sent=0.0, now=0.0, wall_now=0.0, row_deadlines=[2.0])
    core.gained = {1: [2.0]}  # a field the model has never heard of
    copy = mc.clone_core(core)
    copy.gained[1].append(3.0)
    copy.batch(1).jobs[10].gone_seen = True
    copy._due.clear()
    assert core.gained == {1: [2.0]}
    assert not core.batch(1).jobs[10].gone_seen
    assert core._due == [(0.0, 1)]
    assert mc.snapshot(mc.clone_core(core)) == mc.snapshot(core)


class JudgesWhenAsked(mc.GuardCore):  # type: ignore[misc,name-defined]
    """A ``next_wake(now)`` that judges leases as it answers (docs/protocol.rst §10)."""

    def next_wake(self, now: float) -> float:
        for batch in self._batches.values():
            batch.lost = batch.lease_deadline <= now
        return math.inf


def test_next_wake_is_asked_of_a_copy_unless_the_guard_task_asks() -> None:
    core = JudgesWhenAsked(mc.TIMING)
    core.register(1, [(10, 1)], claim_sent=0.0, now=0.0, wall_now=0.0, row_deadlines=[2.0])
    assert mc.next_wake(core, 3.0) == math.inf
    assert not core.batch(1).lost  # a check changes nothing
    mc.next_wake(core, 3.0, judge=True)
    assert core.batch(1).lost  # the runtime's own call does
