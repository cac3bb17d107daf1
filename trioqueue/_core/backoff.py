"""Retry delays: exponential, capped, jittered."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ExponentialBackoff:
    """Delay before retry number ``attempt`` (1-based): ``initial * base**(attempt-1)``.

    The delay is capped at ``cap`` and then spread by ``±jitter`` (a fraction), so that jobs
    which failed together do not all come back together.

    Args:
        initial: delay after the first failed attempt, in seconds.
        base: growth factor per attempt.
        cap: largest delay before jitter, in seconds.
        jitter: relative spread in [0, 1].
    """

    initial: float = 1.0
    base: float = 2.0
    cap: float = 300.0
    jitter: float = 0.1

    def delay(self, attempt: int, unit: float) -> float:
        """The delay for ``attempt``, given ``unit``, a number drawn uniformly from [0, 1)."""
        exponent = max(0, attempt - 1)
        try:
            raw = min(self.cap, self.initial * self.base**exponent)
        except OverflowError:  # base**exponent left the float range long after the cap
            raw = self.cap
        return max(0.0, raw * (1.0 + self.jitter * (2.0 * unit - 1.0)))

    def __call__(self, attempt: int) -> float:
        return self.delay(attempt, random.random())  # jitter, not cryptography

    def problems(self) -> list[str]:
        """Everything wrong with these settings, as sentences (empty when valid)."""
        found: list[str] = []
        if not self.initial > 0:
            found.append("backoff.initial must be positive")
        if not self.base >= 1:
            found.append("backoff.base must be at least 1")
        if not self.cap >= self.initial:
            found.append("backoff.cap must be at least backoff.initial")
        if not 0 <= self.jitter <= 1:
            found.append("backoff.jitter must be between 0 and 1")
        return found
