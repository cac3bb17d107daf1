"""Waiting for notices (public as ``trioqueue.testing.next_notice``).

A module of its own so that the conformance suite (``_conformance/``) can use it without
importing the package that lazily imports the suite.
"""

from __future__ import annotations

import trio

from trioqueue._types import Notice, NoticeKind

__all__ = ["next_notice"]


async def next_notice(notices: trio.MemoryReceiveChannel[Notice], kind: NoticeKind) -> Notice:
    """The next notice of ``kind`` on ``notices``, skipping notices of other kinds.

    Bound the wait with the caller's own scope, e.g. ``with trio.fail_after(5):``.

    Args:
        notices: a channel from ``backend.listen(queue, worker_id)``.
        kind: the kind of notice to wait for.

    Raises:
        trio.EndOfChannel: the listener was closed first.
    """
    while True:
        notice = await notices.receive()
        if notice.kind is kind:
            return notice
