"""The PostgreSQL backend's flow control: pause, resume and limit a queue (docs/flow.rst).

Settings are rows of the ``queues`` table; the claim statement enforces them
(``claims.py``).
"""

from __future__ import annotations

from trioqueue._backends.postgres.base import BackendBase
from trioqueue._backends.postgres.statements import execute
from trioqueue._backends.validation import check_queue, check_queue_limits


class FlowCalls(BackendBase):
    """Pausing and limiting queues."""

    async def pause_queue(self, queue: str) -> None:
        """Stop every pool claiming from ``queue``: claims give nothing until
        :meth:`resume_queue`; running jobs go on. Any queue name may be paused, also one
        that has no jobs yet. Persisted in the ``queues`` table; a notice tells listeners."""
        queue = check_queue(queue)
        await self._driver.run("pause_queue", execute, self._sql["pause_queue"], queue)

    async def resume_queue(self, queue: str) -> None:
        """Let ``queue`` be claimed again; a notice wakes idle pools at once."""
        queue = check_queue(queue)
        await self._driver.run("resume_queue", execute, self._sql["resume_queue"], queue)

    async def set_queue_limits(
        self, queue: str, *, max_running: int | None = None, max_per_second: float | None = None
    ) -> None:
        """Cap ``queue`` across every pool (docs/flow.rst): at most ``max_running`` jobs
        under a live lease at once, and claims at ``max_per_second`` (a bucket of one
        second's worth). The claim statement enforces both, with the queue's row locked.
        None lifts a limit; each call sets both.

        Raises:
            TypeError, ValueError: a limit is not None or a positive number (every wrong
                limit is named); nothing is written.
        """
        queue = check_queue(queue)
        running, rate = check_queue_limits(max_running, max_per_second)
        await self._driver.run(
            "set_queue_limits", execute, self._sql["set_queue_limits"], queue, running, rate
        )
