"""Progress values: only finite numbers in [0, 1] count (docs/protocol.rst §5, invariant I11)."""

from __future__ import annotations

import math


def valid_progress(value: object) -> float | None:
    """Return ``value`` as a float when it is a valid progress value, else ``None``.

    Booleans are refused even though Python treats them as integers: ``True`` is far more
    likely a bug than "100 % done".
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int beyond the float range is no progress value either
        return None
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        return None
    return number
