"""A stray error asyncio reports is logged and does not end the driver's loop."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest
import trio
import trio.lowlevel
import trio_asyncio

from trioqueue._backends.postgres.stray_errors import log_stray_errors


async def _report_a_never_retrieved_error(loop: asyncio.AbstractEventLoop) -> None:
    """What asyncpg leaves behind when a connection dies under a statement no one awaits
    any more: a future failed with an error that is never retrieved."""
    future = loop.create_future()
    future.set_exception(ConnectionError("unexpected connection_lost() call"))
    del future
    gc.collect()  # the future's finaliser reports it to the loop's exception handler
    await trio.lowlevel.checkpoint()
    await trio.lowlevel.checkpoint()


async def test_a_never_retrieved_error_is_logged_and_the_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="trioqueue.postgres"):
        async with trio_asyncio.open_loop() as loop:
            log_stray_errors(loop)
            await _report_a_never_retrieved_error(loop)
            assert await trio_asyncio.aio_as_trio(asyncio.sleep)(0, result=7) == 7
    (record,) = [r for r in caplog.records if r.name == "trioqueue.postgres"]
    assert "no statement waits for" in record.getMessage()
    assert "unexpected connection_lost() call" in record.getMessage()


async def test_without_it_the_same_error_ends_the_loop() -> None:
    """The failure this guards against: trio-asyncio's own handler raises the report into
    the loop's nursery (which would end the driver, and the pool with it)."""
    with pytest.RaisesGroup(ConnectionError, flatten_subgroups=True):
        async with trio_asyncio.open_loop() as loop:
            await _report_a_never_retrieved_error(loop)
            await trio.lowlevel.checkpoint()  # the propagating task runs in this pass
