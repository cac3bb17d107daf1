"""``trioqueue.run_workers``: several pools on one backend, and the resources they share.

On the memory backend with trio's MockClock (``autojump_clock``): the hook's order against
the pools is read from one event log, never from timings.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

import trioqueue
from trioqueue.testing import error


class Shared:
    """What the resources hook yields (stands for an HTTP client, say)."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.closed = False


class Hook:
    """A resources hook that logs its entry and exit, and what the exit was given."""

    def __init__(
        self, log: list[str], *, fail_on_entry: bool = False, exit_takes: float = 1
    ) -> None:
        self.log = log
        self.fail_on_entry = fail_on_entry
        self.exit_takes = exit_takes
        self.entries = 0
        self.exit_error: BaseException | None = None
        self.shared = Shared(log)

    @asynccontextmanager
    async def __call__(self) -> AsyncIterator[Shared]:
        self.entries += 1
        self.log.append("enter")
        await trio.sleep(1)  # a real hook connects somewhere: entering takes time
        if self.fail_on_entry:
            raise OSError("the HTTP service is down")
        try:
            yield self.shared
        except BaseException as exc:
            self.exit_error = exc
            raise
        finally:
            self.shared.closed = True
            await trio.sleep(self.exit_takes)  # closing a client awaits too
            self.log.append("exit")


def recorder(log: list[str]) -> Any:
    """A handler logging its queue and whether it saw open shared resources."""

    async def handler(payload: Any, ctx: trioqueue.JobContext) -> None:
        shared = ctx.resources
        assert isinstance(shared, Shared) and not shared.closed
        await trio.sleep(payload.get("sleep", 0))
        assert not shared.closed  # still open when the handler ends
        log.append(f"handled {ctx.queue} {payload['n']}")

    return handler


def configs(handler: Any, *queues: str, **options: Any) -> list[trioqueue.WorkerConfig]:
    return [
        trioqueue.WorkerConfig(handler=handler, queue=queue, max_job_duration=60, **options)
        for queue in queues
    ]


async def wait_until(predicate: Any) -> None:
    with trio.fail_after(600):
        while not predicate():
            await trio.sleep(0.1)


async def test_pools_share_one_backend_and_the_resources_entered_once(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Two queues, one hook: entered once before any claim, every handler of both pools
    sees what it yielded, and it exits only after every pool has stopped (a handler still
    finishing in the shutdown grace included)."""
    log: list[str] = []
    hook = Hook(log)
    async with trioqueue.open_memory() as backend:
        await backend.enqueue("a", {"n": 1})
        await backend.enqueue("b", {"n": 2})
        await backend.enqueue("b", {"n": 3, "sleep": 5})
        async with trio.open_nursery() as nursery:
            run = functools.partial(
                trioqueue.run_workers,
                backend,
                configs(recorder(log), "a", "b", shutdown_grace=30),
                resources=hook,
            )
            await nursery.start(run)
            await wait_until(lambda: len(log) == 3)  # enter, then the two quick jobs
            log.append("cancel")  # the long job is still running
            nursery.cancel_scope.cancel()
        statuses = {info.payload["n"]: info.status for info in await backend.list_jobs()}
    assert hook.entries == 1
    assert log[0] == "enter"
    assert sorted(log[1:3]) == ["handled a 1", "handled b 2"]
    assert log[3:] == ["cancel", "handled b 3", "exit"]
    assert statuses == {1: "succeeded", 2: "succeeded", 3: "succeeded"}
    assert hook.exit_error is None  # a shutdown is a clean exit for the hook


async def test_a_graceful_shutdown_runs_cleanup_written_after_yield(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The common hook has its cleanup after ``yield``, with no ``finally``: stopping the
    pools (cancelling run_workers) must exit it as a clean block, so that cleanup runs."""
    log: list[str] = []

    @asynccontextmanager
    async def plain_hook() -> AsyncIterator[Shared]:
        log.append("open")
        yield Shared(log)
        log.append("closed")

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        run = functools.partial(
            trioqueue.run_workers, backend, configs(recorder(log), "a"), resources=plain_hook
        )
        await nursery.start(run)
        nursery.cancel_scope.cancel()
    assert log == ["open", "closed"]


async def test_stop_now_cuts_the_hooks_exit_short(autojump_clock: trio.abc.Clock) -> None:
    """The exit runs shielded from the cancel that stopped the pools (it awaited above);
    ``stop_now``, the second Ctrl-C, cancels it as it ends the pools' grace."""
    log: list[str] = []
    hook = Hook(log, exit_takes=1000)
    stop_now = trio.Event()
    async with trioqueue.open_memory() as backend:
        async with trio.open_nursery() as nursery:
            run = functools.partial(
                trioqueue.run_workers,
                backend,
                configs(recorder(log), "a"),
                resources=hook,
                stop_now=stop_now,
            )
            await nursery.start(run)
            nursery.cancel_scope.cancel()
            with trio.CancelScope(shield=True):
                await trio.sleep(10)  # the exit is under way, shielded
                assert log == ["enter"]
                stop_now.set()
        stopped_at = trio.current_time()
    assert log == ["enter"]  # cancelled inside its 1000 s of closing
    assert stopped_at == 11  # the hook's 1 s entry, then the 10 s above


@pytest.mark.parametrize("form", ["factory", "manager", "plain-factory"])
async def test_resources_may_be_a_manager_or_a_function_returning_one(
    form: str, autojump_clock: trio.abc.Clock
) -> None:
    log: list[str] = []
    hook = Hook(log)
    resources: Any = {
        "factory": hook,  # an @asynccontextmanager function
        "manager": hook(),  # the context manager itself
        "plain-factory": lambda: hook(),
    }[form]
    async with trioqueue.open_memory() as backend:
        await backend.enqueue("a", {"n": 1})
        async with trio.open_nursery() as nursery:
            await nursery.start(
                functools.partial(
                    trioqueue.run_workers, backend, configs(recorder(log), "a"), resources=resources
                )
            )
            await wait_until(lambda: "handled a 1" in log)
            nursery.cancel_scope.cancel()
    assert log == ["enter", "handled a 1", "exit"]


async def test_without_resources_ctx_resources_is_none(autojump_clock: trio.abc.Clock) -> None:
    seen: list[object] = []

    async def handler(payload: Any, ctx: trioqueue.JobContext) -> None:
        seen.append(ctx.resources)

    async with trioqueue.open_memory() as backend:
        await backend.enqueue("a", {})
        await backend.enqueue("b", {})
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_workers, backend, configs(handler, "a", "b"))
            await wait_until(lambda: len(seen) == 2)
            nursery.cancel_scope.cancel()
    assert seen == [None, None]


async def test_run_worker_pool_hands_its_resources_value_to_handlers(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A single pool takes the value itself, opened by the caller's own ``async with``."""
    seen: list[object] = []
    client = object()

    async def handler(payload: Any, ctx: trioqueue.JobContext) -> None:
        seen.append(ctx.resources)

    async with trioqueue.open_memory() as backend:
        await backend.enqueue("a", {})
        async with trio.open_nursery() as nursery:
            [config] = configs(handler, "a")
            pool = functools.partial(trioqueue.run_worker_pool, resources=client)
            await nursery.start(pool, backend, config)
            await wait_until(lambda: len(seen) == 1)
            nursery.cancel_scope.cancel()
    assert seen[0] is client


async def test_a_hook_failing_on_entry_starts_no_pool(autojump_clock: trio.abc.Clock) -> None:
    log: list[str] = []
    hook = Hook(log, fail_on_entry=True)
    async with trioqueue.open_memory() as backend:
        job_id = await backend.enqueue("a", {"n": 1})
        with pytest.raises(OSError, match="the HTTP service is down"):
            await trioqueue.run_workers(backend, configs(recorder(log), "a", "b"), resources=hook)
        info = await backend.get_job(job_id)
        calls = backend.statistics()["calls"]
    assert log == ["enter"]  # no handler; the failed entry has nothing to exit
    assert (info.status, info.attempts) == ("ready", 0)
    assert calls["claim"] == 0


async def test_a_pool_that_fails_stops_the_others_and_the_hook_still_exits(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Pool b's claims fail for good: pool a is shut down (its running handler gets the
    grace, then is cancelled and its job released), and only then does the hook exit, with
    the pool's error."""
    log: list[str] = []
    hook = Hook(log)
    running = trio.Event()

    async def long_handler(payload: Any, ctx: trioqueue.JobContext) -> None:
        running.set()
        try:
            await trio.sleep_forever()
        finally:
            log.append(f"handler stopped at {trio.current_time():g}")

    async with trioqueue.open_memory() as backend:
        job_id = await backend.enqueue("a", {})
        pools = [
            *configs(long_handler, "a", shutdown_grace=7),
            *configs(long_handler, "b", poll_interval=1000),
        ]
        async with trio.open_nursery() as nursery:

            async def break_b() -> None:
                await running.wait()
                failed_at = trio.current_time()
                log.append(f"claims fail at {failed_at:g}")
                refused = trioqueue.BackendError("permission denied", transient=False)
                backend.inject("claim", error(refused))
                await backend.enqueue("b", {})  # wakes pool b, whose claim then fails

            nursery.start_soon(break_b)
            with pytest.raises(ExceptionGroup) as raised:
                await trioqueue.run_workers(backend, pools, resources=hook)
        info = await backend.get_job(job_id)
    assert raised.group_contains(trioqueue.BackendError, match="permission denied")
    failed_at = float(log[1].split()[-1])
    assert log == [
        "enter",
        f"claims fail at {failed_at:g}",
        f"handler stopped at {failed_at + 7:g}",  # pool a's grace, then cancelled
        "exit",
    ]
    assert isinstance(hook.exit_error, ExceptionGroup)
    assert (info.status, info.attempts) == ("ready", 0)  # released, not charged


@pytest.mark.parametrize(
    ("pools", "resources", "problems"),
    [
        pytest.param(
            [], None, ["no worker config given: run_workers needs at least one"], id="none"
        ),
        pytest.param(
            ["a", "a"], None, ["queue 'a' is given twice: one pool per queue"], id="queue-twice"
        ),
        pytest.param(
            ["a", "bad"],
            None,
            ["queue 'bad': concurrency must be a whole number of at least 1 (got 0)"],
            id="bad-config",
        ),
        pytest.param(
            ["a"],
            42,
            ["resources must be an async context manager or a function returning one, not int"],
            id="resources-int",
        ),
        pytest.param(
            ["a"],
            lambda: 42,
            [
                "resources must be an async context manager or a function returning one; "
                "calling it returned int"
            ],
            id="resources-factory-int",
        ),
    ],
)
async def test_bad_configs_are_refused_before_anything_starts(
    pools: list[str], resources: Any, problems: list[str], autojump_clock: trio.abc.Clock
) -> None:
    log: list[str] = []
    handler = recorder(log)
    made = [
        trioqueue.WorkerConfig(handler=handler, queue=queue, concurrency=0 if queue == "bad" else 1)
        for queue in pools
    ]
    async with trioqueue.open_memory() as backend:
        await backend.enqueue("a", {"n": 1})
        with pytest.raises(trioqueue.ConfigError) as raised:
            await trioqueue.run_workers(backend, made, resources=resources)
        calls = backend.statistics()["calls"]
    assert list(raised.value.problems) == problems
    assert calls["claim"] == 0


async def test_a_bad_config_does_not_enter_the_hook(autojump_clock: trio.abc.Clock) -> None:
    log: list[str] = []
    hook = Hook(log)
    async with trioqueue.open_memory() as backend:
        bad = trioqueue.WorkerConfig(handler=recorder(log), queue="a", visibility_timeout=-1)
        with pytest.raises(trioqueue.ConfigError, match="queue 'a': visibility_timeout"):
            await trioqueue.run_workers(backend, [bad], resources=hook)
    assert hook.entries == 0


async def test_transactional_configs_need_a_transactional_backend(
    autojump_clock: trio.abc.Clock,
) -> None:
    async with trioqueue.open_memory() as backend:
        config = trioqueue.transactional_worker_config(2, recorder([]), queue="a")
        with pytest.raises(trioqueue.ConfigError, match="queue 'a': transactional mode needs"):
            await trioqueue.run_workers(backend, [config])


# -- a handler that asks the process to exit (docs/protocol.rst §4.1) ---------------------


def exiting_after(seconds: float, raised: BaseException, log: list[str]) -> Any:
    """A handler that raises ``raised`` after ``seconds``."""

    async def handler(payload: Any, ctx: trioqueue.JobContext) -> None:
        await trio.sleep(seconds)
        log.append(f"{ctx.queue} raises {raised!r}")
        raise raised

    return handler


def running_until_cancelled(log: list[str], *, then: BaseException | None = None) -> Any:
    """A handler that runs until cancelled, then ends as cancelled (or raises ``then``)."""

    async def handler(payload: Any, ctx: trioqueue.JobContext) -> None:
        try:
            await trio.sleep_forever()
        finally:
            log.append(f"{ctx.queue} cancelled at {trio.current_time():g}")
            if then is not None:
                raise then

    return handler


@pytest.mark.parametrize("with_hook", [True, False], ids=["hook", "no-hook"])
async def test_an_exit_in_one_pool_is_raised_bare_and_the_others_stop_cleanly(
    autojump_clock: trio.abc.Clock, with_hook: bool
) -> None:
    """Pool a's handler calls ``sys.exit(3)``: its job is failed, pool b is shut down as on
    a cancel (its running job gets the grace, then is released uncharged), the hook exits
    after both pools with the exit itself, and run_workers raises that very SystemExit,
    not inside a group."""
    log: list[str] = []
    hook = Hook(log) if with_hook else None
    raised = SystemExit(3)
    async with trioqueue.open_memory() as backend:
        exiting = await backend.enqueue("a", {}, max_attempts=1)
        bystander = await backend.enqueue("b", {}, max_attempts=1)
        pools = [
            *configs(exiting_after(1, raised, log), "a"),
            *configs(running_until_cancelled(log), "b", shutdown_grace=5),
        ]
        with pytest.raises(BaseException) as caught:
            await trioqueue.run_workers(backend, pools, resources=hook)
        exited = await backend.get_job(exiting)
        released = await backend.get_job(bystander)
    assert caught.value is raised
    assert (exited.status, exited.attempts) == ("failed", 1)
    assert (released.status, released.attempts) == ("ready", 0)
    start = 1 if with_hook else 0  # the hook's entry takes 1 s
    steps = [f"a raises {raised!r}", f"b cancelled at {start + 1 + 5:g}"]  # b's grace
    assert log == (["enter", *steps, "exit"] if with_hook else steps)
    if hook is not None:
        assert hook.exit_error is raised


async def test_the_first_exit_request_wins_and_the_others_are_its_cause(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Pool a exits with SystemExit(3); pool b's handler, cancelled at the end of b's
    grace, raises KeyboardInterrupt: run_workers raises the first exit request, and the
    group of every pool's error is its ``__cause__``. (b's job is released uncharged: the
    shutdown stopped it before it raised, and the first stop decides, I8.)"""
    log: list[str] = []
    first, second = SystemExit(3), KeyboardInterrupt()
    async with trioqueue.open_memory() as backend:
        a_job = await backend.enqueue("a", {}, max_attempts=1)
        b_job = await backend.enqueue("b", {}, max_attempts=1)
        pools = [
            *configs(exiting_after(1, first, log), "a"),
            *configs(running_until_cancelled(log, then=second), "b", shutdown_grace=5),
        ]
        with pytest.raises(BaseException) as caught:
            await trioqueue.run_workers(backend, pools)
        statuses = [(await backend.get_job(job)).status for job in (a_job, b_job)]
    assert caught.value is first
    cause = caught.value.__cause__
    assert isinstance(cause, BaseExceptionGroup)
    assert list(cause.exceptions) == [first, second]  # in the order the pools stopped
    assert statuses == ["failed", "ready"]
    assert log == [f"a raises {first!r}", "b cancelled at 6"]


async def test_an_exit_wins_over_a_pool_error_that_came_first(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Pool b's claims fail for good; pool a, stopping on that, has a handler that raises
    SystemExit when cancelled: the process must exit as asked, so run_workers raises the
    SystemExit, with b's BackendError in its ``__cause__``."""
    log: list[str] = []
    raised = SystemExit(2)
    async with trioqueue.open_memory() as backend:
        await backend.enqueue("a", {}, max_attempts=1)
        pools = [
            *configs(running_until_cancelled(log, then=raised), "a", shutdown_grace=5),
            *configs(running_until_cancelled(log), "b", poll_interval=1000),
        ]

        async def break_b() -> None:
            await trio.sleep(1)
            backend.inject("claim", error(trioqueue.BackendError("no table", transient=False)))
            await backend.enqueue("b", {})  # wakes pool b, whose claim then fails

        async with trio.open_nursery() as nursery:
            nursery.start_soon(break_b)
            with pytest.raises(BaseException) as caught:
                await trioqueue.run_workers(backend, pools)
    assert caught.value is raised
    cause = caught.value.__cause__
    assert isinstance(cause, BaseExceptionGroup)
    assert [type(exc) for exc in cause.exceptions] == [trioqueue.BackendError, SystemExit]
    assert log == ["a cancelled at 6"]  # b failed at 1, then a's grace of 5 s
