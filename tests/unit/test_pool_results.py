"""Whole pools on the memory backend: a handler's return value becomes JobInfo.result, and
``wait_for`` returns it (docs/usage.rst, "Results"). Driven by trio's MockClock."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import trioqueue
from tests._pool_harness import Recorder, config
from trioqueue import JobContext
from trioqueue._backends.validation import MAX_RESULT_BYTES, encode_result


async def test_an_async_handlers_return_value_is_the_jobs_result(autojump_clock: object) -> None:
    async def handler(payload: Any, ctx: JobContext) -> Any:
        return None if payload is None else {"doubled": payload * 2, "job": ctx.job_id}

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        some, none = await backend.enqueue("q", 21), await backend.enqueue("q", None)
        await nursery.start(trioqueue.run_worker_pool, backend, config(Recorder(), handler=handler))
        info = await backend.wait_for(some, timeout=10)
        nothing = await backend.wait_for(none, timeout=10)
        nursery.cancel_scope.cancel()
    assert (info.status, info.result) == ("succeeded", {"doubled": 42, "job": some})
    assert (nothing.status, nothing.result) == ("succeeded", None)


async def test_a_sync_handlers_return_value_is_the_jobs_result(autojump_clock: object) -> None:
    def handler(payload: Any, ctx: JobContext) -> Any:
        return [payload, "done"]

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        job_id = await backend.enqueue("q", "x")
        await nursery.start(trioqueue.run_worker_pool, backend, config(Recorder(), handler=handler))
        # No timeout: the autojump clock runs on while the handler's thread works.
        info = await backend.wait_for(job_id)
        nursery.cancel_scope.cancel()
    assert (info.status, info.result) == ("succeeded", ["x", "done"])


async def test_a_return_value_with_no_json_form_fails_the_attempt(autojump_clock: object) -> None:
    """Like any handler error: retried per backoff, and nothing but the failure is written."""
    rec = Recorder()

    async def unencodable(payload: Any, ctx: JobContext) -> Any:
        return {1, 2} if payload == "set" else float("nan")

    def sync_unencodable(payload: Any, ctx: JobContext) -> Any:
        return object()

    cfg = config(rec, handler=unencodable, backoff=lambda attempt: 1.0)
    sync_cfg = config(rec, queue="sync", handler=sync_unencodable, backoff=lambda attempt: 1.0)
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        a_set = await backend.enqueue("q", "set", max_attempts=2)
        nan = await backend.enqueue("q", "nan", max_attempts=1)
        obj = await backend.enqueue("sync", "x", max_attempts=1)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await nursery.start(trioqueue.run_worker_pool, backend, sync_cfg)
        infos = [await backend.wait_for(i) for i in (a_set, nan, obj)]  # no timeout: threads
        nursery.cancel_scope.cancel()
    assert [(i.status, i.attempts, i.result) for i in infos] == [
        ("failed", 2, None),
        ("failed", 1, None),
        ("failed", 1, None),
    ]
    assert infos[0].last_error == (
        "TypeError: result is not JSON-serialisable: Object of type set is not JSON serializable"
    )
    assert infos[1].last_error == (
        "TypeError: result is not JSON-serialisable: NaN and infinity have no JSON form"
    )
    assert "result is not JSON-serialisable: Object of type object" in (infos[2].last_error or "")
    assert len(rec.of("retry", a_set)) == 1  # the first attempt was retried, as any error is
    assert rec.of("succeeded") == []


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({"a": {1, 2}}, "Object of type set is not JSON serializable"),
        ([float("inf")], "NaN and infinity have no JSON form"),
        (10**5000, "Exceeds the limit"),
        ("a\x00b", "not storable as JSON: a string contains a NUL character"),
        ("x" * (MAX_RESULT_BYTES + 1), f"over the {MAX_RESULT_BYTES} a result may have"),
    ],
    ids=["set", "infinity", "huge-int", "nul", "too-big"],
)
def test_encode_result_refuses_values_with_no_storable_json_form(value: Any, reason: str) -> None:
    with pytest.raises(TypeError, match=r"^result is ") as raised:
        encode_result(value)
    assert reason in str(raised.value)


def test_encode_result_is_none_for_none_and_json_text_otherwise() -> None:
    assert encode_result(None) is None
    assert encode_result({"é": [1, True, None]}) == '{"\\u00e9": [1, true, null]}'
    assert encode_result("x" * (MAX_RESULT_BYTES - 2)) is not None  # the limit, quotes and all
