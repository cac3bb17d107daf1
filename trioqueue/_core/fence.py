"""The lease fence: a batch's local deadline, computed without asking the database.

Theory of operation. The row's lease (``not_visible_until``) lives in database time; the
fence lives in the worker's monotonic time. We only ever derive the fence from instants that
are *earlier* than the database's own: the local time read before the claim or renewal was
sent. Network or database delay can therefore shorten the local lease, never make it outlive
the row's (given synchronised clocks, see the docs).

Only arithmetic, ``min`` and ``max`` touch a time here: the z3 proofs (proofs/timing.py)
call these very functions, through the guard core, with symbolic times.
"""

from __future__ import annotations

from collections.abc import Iterable


def local_row_deadline(row_deadline: float, local_now: float, wall_now: float) -> float:
    """Translate a row's ``not_visible_until`` (wall time) to the worker's local clock."""
    return local_now + (row_deadline - wall_now)


def initial_deadline(
    claim_sent: float,
    visibility_timeout: float,
    local_now: float,
    wall_now: float,
    row_deadlines: Iterable[float],
) -> float:
    """The fence of a batch at registration.

    The smaller of ``claim_sent + V`` and every row's lease translated to local time. A row
    lease that already lies in the past makes the batch expired on arrival; that is not
    treated as clock skew.
    """
    deadline = claim_sent + visibility_timeout
    for row_deadline in row_deadlines:
        deadline = min(deadline, local_row_deadline(row_deadline, local_now, wall_now))
    return deadline


def advanced_deadline(previous: float, renewal_sent: float, visibility_timeout: float) -> float:
    """The fence after a renewal that extended every pending job of the batch.

    ``renewal_sent`` is the local time read before the statement went out. The fence never
    moves backwards: an old renewal cannot shorten a lease a newer one granted.
    """
    return max(previous, renewal_sent + visibility_timeout)
