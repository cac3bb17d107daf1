"""The clock verdict's thresholds are exclusive (docs/protocol.rst §8, "Warn past",
"Stop claiming past"): an offset proven to be exactly on a threshold is not past it.
"""

from __future__ import annotations

from trioqueue._core.clock_skew import ClockVerdict, SkewBound, judge, limits_for

LIMITS = limits_for(visibility_timeout=30.0, heartbeat_interval=10.0)  # warn 1 s, stop 20 s


def _exactly(offset: float) -> SkewBound:
    return SkewBound(low=offset, high=offset)


def test_an_offset_exactly_at_the_warning_threshold_is_in_sync() -> None:
    assert LIMITS.warn_at == 1.0
    assert judge(ClockVerdict.IN_SYNC, _exactly(1.0), LIMITS) is ClockVerdict.IN_SYNC
    assert judge(ClockVerdict.AHEAD, _exactly(1.0), LIMITS) is ClockVerdict.IN_SYNC
    assert judge(ClockVerdict.IN_SYNC, _exactly(1.001), LIMITS) is ClockVerdict.AHEAD


def test_an_offset_exactly_at_the_stop_threshold_only_warns() -> None:
    assert LIMITS.stop_at == 20.0
    assert judge(ClockVerdict.IN_SYNC, _exactly(20.0), LIMITS) is ClockVerdict.AHEAD
    assert judge(ClockVerdict.STOPPED, _exactly(20.0), LIMITS) is ClockVerdict.AHEAD
    assert judge(ClockVerdict.IN_SYNC, _exactly(20.001), LIMITS) is ClockVerdict.STOPPED
