"""The exhaustive model check of the guard core (proofs/model_check.py), in small scopes.

``python proofs/run.py`` explores the larger scopes; these run in seconds with the unit
tests, so a change to the core that breaks I2, I5, I6, I8 or docs/protocol.rst §4 (a waived
first beat included, §10) in a small scope fails here too, and every negative twin must still be caught (the checker can fail).
"""

from __future__ import annotations

from pathlib import Path

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
        "1 batch x 1 job, 2 renewals, every verdict, a cancel notice, outcomes written later",
        jobs_per_batch=(1,),
        renewals=2,
        shutdowns=0,
        beats=0,
        writes=True,
    ),
]


@pytest.mark.parametrize("scope", SMALL_SCOPES, ids=lambda scope: str(scope.name))
def test_I2_I5_I6_I8_and_section_4_hold_in_every_reachable_state(scope: object) -> None:
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
