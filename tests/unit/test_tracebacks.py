"""bound_traceback: what of a traceback is stored (docs/protocol.rst §14, "Errors and
tracebacks"): all of it when it fits; else its first quarter and last three quarters around
a marker saying how much was cut, never more than the bound."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from trioqueue._core.tracebacks import MAX_TRACEBACK_CHARS, bound_traceback

MARKER = re.compile(r"\n\.\.\. \[(\d+) characters cut\] \.\.\.\n")


def test_the_bound_is_sixteen_thousand_characters() -> None:
    assert MAX_TRACEBACK_CHARS == 16_000


@given(st.text(max_size=300), st.integers(min_value=0, max_value=400))
def test_text_that_fits_is_kept_whole(text: str, slack: int) -> None:
    assert bound_traceback(text, len(text) + slack) is text


@given(st.text(alphabet="ab\n", min_size=1, max_size=3_000), st.integers(40, 2_000))
def test_text_too_long_is_cut_to_the_bound_around_a_marker_counting_the_cut(
    text: str, limit: int
) -> None:
    """The marker is found by its exact text at the head's end (the alphabet has no dot,
    so the text itself cannot look like one)."""
    if len(text) <= limit:
        return
    bounded = bound_traceback(text, limit)
    assert len(bounded) <= limit
    found = MARKER.search(bounded)
    assert found is not None
    cut = int(found.group(1))
    head, tail = bounded[: found.start()], bounded[found.end() :]
    assert len(head) + cut + len(tail) == len(text)  # the count is exactly what is missing
    assert text.startswith(head) and text.endswith(tail)
    assert len(head) == (len(head) + len(tail)) // 4  # a quarter before, the rest after
    assert len(bounded) >= limit - 1  # the bound is used (a marker one digit shorter at most)


def test_the_default_bound_keeps_the_last_line_of_a_long_traceback() -> None:
    frames = "".join(f'  File "app.py", line {n}, in step\n    step()\n' for n in range(2_000))
    text = "Traceback (most recent call last):\n" + frames + "RecursionError: too deep\n"
    bounded = bound_traceback(text)
    assert len(bounded) == MAX_TRACEBACK_CHARS
    assert bounded.startswith("Traceback (most recent call last):\n")
    assert bounded.endswith("RecursionError: too deep\n")


def test_a_bound_smaller_than_the_marker_still_holds() -> None:
    assert bound_traceback("x" * 999 + "y", 10) == "x" * 9 + "y"
    assert bound_traceback("xy", 0) == ""
