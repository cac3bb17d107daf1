"""Checkpoints in whole worker pools on the memory backend, under trio's MockClock
(docs/protocol.rst §16, invariant I18): a job checkpoints, its attempt ends without an
outcome or fails, and the next attempt resumes from the checkpoint."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import trio

import trioqueue
from tests._pool_harness import Recorder, config
from trioqueue._core.wire import RenewItem
from trioqueue._types import PoolBeat
from trioqueue.testing import error


async def _until(backend: trioqueue.MemoryBackend, job_id: int, status: str) -> trioqueue.JobInfo:
    while (info := await backend.get_job(job_id)).status != status:
        await trio.sleep(0.5)
    return info


async def test_I18_a_lapsed_attempt_resumes_from_the_checkpoint_a_renewal_stored(
    autojump_clock: object,
) -> None:
    """V=2, H=1: the checkpoint set at t=0 is stored by a renewal; then every renewal fails,
    the lease lapses (no outcome is written), and the next attempt gets the checkpoint."""
    rec = Recorder()
    seen: list[tuple[int, Any]] = []
    started = trio.Event()

    async def handler(payload: object, ctx: trioqueue.JobContext) -> str:
        seen.append((ctx.attempt, ctx.last_checkpoint))
        if ctx.attempt == 1:
            ctx.checkpoint({"page": 3})
            started.set()
            await trio.sleep(100)
        return "done"

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        job_id = await backend.enqueue("q", {})
        cfg = config(rec, handler=handler, visibility_timeout=2, heartbeat_interval=1)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await started.wait()
        await trio.sleep(1.5)  # the beat at t=1 carried it: stored before any outcome
        info = await backend.get_job(job_id)
        assert (info.status, info.checkpoint) == ("running", {"page": 3})
        backend.inject("renew", error())  # the database is lost to this pool
        await rec.wait_for("unavailable", job_id)
        backend.inject("renew", None)
        final = await _until(backend, job_id, "succeeded")
        nursery.cancel_scope.cancel()
    assert seen == [(1, None), (2, {"page": 3})]
    assert final.checkpoint == {"page": 3}  # a success keeps the last one stored
    assert backend.statistics()["calls"].get("fail", 0) == 0  # the lapse wrote no outcome


@pytest.mark.parametrize("ending", ["raises", "released at shutdown"])
async def test_I18_a_checkpoint_set_just_before_the_attempt_ends_is_kept_for_the_next(
    autojump_clock: object, ending: str
) -> None:
    """No renewal between the checkpoint and the end of the attempt: the failure (or the
    release) carries it, so the retry resumes from it."""
    seen: list[tuple[int, Any]] = []
    stop = trio.Event()

    async def handler(payload: object, ctx: trioqueue.JobContext) -> str:
        seen.append((ctx.attempt, ctx.last_checkpoint))
        if len(seen) == 1:
            ctx.checkpoint(["step", 7])
            if ending == "raises":
                raise RuntimeError("boom")
            stop.set()
            await trio.sleep(100)  # until the shutdown's grace cancels it
        return "done"

    rec = Recorder()
    async with trioqueue.open_memory() as backend:
        job_id = await backend.enqueue("q", {})
        cfg = config(rec, handler=handler, shutdown_grace=1.0, backoff=lambda attempt: 1.0)
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, cfg)
            if ending == "raises":
                await rec.wait_for("retry", job_id)
            else:
                await stop.wait()
            nursery.cancel_scope.cancel()  # a graceful shutdown: the rest is released
        assert (await backend.get_job(job_id)).checkpoint == ["step", 7]
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config(rec, handler=handler))
            await _until(backend, job_id, "succeeded")
            nursery.cancel_scope.cancel()
    # A release is not charged: the next attempt has the same number.
    assert seen == [(1, None), (2 if ending == "raises" else 1, ["step", 7])]


async def test_I18_an_unchanged_checkpoint_rides_on_one_renewal_only(
    autojump_clock: object,
) -> None:
    """I10 and I18: one renewal statement per beat; the checkpoint goes with the first beat
    after it was set, and not again while it is unchanged; a new value goes once more."""
    carried: list[tuple[int, str | None]] = []

    async def handler(payload: object, ctx: trioqueue.JobContext) -> None:
        ctx.checkpoint({"n": 1})
        await trio.sleep(5.5)  # beats at t=2 and t=4 find it stored
        ctx.checkpoint({"n": 2})
        await trio.sleep(4)

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        original = backend.renew

        async def recording_renew(
            items: Sequence[RenewItem], *, visibility_timeout: float, beat: PoolBeat | None = None
        ) -> Mapping[int, trioqueue.Verdict]:
            carried.extend((item.job_id, item.checkpoint) for item in items)
            return await original(items, visibility_timeout=visibility_timeout, beat=beat)

        backend.renew = recording_renew  # type: ignore[method-assign]
        job_id = await backend.enqueue("q", {})
        await nursery.start(trioqueue.run_worker_pool, backend, config(Recorder(), handler=handler))
        final = await _until(backend, job_id, "succeeded")
        nursery.cancel_scope.cancel()
    sent = [text for _, text in carried if text is not None]
    assert sent == ['{"n": 1}', '{"n": 2}']
    assert len(carried) >= 4  # one item per beat: the checkpoint rode on two of them
    assert final.checkpoint == {"n": 2}


async def test_I18_a_bad_checkpoint_is_refused_at_the_call_and_nothing_is_stored(
    autojump_clock: object,
) -> None:
    errors: list[str] = []

    async def handler(payload: object, ctx: trioqueue.JobContext) -> None:
        ctx.checkpoint("kept")
        for value, kind in (
            ({1, 2}, TypeError),
            (float("nan"), TypeError),
            ("x" * 70_000, ValueError),
        ):
            with pytest.raises(kind) as caught:
                ctx.checkpoint(value)
            errors.append(str(caught.value))
        await trio.sleep(3)

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        job_id = await backend.enqueue("q", {})
        await nursery.start(trioqueue.run_worker_pool, backend, config(Recorder(), handler=handler))
        final = await _until(backend, job_id, "succeeded")
        nursery.cancel_scope.cancel()
    assert final.checkpoint == "kept"
    assert errors[0].startswith("checkpoint is not JSON-serialisable")
    assert "65536" in errors[2]


async def test_I18_a_sync_handler_checkpoints_from_its_thread(autojump_clock: object) -> None:
    """The same call from a plain ``def`` handler, in its worker thread."""

    def handler(payload: object, ctx: trioqueue.JobContext) -> Any:
        if ctx.attempt == 1:
            ctx.checkpoint({"line": 42})
            raise RuntimeError("interrupted")
        return ctx.last_checkpoint

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        job_id = await backend.enqueue("q", {})
        cfg = config(Recorder(), handler=handler, backoff=lambda attempt: 1.0)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        final = await _until(backend, job_id, "succeeded")
        nursery.cancel_scope.cancel()
    assert (final.attempts, final.result, final.checkpoint) == (2, {"line": 42}, {"line": 42})
