"""How much of a failed attempt's traceback is stored (docs/protocol.rst §14).

A traceback can be any size (a recursion error prints thousands of frames), and it is
written with the attempt's outcome on the hot path, so it is bounded before it leaves the
worker. The cut keeps both ends: the head says where the call began, the tail holds the
frame that raised and the exception's line, which matter most.
"""

from __future__ import annotations

__all__ = ["MAX_TRACEBACK_CHARS", "bound_traceback"]

#: The longest traceback stored with an attempt, in characters, marker included.
MAX_TRACEBACK_CHARS = 16_000


def bound_traceback(text: str, limit: int = MAX_TRACEBACK_CHARS) -> str:
    """``text`` itself when it fits in ``limit`` characters, else its first quarter and
    last three quarters around a line saying how many characters were cut, at most
    ``limit`` characters in all."""
    if len(text) <= limit:
        return text
    marker = _marker(len(text) - limit)
    while True:  # the marker's own length changes how much is cut: settle it (twice at most)
        keep = max(0, limit - len(marker))
        settled = _marker(len(text) - keep)
        if len(settled) <= len(marker):
            break
        marker = settled
    if len(marker) > limit:  # no room even for the marker: the tail, which matters most
        return text[len(text) - limit :] if limit > 0 else ""
    head = keep // 4
    tail = keep - head
    return text[:head] + _marker(len(text) - head - tail) + text[len(text) - tail :]


def _marker(cut: int) -> str:
    return f"\n... [{cut} characters cut] ...\n"
