"""The PostgreSQL backend's notices: ``listen`` for a pool, ``watch`` for an operator.

Notices are NOTIFY payloads of the schema's one channel (``sql.channel_name``), sent by the
statements that enqueue, request a cancel, or finish or delete an awaited job. A notice is
only a hint: a listener that falls behind loses the newest ones (counted in
``statistics()``), and pools poll as well.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import trio

from trioqueue._backends.postgres.base import BackendBase
from trioqueue._backends.postgres.finishes import parse_finished
from trioqueue._backends.validation import check_queue
from trioqueue._types import Notice, NoticeKind

#: Notices buffered per listener before new ones are dropped (a notice is only a hint).
NOTICE_BUFFER = 1000


class NoticeCalls(BackendBase):
    """LISTEN on the schema's channel."""

    @asynccontextmanager
    async def listen(
        self, queue: str, worker_id: str
    ) -> AsyncIterator[trio.MemoryReceiveChannel[Notice]]:
        """Notices for ``queue``: new work, and cancel requests for ``worker_id``'s jobs.

        LISTEN runs on a dedicated connection (outside the pool). If that connection is
        lost, the channel ends; listen again to resubscribe (the pool does so by itself).
        """
        check_queue(queue)
        if not isinstance(worker_id, str):
            raise TypeError(f"worker_id must be a str, not {type(worker_id).__name__}")
        async with self._subscribe(_NoticeParser(queue, worker_id)) as notices:
            yield notices

    @asynccontextmanager
    async def watch(self) -> AsyncIterator[trio.MemoryReceiveChannel[Notice]]:
        """Every notice of the schema's channel, whatever its queue or worker: new work,
        cancel requests, and finishes of awaited jobs, for an operator's live view (the
        dashboard).

        One dedicated LISTEN connection, as for :meth:`listen`; if it is lost the channel
        ends. Behind a transaction pooler without ``listen_dsn`` nothing arrives (the
        driver says so once), so a watcher polls as well.
        """
        async with self._subscribe(_any_notice) as notices:
            yield notices

    @asynccontextmanager
    async def _subscribe(
        self, parse: Callable[[str], Notice | None]
    ) -> AsyncIterator[trio.MemoryReceiveChannel[Notice]]:
        """LISTEN on the schema's channel for the block; ``parse`` picks the notices."""
        send, receive = trio.open_memory_channel[Notice](NOTICE_BUFFER)

        def on_payload(payload: str) -> None:
            notice = parse(payload)
            if notice is None:
                return
            try:
                send.send_nowait(notice)
            except trio.WouldBlock:
                self._dropped_notices += 1  # the listener fell behind; polling covers it
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the listener is leaving

        listener = await self._driver.listen(self._channel, on_payload, send.close)
        try:
            async with receive:
                yield receive
        finally:
            send.close()
            await listener.aclose()


def _any_notice(payload: str) -> Notice | None:
    """A NOTIFY payload of the schema's channel as a Notice, whoever it was meant for:
    ``a:QUEUE`` (new work), ``c:ID:WORKER_HASH:QUEUE`` (a cancel request) or ``f:ID:QUEUE``
    (a job someone waits for finished or was deleted)."""
    if payload.startswith("a:"):
        return Notice(NoticeKind.AVAILABLE, payload[2:])
    finished = parse_finished(payload)
    if finished is not None:
        return Notice(NoticeKind.FINISHED, finished[1], finished[0])
    if payload.startswith("c:"):
        job_id, _, rest = payload[2:].partition(":")
        _, _, queue = rest.partition(":")
        if job_id.isdigit() and queue:
            return Notice(NoticeKind.CANCEL, queue, int(job_id))
    return None


class _NoticeParser:
    """Turns a NOTIFY payload of the schema's channel into a Notice for one listener."""

    def __init__(self, queue: str, worker_id: str) -> None:
        self._queue = queue
        self._available = f"a:{queue}"
        worker_hash = hashlib.md5(worker_id.encode(), usedforsecurity=False).hexdigest()
        self._cancel_suffix = f":{worker_hash}:{queue}"

    def __call__(self, payload: str) -> Notice | None:
        if payload == self._available:
            return Notice(NoticeKind.AVAILABLE, self._queue)
        if payload.startswith("c:") and payload.endswith(self._cancel_suffix):
            job_id = payload[2 : -len(self._cancel_suffix)]
            if job_id.isdigit():
                return Notice(NoticeKind.CANCEL, self._queue, int(job_id))
        return None
