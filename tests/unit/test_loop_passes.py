"""trio-asyncio's loop running the asyncio callbacks that are ready in one pass
(trioqueue/_backends/postgres/loop_passes.py): order kept, no trio task in between, and
left alone where it was not checked."""

from __future__ import annotations

import asyncio

import pytest
import trio
import trio_asyncio

from trioqueue._backends.postgres import loop_passes
from trioqueue._backends.postgres.loop_passes import run_ready_callbacks_together

CALLBACKS = 5


async def _interleaving(together: bool) -> list[str]:
    """What ran, in order: five asyncio callbacks queued at once, and a trio task that
    notes each of its scheduler passes meanwhile."""
    seen: list[str] = []
    async with trio_asyncio.open_loop() as loop:
        if together:
            assert run_ready_callbacks_together(loop)

        async def queue_callbacks() -> None:
            done = asyncio.get_running_loop().create_future()
            for n in range(CALLBACKS):
                asyncio.get_running_loop().call_soon(seen.append, f"callback {n}")
            asyncio.get_running_loop().call_soon(done.set_result, None)
            await done

        async def trio_task() -> None:
            for _ in range(2 * CALLBACKS):
                seen.append("trio")
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio_task)
            await trio_asyncio.aio_as_trio(queue_callbacks)()
    return seen


def _callbacks_contiguous(seen: list[str]) -> bool:
    first = seen.index("callback 0")
    return seen[first : first + CALLBACKS] == [f"callback {n}" for n in range(CALLBACKS)]


async def test_callbacks_ready_together_run_in_one_pass_in_order() -> None:
    seen = await _interleaving(together=True)
    assert [s for s in seen if s != "trio"] == [f"callback {n}" for n in range(CALLBACKS)]
    assert _callbacks_contiguous(seen)
    assert "trio" in seen[seen.index(f"callback {CALLBACKS - 1}") :]  # trio runs on after


async def test_without_it_trio_tasks_run_between_callbacks() -> None:
    """What it changes: the stock loop takes each callback through trio's scheduler."""
    seen = await _interleaving(together=False)
    assert not _callbacks_contiguous(seen)


async def test_an_unchecked_trio_asyncio_release_is_left_as_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(loop_passes, "CHECKED", ("0.0",))
    async with trio_asyncio.open_loop() as loop:
        assert not run_ready_callbacks_together(loop)
        assert "_main_loop_one" not in vars(loop)


def test_a_loop_without_what_it_uses_is_left_as_it_is() -> None:
    class Other:
        async def _main_loop_one(self) -> None:  # no ``no_wait``
            return None

    other = Other()
    assert not run_ready_callbacks_together(other)
    assert "_main_loop_one" not in vars(other)
