"""Bad input is refused up front with a clear message, and nothing is written (issue 7).

Pools run on the memory backend under trio's MockClock; the command line runs in a
subprocess where the bytes of its arguments matter.
"""

from __future__ import annotations

import functools
import gc
import subprocess
import sys
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

import trioqueue
from tests._pool_harness import Recorder, config
from trioqueue import BackendError, ConfigError, JobContext
from trioqueue.testing import error

ROOT = Path(__file__).resolve().parents[2]


async def noop_handler(payload: Any, ctx: JobContext) -> None:
    pass


# -- the command line's bytes (item 6) ---------------------------------------------------


def test_cli_worker_refuses_a_queue_of_argv_bytes_that_are_not_utf8() -> None:
    """``--queue $'\\xff'``: Python passes the byte on as U+DCFF (surrogateescape), which no
    backend can store. Refused before connecting (the DSN here would refuse, exit 1)."""
    argv: list[str | bytes] = [sys.executable, "-m", "trioqueue", "worker"]
    argv += [
        "tests.unit.test_bad_input:noop_handler",
        "--queue",
        b"\xff",
        "--dsn",
        "postgresql://127.0.0.1:1/x",
    ]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert "queue must not contain bytes that are not valid UTF-8" in done.stderr


# -- handlers and hooks that would never run (item 12) -----------------------------------


async def _pool_refuses(
    backend: trioqueue.MemoryBackend, cfg: trioqueue.WorkerConfig
) -> ConfigError:
    """Run a pool that must refuse ``cfg`` (within a minute of fake time, else fail)."""
    with trio.fail_after(60), pytest.raises(ConfigError) as info:
        await trioqueue.run_worker_pool(backend, cfg)
    return info.value


async def async_generator_handler(payload: Any, ctx: JobContext) -> Any:
    yield payload  # an `async def` with a yield: calling it runs nothing


def generator_handler(payload: Any, ctx: JobContext) -> Any:
    yield payload


async def async_generator_hook(job: trioqueue.Job) -> Any:
    yield job


class AsyncGeneratorCallable:
    async def __call__(self, payload: Any, ctx: JobContext) -> Any:
        yield payload


@pytest.mark.parametrize(
    "handler",
    [
        async_generator_handler,
        functools.partial(async_generator_handler),
        AsyncGeneratorCallable(),
        generator_handler,
    ],
    ids=["async-generator", "partial", "callable-object", "generator"],
)
async def test_a_generator_handler_is_refused_and_nothing_is_claimed(
    autojump_clock: object, handler: Any
) -> None:
    async with trioqueue.open_memory() as backend:
        job_id = await backend.enqueue("q", {"n": 1})
        refused = await _pool_refuses(backend, trioqueue.WorkerConfig(handler=handler, queue="q"))
        assert [p.split()[0] for p in refused.problems] == ["handler"]
        assert "generator function (it uses yield)" in refused.problems[0]
        assert (await backend.get_job(job_id)).status == "ready"
        assert backend.statistics()["calls"]["claim"] == 0


@pytest.mark.parametrize("hook", ["on_job_claimed", "on_job_failed"])
async def test_a_generator_hook_is_refused(autojump_clock: object, hook: str) -> None:
    async with trioqueue.open_memory() as backend:
        cfg = config(Recorder(), **{hook: async_generator_hook})
        refused = await _pool_refuses(backend, cfg)
        [problem] = refused.problems
        assert problem.startswith(f"{hook} must not be a generator function")


async def test_a_non_callable_hook_is_refused(autojump_clock: object) -> None:
    async with trioqueue.open_memory() as backend:
        refused = await _pool_refuses(backend, config(Recorder(), on_job_retry="later"))
        assert refused.problems == ("on_job_retry must be an async function (async def) or None",)


async def work(payload: Any) -> None:
    raise AssertionError("never awaited, so never run")


@pytest.mark.parametrize(
    "handler",
    [lambda payload, ctx: work(payload), lambda payload, ctx: async_generator_handler(1, ctx)],
    ids=["returns-a-coroutine", "returns-an-async-generator"],
)
async def test_a_sync_handler_returning_unrun_work_fails_its_job_naming_the_fix(
    autojump_clock: object, handler: Any
) -> None:
    rec = Recorder()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
            job_id = await backend.enqueue("q", {"n": 1}, max_attempts=1)
            await nursery.start(trioqueue.run_worker_pool, backend, config(rec, handler=handler))
            # No fail_after: the autojump clock runs on while the handler's thread works,
            # so on a loaded machine any fake-time guard could fire before the thread ends.
            failed = await rec.wait_for("failed", job_id)
            info = await backend.get_job(job_id)
            nursery.cancel_scope.cancel()
        gc.collect()
    last_error = info.last_error or ""
    assert info.status == "failed"
    assert last_error == failed.detail
    assert last_error.startswith("TypeError: handler returned a")
    if "coroutine" in last_error:
        assert "declare the handler `async def`" in last_error
    else:
        assert "a handler must not yield" in last_error
    assert not [w for w in caught if "never awaited" in str(w.message)]


# -- a claim that fails for good stops the pool (item 6) ---------------------------------


async def test_a_claim_failing_for_good_stops_the_pool_with_the_backends_error(
    autojump_clock: object,
) -> None:
    """A non-transient claim failure (a missing table, say) raises out of the pool at once,
    with the backend's message and hint, instead of being retried forever."""
    async with trioqueue.open_memory() as backend:
        cause = BackendError("relation q.jobs does not exist", transient=False, hint="migrate!")
        backend.inject("claim", error(cause))
        with trio.fail_after(60), pytest.raises(BackendError) as info:
            await trioqueue.run_worker_pool(backend, config(Recorder()))
    assert trio.current_time() == 0  # not after a round of retries
    assert info.value.transient is False
    assert info.value.__cause__ is cause
    message = str(info.value)
    assert "claiming from queue 'q' failed, and trying again cannot help" in message
    assert message.endswith("relation q.jobs does not exist (migrate!)")
    assert backend.statistics()["calls"]["claim"] == 1


async def test_a_claim_refusing_its_arguments_stops_the_pool(autojump_clock: object) -> None:
    """An argument check refusing a value refuses it every time: the pool stops."""
    async with trioqueue.open_memory() as backend:
        backend.inject("claim", error(ValueError("visibility_timeout must be a number")))
        with trio.fail_after(60), pytest.raises(BackendError, match="visibility_timeout must"):
            await trioqueue.run_worker_pool(backend, config(Recorder()))


async def test_transient_claim_failures_are_retried(autojump_clock: object) -> None:
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        lost = BackendError("connection lost", transient=True)
        backend.inject("claim", error(lost, times=3))
        [job_id] = [await backend.enqueue("q", {"sleep": 1})]
        await nursery.start(trioqueue.run_worker_pool, backend, config(rec))
        with trio.fail_after(600):
            await rec.wait_for("succeeded", job_id)
        nursery.cancel_scope.cancel()
    assert backend.statistics()["calls"]["claim"] >= 4


async def test_a_pool_stopped_by_its_claims_lets_running_jobs_finish_first(
    autojump_clock: object,
) -> None:
    """The stop is the pool's graceful shutdown: running handlers get shutdown_grace."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend:
        job_id = await backend.enqueue("q", {"sleep": 3})
        async with trio.open_nursery() as nursery:

            async def revoke_once_running() -> None:
                await rec.wait_for("started", job_id)
                backend.inject("claim", error(BackendError("permission denied", transient=False)))
                await backend.enqueue("q", {"sleep": 0})  # wakes the claim loop

            nursery.start_soon(revoke_once_running)
            with trio.fail_after(600), pytest.raises(BackendError, match="permission denied"):
                await trioqueue.run_worker_pool(backend, config(rec, shutdown_grace=10))
        assert (await backend.get_job(job_id)).status == "succeeded"
    assert rec.of("succeeded", job_id)[0].at == 3


# -- WorkerConfig.max_attempts: deprecated, without effect (item 10) ----------------------


def test_worker_config_max_attempts_warns_that_it_has_no_effect() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trioqueue.WorkerConfig(handler=noop_handler)  # the default: no warning
        trioqueue.WorkerConfig(handler=noop_handler, max_attempts=10)
    with pytest.warns(DeprecationWarning, match="max_attempts has no effect") as caught:
        trioqueue.WorkerConfig(handler=noop_handler, max_attempts=3)
    assert caught[0].filename == __file__  # points at the caller's line


@pytest.mark.filterwarnings("ignore:WorkerConfig.max_attempts has no effect")
async def test_a_job_gets_the_attempts_it_was_enqueued_with(autojump_clock: object) -> None:
    """Whatever the pool's max_attempts says, in either direction."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        few = await backend.enqueue("q", {"fail_attempts": 9}, max_attempts=2)
        many = await backend.enqueue("q", {"fail_attempts": 9}, max_attempts=4)
        await nursery.start(trioqueue.run_worker_pool, backend, config(rec, max_attempts=3))
        with trio.fail_after(600):
            await rec.wait_for("failed", few)
            await rec.wait_for("failed", many)
        nursery.cancel_scope.cancel()
    assert len(rec.of("raised", few)) == 2
    assert len(rec.of("raised", many)) == 4


async def test_a_pool_on_a_closed_memory_backend_stops(autojump_clock: object) -> None:
    """A closed backend never opens again: its claims are not worth retrying."""
    async with trioqueue.open_memory() as backend:
        pass
    with trio.fail_after(60), pytest.raises(BackendError, match="memory backend is closed"):
        await trioqueue.run_worker_pool(backend, config(Recorder()))


# -- names that fool the eye or the page (issue 22, item 8) -------------------------------

#: Queue names no backend takes: controls (C0, DEL, C1), bidirectional formatting, line
#: separators and invisible characters, each as an attacker would use it.
UNSAFE_NAMES = [
    "a\rb",  # HTML reads it as "a\nb": the overview reloaded for ever
    "forged\nline",
    "\x1b[31mred",  # an ANSI escape
    "bell\x07",
    "del\x7f",
    "next\x85line",  # C1
    "\u202eliam",  # shows as "mail"
    "\u2066isolated\u2069",
    "\u200fmark",
    "line\u2028separator",
    "zero\u200bwidth",
    "\ufeffbom",
]
#: Names that look unusual and are fine: scripts written right to left need no controls,
#: and the zero-width joiners of emoji and some scripts stay allowed.
FINE_NAMES = ["مرحبا", "שלום-עולם", "dev\u200dops", "👩\u200d💻", "tab-free name"]
UNSAFE = "must not contain control, bidirectional formatting or invisible characters"


async def assert_unsafe_names_refused(
    backend: trioqueue.MemoryBackend | trioqueue.PostgresBackend,
) -> None:
    """Every call that names a queue (or a schedule) refuses an unsafe name with the same
    ValueError and writes nothing; the filters that only read still take it, and safe
    names outside ASCII pass. Shared with the PostgreSQL test (test_bad_input_postgres)."""
    for name in UNSAFE_NAMES:
        p = functools.partial
        calls: dict[str, Callable[[], Awaitable[object]]] = {
            "enqueue": p(backend.enqueue, name, {}),
            "enqueue_many": p(backend.enqueue_many, name, [{}, {}]),
            "pause_queue": p(backend.pause_queue, name),
            "resume_queue": p(backend.resume_queue, name),
            "set_queue_limits": p(backend.set_queue_limits, name, max_running=1),
            "set_schedule queue": p(backend.set_schedule, "tick", name, "* * * * *"),
            "set_schedule name": p(backend.set_schedule, name, "ok", "* * * * *"),
        }
        for what, call in calls.items():
            with pytest.raises(ValueError, match=UNSAFE) as info:
                await call()
            assert f"U+{ord(next(c for c in name if not c.isalnum())):04X}" in str(info.value), what
        assert await backend.list_jobs(queue=name) == []
        assert await backend.count_jobs(queue=name) == 0
        await backend.finished_history(queue=name)
    assert await backend.queue_stats() == {}
    assert await backend.list_schedules() == []
    assert await backend.list_jobs() == []
    for name in FINE_NAMES:
        job_id = await backend.enqueue(name, {})
        assert (await backend.get_job(job_id)).queue == name


async def test_unsafe_queue_and_schedule_names_are_refused_and_nothing_is_written() -> None:
    async with trioqueue.open_memory() as backend:
        await assert_unsafe_names_refused(backend)


@pytest.mark.parametrize("name", UNSAFE_NAMES)
async def test_a_pool_on_an_unsafe_queue_name_is_refused(autojump_clock: object, name: str) -> None:
    async with trioqueue.open_memory() as backend:
        refused = await _pool_refuses(backend, config(Recorder(), queue=name))
    assert UNSAFE in str(refused)
