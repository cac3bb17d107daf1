"""One log line per attempt outcome, a failure's with its traceback (docs/usage.rst,
"Logging"): ``exc_info`` for text formatters, the ``exception`` field of
``--log-format json``; WARNING for what an operator must see without ``-v``. Whole pools on
the memory backend, driven by trio's MockClock."""

from __future__ import annotations

import gc
import io
import json
import logging
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import trio

import trioqueue
from tests._pool_harness import Recorder, config
from trioqueue import JobContext
from trioqueue.cli._terminal import JsonLogFormatter, TextLogFormatter, library_logs_to


class ReportFailed(Exception):
    pass


def raise_report_failed(why: str) -> None:
    raise ReportFailed(why)


async def flaky(payload: Any, ctx: JobContext) -> None:
    """Raises on the attempts its payload names, or sleeps as long as it says."""
    if ctx.attempt in payload.get("fail", ()):
        raise_report_failed(f"attempt {ctx.attempt}")
    await trio.sleep(payload.get("sleep", 0))


@contextmanager
def library_log(formatter: logging.Formatter, *, verbose: bool) -> Iterator[io.StringIO]:
    """The library's log as the worker command routes it: INFO with ``-v``, else WARNING."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    with library_logs_to(handler, verbose=verbose):
        yield out


async def run_jobs(payloads: list[dict[str, Any]], **overrides: Any) -> list[trioqueue.JobInfo]:
    cfg = config(Recorder(), handler=flaky, backoff=lambda attempt: 1.0, **overrides)
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        ids = [await backend.enqueue("q", p, max_attempts=3) for p in payloads]
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        infos = [await backend.wait_for(i) for i in ids]
        nursery.cancel_scope.cancel()
    return infos


def job_entries(out: io.StringIO, job_id: int) -> list[dict[str, Any]]:
    entries = [json.loads(line) for line in out.getvalue().splitlines()]
    return [e for e in entries if e.get("job_id") == job_id and e["logger"] == "trioqueue.worker"]


async def test_each_attempt_has_one_line_at_info_and_a_retry_carries_its_traceback(
    autojump_clock: object,
) -> None:
    with library_log(JsonLogFormatter(), verbose=True) as out:
        [info] = await run_jobs([{"fail": [1, 2]}])
    assert info.status == "succeeded"
    entries = job_entries(out, info.id)
    assert [(e["event"], e["attempt"], e["level"]) for e in entries] == [
        ("retry", 1, "INFO"),
        ("retry", 2, "INFO"),
        ("succeeded", 3, "INFO"),
    ]
    first, second, success = entries
    for entry, attempt in ((first, 1), (second, 2)):
        assert entry["exception"].startswith("Traceback (most recent call last):\n")
        assert "in raise_report_failed\n" in entry["exception"]
        assert entry["exception"].endswith(f"ReportFailed: attempt {attempt}")
    assert "exception" not in success


async def test_by_default_a_worker_logs_a_job_failed_for_good_with_its_traceback_only(
    autojump_clock: object,
) -> None:
    """Without -v (WARNING): nothing of successes, retries or cancellations; a final
    failure at WARNING, its traceback in the record."""
    with library_log(JsonLogFormatter(), verbose=False) as out:
        ok, retried, failed = await run_jobs([{}, {"fail": [1]}, {"fail": [1, 2, 3]}])
    assert (ok.status, retried.status, failed.status) == ("succeeded", "succeeded", "failed")
    assert job_entries(out, ok.id) == job_entries(out, retried.id) == []
    [line] = job_entries(out, failed.id)
    assert (line["event"], line["level"], line["attempt"]) == ("failed", "WARNING", 3)
    assert line["message"] == f"job {failed.id} failed: ReportFailed: attempt 3"
    assert line["exception"].endswith("ReportFailed: attempt 3")


async def test_a_text_log_prints_the_traceback_under_the_failures_line(
    autojump_clock: object,
) -> None:
    with library_log(TextLogFormatter("%(levelname)s %(message)s"), verbose=False) as out:
        [failed] = await run_jobs([{"fail": [1, 2, 3]}])
    lines = out.getvalue().splitlines()
    start = lines.index(f"WARNING job {failed.id} failed: ReportFailed: attempt 3")
    assert lines[start + 1] == "    Traceback (most recent call last):"
    assert lines[start + 1 :][-1] == f"    {__name__}.ReportFailed: attempt 3"


async def test_a_cancellation_is_its_own_event_at_info(autojump_clock: object) -> None:
    cfg = config(Recorder(), handler=flaky)
    with library_log(JsonLogFormatter(), verbose=True) as out:
        async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
            job_id = await backend.enqueue("q", {"sleep": 100})
            await nursery.start(trioqueue.run_worker_pool, backend, cfg)
            await trio.sleep(1)
            await backend.cancel(job_id)
            info = await backend.wait_for(job_id)
            nursery.cancel_scope.cancel()
    assert info.status == "failed"
    [line] = job_entries(out, job_id)
    assert (line["event"], line["level"]) == ("cancelled", "INFO")
    assert line["message"] == f"job {job_id} failed: cancelled: cancel requested"
    assert "exception" not in line  # trio's Cancelled is no error of the handler's


async def test_a_timeout_names_no_exception(autojump_clock: object) -> None:
    with library_log(JsonLogFormatter(), verbose=True) as out:
        [info] = await run_jobs([{"sleep": 100}], max_job_duration=5)
    entries = job_entries(out, info.id)
    assert [e["event"] for e in entries] == ["retry", "retry", "failed"]
    assert all("exception" not in e for e in entries)
    assert "max_job_duration" in entries[-1]["message"]


async def test_the_exception_is_let_go_once_its_line_is_logged(autojump_clock: object) -> None:
    """Its traceback holds the attempt's frames, which held it: without letting go, every
    failure's frames would wait for the garbage collector. (The library's records are
    kept from pytest's own capture here, which would hold the record, and the exception.)"""
    raised: list[weakref.ref[BaseException]] = []

    def made(why: str) -> BaseException:
        error = ReportFailed(why)
        raised.append(weakref.ref(error))
        return error

    async def handler(payload: Any, ctx: JobContext) -> None:
        raise made("kept?")  # no local of the handler's holds it

    cfg = config(Recorder(), handler=handler)
    library = logging.getLogger("trioqueue")
    gc.disable()
    library.propagate = False
    try:
        with library_log(JsonLogFormatter(), verbose=True) as out:
            async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
                job_id = await backend.enqueue("q", None, max_attempts=1)
                await nursery.start(trioqueue.run_worker_pool, backend, cfg)
                await backend.wait_for(job_id)
                nursery.cancel_scope.cancel()
        [ref] = raised
        assert ref() is None
    finally:
        library.propagate = True
        gc.enable()
    [line] = job_entries(out, job_id)
    assert line["exception"].endswith("ReportFailed: kept?")
