"""How the dashboard shows a count that may be an estimate (docs/dashboard.rst, "Big
tables"): an exact count as it is, an estimate rounded and marked, ``~1.2M``, so that no
one reads the planner's figure as a tally."""

from __future__ import annotations

__all__ = ["FINISHED", "count_text"]

#: The states whose counts a big table estimates (live ones are always counted).
FINISHED = ("succeeded", "failed")

_UNITS = ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k"))


def count_text(n: int, estimated: bool = False) -> str:
    """``n`` for an exact count; ``~`` and two significant figures for an estimate."""
    if not estimated:
        return str(n)
    for size, unit in _UNITS:
        if n >= size:
            scaled = n / size
            shown = f"{scaled:.1f}" if scaled < 10 else f"{scaled:.0f}"
            return f"~{shown.removesuffix('.0')}{unit}"
    return f"~{n}"
