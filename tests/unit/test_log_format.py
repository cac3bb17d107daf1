"""``trioqueue worker --log-format json``: the library's records as one JSON object per line,
with the fields of a record about a job (docs/usage.rst, "Logging")."""

from __future__ import annotations

import functools
import io
import json
import logging
import signal
import sys
from datetime import UTC, datetime
from typing import Any

import pytest
import trio

import trioqueue
from tests._pool_harness import Recorder, config
from trioqueue._runtime.logfields import job_fields
from trioqueue.cli._commands import main
from trioqueue.cli._commands.common import stderr_log_handler
from trioqueue.cli._commands.worker import supervise_worker
from trioqueue.cli._terminal import JsonLogFormatter, library_logs_to
from trioqueue.cli._worker_lines import JsonLines

UNREACHABLE = "postgresql://postgres@127.0.0.1:1/test"  # nothing listens on port 1
JOB = trioqueue.Job(id=42, queue="mail", payload={}, attempt=3, max_attempts=5, claim_seq=9)


def _record(
    message: str, *args: object, exc_info: Any = None, extra: dict[str, Any] | None = None
) -> logging.LogRecord:
    logger = logging.getLogger("trioqueue.worker")
    return logger.makeRecord(
        logger.name, logging.WARNING, __file__, 1, message, args, exc_info, extra=extra
    )


def test_each_record_is_one_line_of_json_with_the_job_fields_when_it_has_them() -> None:
    formatter = JsonLogFormatter()
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        exc_info = sys.exc_info()
    plain = _record("worker pool %s stopped", "w1")
    about_a_job = _record("job %d failed: %s", 42, "two\nlines", extra=job_fields(JOB, "failed"))
    by_id = _record("job %d blocked the loop", 7, extra=job_fields(7, "blocking"))
    with_traceback = _record("hook %s raised", "h", exc_info=exc_info)
    lines = [formatter.format(r) for r in (plain, about_a_job, by_id, with_traceback)]
    assert all("\n" not in line for line in lines)
    first, second, third, fourth = (json.loads(line) for line in lines)

    assert set(first) == {"time", "level", "logger", "message"}
    assert first["level"] == "WARNING" and first["logger"] == "trioqueue.worker"
    assert first["message"] == "worker pool w1 stopped"
    time = datetime.fromisoformat(first["time"])
    assert time.utcoffset() is not None and time.utcoffset() == UTC.utcoffset(None)
    assert abs(time.timestamp() - plain.created) < 0.001

    assert second["message"] == "job 42 failed: two\nlines"
    assert {k: second[k] for k in ("job_id", "queue", "attempt", "event")} == {
        "job_id": 42,
        "queue": "mail",
        "attempt": 3,
        "event": "failed",
    }
    assert (third["job_id"], third["event"]) == (7, "blocking")
    assert "queue" not in third and "attempt" not in third
    assert fourth["exception"].startswith("Traceback")
    assert "RuntimeError: boom" in fourth["exception"]


async def test_the_runtime_gives_each_job_record_its_fields(autojump_clock: object) -> None:
    """Outcomes (trioqueue.worker) and a cancel directive (trioqueue.guard) carry the job."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonLogFormatter())
    rec = Recorder()
    with library_logs_to(handler, verbose=True):
        async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
            ok = await backend.enqueue("q", {})
            flaky = await backend.enqueue("q", {"fail_attempts": 1})
            hung = await backend.enqueue("q", {"sleep": 1000})
            await nursery.start(trioqueue.run_worker_pool, backend, config(rec, concurrency=3))
            await rec.wait_for("started", hung)
            await backend.cancel(hung)
            await rec.wait_for("failed", hung)
            await rec.wait_for("succeeded", flaky)
            nursery.cancel_scope.cancel()
    entries = [json.loads(line) for line in out.getvalue().splitlines()]
    about = {
        (e["job_id"], e["event"]): (e["logger"], e["queue"], e["attempt"])
        for e in entries
        if "job_id" in e
    }
    assert about[ok, "succeeded"] == ("trioqueue.worker", "q", 1)
    assert about[flaky, "retry"] == ("trioqueue.worker", "q", 1)
    [retry] = [e for e in entries if (e.get("job_id"), e["event"]) == (flaky, "retry")]
    assert "RuntimeError: planned failure on attempt 1" in retry["exception"]
    assert about[flaky, "succeeded"] == ("trioqueue.worker", "q", 2)
    assert about[hung, "cancel_requested"] == ("trioqueue.guard", "q", 1)
    assert about[hung, "cancelled"] == ("trioqueue.worker", "q", 1)
    pool = [e for e in entries if e["logger"] == "trioqueue.pool"]
    assert pool and all("job_id" not in e for e in pool)


class PoolStopped(trioqueue.BackendError):
    """Ends the worker command once the pool has started."""


def test_worker_log_format_json_writes_its_startup_warning_as_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real pool, on the memory backend, started by the command line with its options;
    every stderr line but the command's own error line is a JSON object."""

    async def serve_worker(
        dsn: str,
        schema: str,
        config: trioqueue.WorkerConfig,
        *,
        stop_now: trio.Event,
        task_status: trio.TaskStatus[None],
        **_: object,  # listen_dsn, metrics, out
    ) -> None:
        async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
            pool = functools.partial(trioqueue.run_worker_pool, stop_now=stop_now)
            await nursery.start(pool, backend, config)
            task_status.started()
            nursery.cancel_scope.cancel()
        raise PoolStopped("stopped by the test")

    monkeypatch.setattr("trioqueue.cli._commands.worker.serve_worker", serve_worker)
    argv = ["--dsn", UNREACHABLE, "worker", "tests.unit.test_cli:noop", "--queue", "q"]
    code = main([*argv, "--log-format", "json"])
    captured = capsys.readouterr()
    assert code == 1
    assert captured.out == ""  # the banner went to stderr, as JSON
    warning, banner, last = [json.loads(line) for line in captured.err.splitlines()]
    assert (banner["logger"], banner["level"], banner["event"]) == (
        "trioqueue.cli",
        "INFO",
        "worker_started",
    )
    assert banner["message"].startswith("worker pool on queue 'q' (schema trioqueue)")
    assert warning["level"] == "WARNING"  # without -v: warnings only, of the library's
    assert warning["logger"] == "trioqueue.pool"
    assert warning["message"].startswith("max_job_duration is not set")
    assert "job_id" not in warning
    assert {k: last[k] for k in ("level", "logger", "message", "event")} == {
        "level": "ERROR",
        "logger": "trioqueue.cli",
        "message": "stopped by the test",
        "event": "error",
    }

    # The default stays text: the banner on stdout, the error a line of text.
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("worker pool on queue 'q' (schema trioqueue); Ctrl-C")
    [text, error] = captured.err.splitlines()
    assert " WARNING trioqueue.pool: max_job_duration is not set" in text
    assert error == "trioqueue worker: error: stopped by the test"

    # --log-level: the library's records of that level and worse, beside -v.
    assert main([*argv, "--log-format", "json", "--log-level", "error"]) == 1
    levels = [json.loads(line)["level"] for line in capsys.readouterr().err.splitlines()]
    assert levels == ["INFO", "ERROR"]  # the banner and the error: the command's own
    assert main([*argv, "--log-format", "json", "--log-level", "INFO"]) == 1
    records = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert ("trioqueue.pool", "started") in {(r["logger"], r.get("event")) for r in records}
    assert main([*argv, "-v", "--log-level", "warning"]) == 1  # the level wins over -v
    assert " INFO " not in capsys.readouterr().err


async def test_the_workers_own_lines_as_json_records(autojump_clock: object) -> None:
    """With ``--log-format json``, the banner, each signal's answer and the stop are
    records of their own, each with its event."""
    out = io.StringIO()
    send, signals = trio.open_memory_channel[int](0)
    pool = config(Recorder(), queue="q", max_job_duration=60)
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:

        async def serve(configs: trioqueue.WorkerConfig, **kwargs: Any) -> None:
            await trioqueue.run_worker_pool(backend, configs, **kwargs)

        run = functools.partial(supervise_worker, serve, pool, signals, JsonLines(out))
        nursery.start_soon(functools.partial(run, where="memory"))
        for signum in (signal.SIGTERM, signal.SIGINT):
            await send.send(signum)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert {(r["logger"], r["level"]) for r in records} == {("trioqueue.cli", "INFO")}
    assert [r["event"] for r in records] == [
        "worker_started",
        "shutting_down",
        "stopping_at_once",
        "worker_stopped",
    ]
    assert records[0]["message"] == "worker pool on queue 'q' (memory); Ctrl-C to stop"


async def test_several_pools_records_say_which_queue(autojump_clock: object) -> None:
    """With ``run_workers``, each pool's own records (start, stop, its warning) carry its
    ``queue`` and an ``event``, and each job's records its job fields, as with one pool."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonLogFormatter())
    rec = Recorder()
    with library_logs_to(handler, verbose=True):
        async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
            mail = await backend.enqueue("mail", {})
            sms = await backend.enqueue("sms", {})
            pools = [config(rec, queue="mail", max_job_duration=60), config(rec, queue="sms")]
            await nursery.start(trioqueue.run_workers, backend, pools)
            await rec.wait_for("succeeded", mail)
            await rec.wait_for("succeeded", sms)
            nursery.cancel_scope.cancel()
    entries = [json.loads(line) for line in out.getvalue().splitlines()]
    pool = {(e["queue"], e["event"]) for e in entries if e["logger"] == "trioqueue.pool"}
    assert pool == {
        ("mail", "started"),
        ("mail", "stopping"),
        ("mail", "stopped"),
        ("sms", "started"),
        ("sms", "no_max_job_duration"),
        ("sms", "stopping"),
        ("sms", "stopped"),
    }
    done = {
        (e["job_id"], e["queue"], e["attempt"]) for e in entries if e.get("event") == "succeeded"
    }
    assert done == {(mail, "mail", 1), (sms, "sms", 1)}


def test_text_logs_leave_the_stop_error_to_the_commands_last_line() -> None:
    """The error that stops a pool is printed by the command as its last line; a text log
    line would say it twice. JSON logs keep it as an event."""

    def record(event: str) -> logging.LogRecord:
        made = logging.LogRecord("trioqueue.pool", logging.ERROR, "", 0, "stopped", (), None)
        made.event = event
        return made

    text, json_lines = stderr_log_handler("text"), stderr_log_handler("json")
    assert not text.filter(record("stopped_claims_fail"))
    assert text.filter(record("claim_failed"))
    assert json_lines.filter(record("stopped_claims_fail"))


async def test_a_scheduling_pass_names_the_queue_of_each_job_it_enqueued(
    autojump_clock: object,
) -> None:
    """A pool on ``work`` enqueues a schedule's job on ``periodic``: the record about that
    job names ``periodic`` (the job's queue) and the job, not the pool's queue."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonLogFormatter())
    start = datetime(2026, 6, 1, 12, 0, 50, tzinfo=UTC)
    with library_logs_to(handler, verbose=True):
        async with trioqueue.open_memory(now=start) as backend:
            await backend.set_schedule("minutely", "periodic", "* * * * *")
            pool = config(Recorder(), queue="work", schedule_interval=5, max_job_duration=60)
            async with trio.open_nursery() as nursery:
                await nursery.start(trioqueue.run_worker_pool, backend, pool)
                await trio.sleep(15)  # the pass at 10 s enqueues the tick of 12:01
                nursery.cancel_scope.cancel()
            [job] = await backend.list_jobs()
    entries = [json.loads(line) for line in out.getvalue().splitlines()]
    scheduled = [e for e in entries if e.get("event") == "scheduled"]
    assert [(e["queue"], e["job_id"]) for e in scheduled] == [("periodic", job.id)]
    assert scheduled[0]["message"] == f"scheduled job {job.id} on queue 'periodic'"
