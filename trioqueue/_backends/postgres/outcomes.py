"""The PostgreSQL backend's outcomes: ack, fail, release and snooze, each one fenced, batched
statement.

Each statement writes only the rows whose ``claim_seq`` still matches (docs/protocol.rst
§1), and names the 1-based positions it applied, so a stale item of a batch is told apart
from the others. A transactional handler's ack goes with its COMMIT instead
(``transactions.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import trio

from trioqueue._backends.postgres.arguments import (
    checkpoint_texts,
    fences,
    float_texts,
    progress_texts,
    result_texts,
    storable_text,
)
from trioqueue._backends.postgres.attempts import failure_texts, timing_arrays
from trioqueue._backends.postgres.base import BackendBase
from trioqueue._backends.postgres.statements import fetch
from trioqueue._backends.validation import (
    check_checkpoint_texts,
    check_child_waits,
    check_retry_delay,
    check_snoozes,
)
from trioqueue._core.snooze import snooze_limit_message
from trioqueue._types import (
    Ack,
    ChildWait,
    ChildWaitWrite,
    Failure,
    Recorded,
    Release,
    Snoozed,
    SnoozeWrite,
)


class OutcomeCalls(BackendBase):
    """Fenced, batched outcome writes."""

    async def ack(self, items: Sequence[Ack]) -> list[bool]:
        """Mark attempts succeeded. Fenced: True for each item that was applied."""
        items = tuple(items)
        check_checkpoint_texts(items)
        applied = await self._fenced_write(
            "ack",
            items,
            *fences(items),
            progress_texts(items),
            result_texts(items),
            *timing_arrays(items),
            checkpoint_texts(items),
        )
        return [row is not None for row in applied]

    async def fail(self, items: Sequence[Failure]) -> list[Recorded | None]:
        """Record failed attempts. Fenced: per item, what it became (None: not applied).

        A retry is recorded as final when the attempt was the last one allowed, or when the
        job was asked to cancel (a cancelled job is never retried, docs/protocol.rst §5).
        """
        items = tuple(items)
        delays = [check_retry_delay(item.retry_delay) for item in items]
        check_checkpoint_texts(items)
        applied = await self._fenced_write(
            "fail",
            items,
            *fences(items),
            [storable_text(item.error) for item in items],
            float_texts(delays),
            progress_texts(items),
            *failure_texts(items, storable_text),
            *timing_arrays(items),
            checkpoint_texts(items),
        )
        return [
            None if row is None else Recorded.RETRY if row["status"] == "queued" else Recorded.FINAL
            for row in applied
        ]

    async def release(self, items: Sequence[Release]) -> list[bool]:
        """Give attempts back uncharged. Fenced: True for each item that was applied."""
        items = tuple(items)
        check_checkpoint_texts(items)
        applied = await self._fenced_write(
            "release",
            items,
            *fences(items),
            progress_texts(items),
            *timing_arrays(items),
            checkpoint_texts(items),
        )
        return [row is not None for row in applied]

    async def snooze(
        self, items: Sequence[SnoozeWrite], *, max_snoozes: int
    ) -> list[Snoozed | None]:
        """Put jobs back after a delay, their attempts given back (docs/protocol.rst §17).
        Fenced: per item, what the job became (None: not applied). A job that snoozed
        ``max_snoozes`` times already fails for good instead; one asked to cancel too."""
        items = tuple(items)
        bound = check_snoozes(items, max_snoozes)
        applied = await self._fenced_write(
            "snooze",
            items,
            *fences(items),
            float_texts([item.seconds for item in items]),
            progress_texts(items),
            *timing_arrays(items),
            bound,
            snooze_limit_message(bound),
            checkpoint_texts(items),
        )
        return [None if row is None else Snoozed(row["became"]) for row in applied]

    async def await_children(self, items: Sequence[ChildWaitWrite]) -> list[ChildWait | None]:
        """Put jobs back to wait for their unfinished children, their attempts given back
        (docs/protocol.rst §22). Fenced: per item, what the job became (None: not applied)."""
        items = tuple(items)
        check_child_waits(items)
        applied = await self._fenced_write(
            "await_children",
            items,
            *fences(items),
            [item.on_child_failure for item in items],
            progress_texts(items),
            *timing_arrays(items),
            checkpoint_texts(items),
        )
        return [None if row is None else ChildWait(row["became"]) for row in applied]

    async def _fenced_write(
        self, op: str, items: Sequence[object], *arrays: list[Any] | str | int | None
    ) -> list[Any]:
        """Run a batched, fenced write: per item, the row its statement returned for it (the
        rows name the 1-based positions that applied), or None where the fence kept it out.
        ``arrays`` are the statement's parameters, one value per item (None: SQL NULL, a
        NULL for every item; a str: an array literal, ``timing_arrays``, or a scalar text; an
        int: a scalar)."""
        if not items:
            await trio.lowlevel.checkpoint()
            return []
        rows = await self._driver.run(op, fetch, self._sql[op], *arrays)
        by_position = {row["n"]: row for row in rows}
        return [by_position.get(n) for n in range(1, len(items) + 1)]
