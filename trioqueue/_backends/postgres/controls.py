"""The PostgreSQL backend's operator controls: cancel, retry and delete one job or many,
the audit log, and table health.

The bulk controls, the audit log and table health run their statements of ``operator.sql``
through ``operator.py``; the checks are ``operator_checks``', shared with the memory backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import trio

from trioqueue._backends.operator_checks import check_audit, check_list_audit, check_matching
from trioqueue._backends.postgres import operator
from trioqueue._backends.postgres.arguments import is_bigint, like_pattern
from trioqueue._backends.postgres.base import BackendBase
from trioqueue._backends.postgres.statements import fetchrow, fetchval
from trioqueue._backends.validation import check_job_id
from trioqueue._operator_types import AuditEntry, TableHealth
from trioqueue._types import JobStatus


class ControlCalls(BackendBase):
    """Operators' writes on jobs, the audit log, table health."""

    async def cancel(self, job_id: int) -> bool:
        """Cancel a job: at once if it is not running, else by flagging its row and notifying.
        Its unfinished descendants (children, theirs...) are cancelled with it, each so
        (docs/protocol.rst §22).

        Returns:
            False when the job is unknown or already finished, else True.
        """
        check_job_id(job_id)
        if not is_bigint(job_id):
            await trio.lowlevel.checkpoint()
            return False
        row = await self._driver.run("cancel", fetchrow, self._sql["cancel"], job_id)
        return row is not None

    async def retry(self, job_id: int) -> bool:
        """Put a failed job back on its queue for one more attempt.

        The attempt count and ``last_error`` are kept; ``max_attempts`` grows to allow one
        more attempt when it was used up, and a cancel flag is cleared.

        Returns:
            False when the job is unknown, not failed, or its dedup key is held by another
            unfinished job; else True.
        """
        check_job_id(job_id)
        if not is_bigint(job_id):
            await trio.lowlevel.checkpoint()
            return False
        retried: int = await self._driver.run("retry", fetchval, self._sql["retry"], job_id)
        return retried == 1

    async def delete_job(self, job_id: int) -> bool:
        """Delete a job unless it is running under a live lease.

        Returns:
            False when the job is unknown or running under a live lease, else True.
        """
        check_job_id(job_id)
        if not is_bigint(job_id):
            await trio.lowlevel.checkpoint()
            return False
        deleted = await self._driver.run("delete_job", fetchval, self._sql["delete_job"], job_id)
        return deleted is not None

    async def delete_matching(
        self,
        queue: str | None = None,
        status: JobStatus | None = None,
        *,
        search: str | None = None,
        cancelled: bool | None = None,
        batch_size: int = 500,
    ) -> int:
        """Delete every job matching the filters but those running under a live lease,
        ``batch_size`` per statement; how many were deleted.

        Raises:
            ValueError: a bad filter, or ``batch_size`` outside 1..10000.
        """
        matching = check_matching(queue, status, search, cancelled, batch_size, retry=False)
        pattern = like_pattern(matching.search)
        return await operator.run_matching(
            self._driver, self._sql, "delete_matching", matching, pattern
        )

    async def record_audit(
        self, action: str, target: str, session: str, detail: Mapping[str, Any]
    ) -> int:
        """Append an entry to the ``audit_log`` table; its id.

        Raises:
            TypeError, ValueError: a field a database cannot store; nothing is written.
        """
        record = check_audit(action, target, session, detail)
        return await operator.record_audit(self._driver, self._sql, record)

    async def list_audit(
        self, limit: int = 100, offset: int = 0, *, action: str | None = None
    ) -> list[AuditEntry]:
        """Audit entries, newest first, optionally of one action."""
        checked = check_list_audit(limit, offset, action)
        return await operator.list_audit(self._reads, self._sql, *checked)

    async def table_health(self) -> TableHealth:
        """The schema's tables and indexes (from PostgreSQL's catalogs and statistics) and
        its oldest running and ready jobs."""
        return await operator.table_health(self._driver, self._sql, self._schema)
