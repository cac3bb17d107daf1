"""ExponentialBackoff's settings on their bounds (trioqueue/_core/backoff.py).

Each bound ``problems()`` checks is inclusive, as its sentences say ("at least",
"between"): a value exactly on it is valid, a value just beyond it is refused, with that
sentence.
"""

from __future__ import annotations

import pytest

from trioqueue._core.backoff import ExponentialBackoff


def test_a_base_of_exactly_one_is_valid_and_keeps_the_delay_flat() -> None:
    flat = ExponentialBackoff(initial=5.0, base=1.0, cap=300.0, jitter=0.0)
    assert flat.problems() == []
    assert [flat.delay(attempt, 0.5) for attempt in (1, 2, 10)] == [5.0, 5.0, 5.0]


def test_a_base_below_one_is_refused_in_words() -> None:
    assert ExponentialBackoff(base=0.99).problems() == ["backoff.base must be at least 1"]


def test_a_cap_equal_to_the_initial_delay_is_valid() -> None:
    assert ExponentialBackoff(initial=30.0, cap=30.0).problems() == []
    assert ExponentialBackoff(initial=30.0, cap=29.9).problems() == [
        "backoff.cap must be at least backoff.initial"
    ]


@pytest.mark.parametrize("jitter", [0.0, 1.0])
def test_a_jitter_on_either_end_of_zero_to_one_is_valid(jitter: float) -> None:
    assert ExponentialBackoff(jitter=jitter).problems() == []


@pytest.mark.parametrize("jitter", [-0.01, 1.01])
def test_a_jitter_outside_zero_to_one_is_refused_in_words(jitter: float) -> None:
    assert ExponentialBackoff(jitter=jitter).problems() == [
        "backoff.jitter must be between 0 and 1"
    ]
