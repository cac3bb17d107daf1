"""Durations as an operator types them (``90s``, ``12h``, ``7d``, ``1d12h``, ``forever``)
and as the command line prints them back (docs/cli.rst, ``retention``).

A retention keeps finished jobs for days or weeks: seconds alone would make an operator do
arithmetic (``604800``) and read it back. The units are ``s``, ``m``, ``h``, ``d`` and ``w``,
one or more of them in a row (``1d12h``); a bare number is seconds, as every other option of
the command line takes them. ``forever`` keeps for ever (None, as the backend takes it).

Only the spelling is checked here: whether the value is one a backend stores (above 0,
below a century) is the backend's to say, together with the command's other arguments, so
that one error names every problem.
"""

from __future__ import annotations

import math
import re

__all__ = ["FOREVER", "duration_text", "parse_duration"]

FOREVER = "forever"

#: Seconds per unit, largest first.
UNITS: dict[str, int] = {"w": 7 * 86_400, "d": 86_400, "h": 3_600, "m": 60, "s": 1}
#: The units :func:`duration_text` spells: days at most (30 days reads as ``30d``, not
#: ``4w2d``).
SHOWN_UNITS = ("d", "h", "m")

_PART = re.compile(r"(\d+(?:\.\d+)?)([wdhms])")
_WHOLE = re.compile(r"(?:\d+(?:\.\d+)?[wdhms])+")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def parse_duration(text: str) -> float | None:
    """``text`` in seconds, or None for ``forever``.

    Raises:
        ValueError: not a duration; the message shows the spellings that are.
    """
    word = text.strip().lower()
    if word == FOREVER:
        return None
    if _NUMBER.fullmatch(word):
        return _finite(float(word), text)
    if not _WHOLE.fullmatch(word):
        raise ValueError(f"not a duration: {text!r} (e.g. 90s, 12h, 7d, 1d12h or {FOREVER})")
    return _finite(sum(float(n) * UNITS[unit] for n, unit in _PART.findall(word)), text)


def _finite(seconds: float, text: str) -> float:
    if not math.isfinite(seconds):
        raise ValueError(f"not a duration: {text!r} (too large)")
    return seconds


def duration_text(seconds: float | None) -> str:
    """``seconds`` in the largest whole units, as :func:`parse_duration` reads them back:
    ``7d``, ``1d12h``, ``1m30s``, ``1.5s``; ``forever`` for None."""
    if seconds is None:
        return FOREVER
    whole = int(seconds)
    parts = []
    for unit in SHOWN_UNITS:
        size = UNITS[unit]
        if whole >= size:
            parts.append(f"{whole // size}{unit}")
            whole %= size
    rest = whole + (seconds - int(seconds))
    if rest or not parts:
        parts.append(f"{rest:g}s")
    return "".join(parts)
