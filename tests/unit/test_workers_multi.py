"""``trioqueue.run_workers({backend: configs})``: pools on several backends in one process.

Two memory backends stand for two databases, under trio's MockClock (``autojump_clock``). A
backend "going away" is every claim, renewal and outcome of it failing with a transient
:class:`~trioqueue.BackendError`, as PostgreSQL's connection errors are.
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

#: What a database that went away fails: everything a pool sends it.
POOL_OPERATIONS = ("claim", "renew", "ack", "fail", "release", "beat", "enqueue_due")


def recorder(log: list[str]) -> Any:
    async def handler(payload: Any, ctx: trioqueue.JobContext) -> None:
        await trio.sleep(payload.get("sleep", 0))
        log.append(f"{ctx.queue} {payload['n']}")

    return handler


def config(handler: Any, queue: str, **options: Any) -> trioqueue.WorkerConfig:
    return trioqueue.WorkerConfig(handler=handler, queue=queue, max_job_duration=60, **options)


async def wait_until(predicate: Any) -> None:
    with trio.fail_after(600):
        while not predicate():
            await trio.sleep(0.1)


async def statuses(backend: trioqueue.MemoryBackend) -> dict[int, str]:
    return {info.payload["n"]: info.status for info in await backend.list_jobs()}


def go_away(backend: trioqueue.MemoryBackend) -> None:
    for op in POOL_OPERATIONS:
        backend.inject(op, error(trioqueue.BackendError("connection refused", transient=True)))


def come_back(backend: trioqueue.MemoryBackend) -> None:
    for op in POOL_OPERATIONS:
        backend.inject(op, None)


@asynccontextmanager
async def two_backends() -> AsyncIterator[tuple[trioqueue.MemoryBackend, trioqueue.MemoryBackend]]:
    async with trioqueue.open_memory() as a, trioqueue.open_memory() as b:
        yield a, b


async def test_each_pool_drains_its_own_backend(autojump_clock: trio.abc.Clock) -> None:
    """Queues "a" on one backend and "b" and "c" on another: each job runs once, from the
    backend it was enqueued on, and nothing is claimed across backends."""
    log: list[str] = []
    handler = recorder(log)
    async with two_backends() as (one, two):
        await one.enqueue("a", {"n": 1})
        await two.enqueue("b", {"n": 2})
        await two.enqueue("c", {"n": 3})
        await one.enqueue("b", {"n": 4})  # "b" runs on `two` only: this job is not served
        groups = {one: [config(handler, "a")], two: [config(handler, "b"), config(handler, "c")]}
        async with trio.open_nursery() as nursery:
            await nursery.start(functools.partial(trioqueue.run_workers, groups))
            await wait_until(lambda: len(log) == 3)
            nursery.cancel_scope.cancel()
        assert sorted(log) == ["a 1", "b 2", "c 3"]
        assert await statuses(one) == {1: "succeeded", 4: "ready"}
        assert await statuses(two) == {2: "succeeded", 3: "succeeded"}


async def test_a_backend_that_goes_away_costs_only_its_own_pools(
    autojump_clock: trio.abc.Clock,
) -> None:
    """While `two` fails every call, the pool on `one` goes on draining; `two`'s pool
    retries and drains its backlog once it is back; nothing raised out of run_workers."""
    log: list[str] = []
    handler = recorder(log)
    async with two_backends() as (one, two):
        groups = {one: [config(handler, "a")], two: [config(handler, "b")]}
        async with trio.open_nursery() as nursery:
            await nursery.start(functools.partial(trioqueue.run_workers, groups))
            go_away(two)
            await two.enqueue("b", {"n": 100})  # enqueue is not failed: the backlog of `two`
            for n in range(5):
                await one.enqueue("a", {"n": n})
            await wait_until(lambda: len(log) == 5)
            await trio.sleep(30)  # `two`'s pool has tried and failed many times meanwhile
            assert sorted(log) == [f"a {n}" for n in range(5)]
            assert await statuses(two) == {100: "ready"}
            come_back(two)
            await wait_until(lambda: "b 100" in log)
            nursery.cancel_scope.cancel()
        assert await statuses(one) == dict.fromkeys(range(5), "succeeded")
        assert await statuses(two) == {100: "succeeded"}


async def test_one_shutdown_drains_the_pools_of_every_backend(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Cancelling run_workers lets the running handlers of both backends finish within
    their grace, and their acks go each to its own backend."""
    log: list[str] = []
    handler = recorder(log)
    started = {"a": trio.Event(), "b": trio.Event()}

    async def slow(payload: Any, ctx: trioqueue.JobContext) -> None:
        started[ctx.queue].set()
        await handler(payload, ctx)

    async with two_backends() as (one, two):
        await one.enqueue("a", {"n": 1, "sleep": 10})
        await two.enqueue("b", {"n": 2, "sleep": 20})
        groups = {
            one: [config(slow, "a", shutdown_grace=60)],
            two: [config(slow, "b", shutdown_grace=60)],
        }
        async with trio.open_nursery() as nursery:
            await nursery.start(functools.partial(trioqueue.run_workers, groups))
            await started["a"].wait()
            await started["b"].wait()
            nursery.cancel_scope.cancel()
        assert sorted(log) == ["a 1", "b 2"]
        assert await statuses(one) == {1: "succeeded"}
        assert await statuses(two) == {2: "succeeded"}


async def test_the_resources_are_shared_by_the_pools_of_every_backend(
    autojump_clock: trio.abc.Clock,
) -> None:
    seen: list[object] = []
    marker = object()

    @asynccontextmanager
    async def hook() -> AsyncIterator[object]:
        yield marker

    async def handler(payload: Any, ctx: trioqueue.JobContext) -> None:
        seen.append(ctx.resources)

    async with two_backends() as (one, two):
        await one.enqueue("a", {})
        await two.enqueue("b", {})
        groups = {one: [config(handler, "a")], two: [config(handler, "b")]}
        async with trio.open_nursery() as nursery:
            await nursery.start(functools.partial(trioqueue.run_workers, groups, resources=hook))
            await wait_until(lambda: len(seen) == 2)
            nursery.cancel_scope.cancel()
    assert seen == [marker, marker]


@pytest.mark.parametrize(
    ("make_call", "expected"),
    [
        pytest.param(
            lambda one, two, h: trioqueue.run_workers(
                {one: [config(h, "a")], two: [config(h, "a")]}
            ),
            ["queue 'a' is given twice: one pool per queue"],
            id="a queue on two backends",
        ),
        pytest.param(
            lambda one, two, h: trioqueue.run_workers({one: [config(h, "a")]}, [config(h, "b")]),
            ["configs must be left out when backend is a mapping {backend: configs}"],
            id="configs beside a mapping",
        ),
        pytest.param(
            lambda one, two, h: trioqueue.run_workers(one),
            ["no worker config given: run_workers(backend, configs)"],
            id="a backend without configs",
        ),
        pytest.param(
            lambda one, two, h: trioqueue.run_workers({one: [], two: []}),
            ["no worker config given: run_workers needs at least one"],
            id="no config on any backend",
        ),
        pytest.param(
            lambda one, two, h: trioqueue.run_workers({one: config(h, "a")}),  # type: ignore[dict-item]
            ["the configs of MemoryBackend must be a list of WorkerConfig, not one"],
            id="a lone config",
        ),
        pytest.param(
            lambda one, two, h: trioqueue.run_workers(
                {one: [config(h, "a", concurrency=0)], two: [config(h, "b", transactional=True)]}
            ),
            [
                "queue 'a': concurrency must be a whole number of at least 1 (got 0)",
                "queue 'b': transactional mode needs a backend with transactions, "
                "not MemoryBackend",
            ],
            id="every problem of every backend's configs",
        ),
    ],
)
async def test_bad_groups_are_refused_before_any_backend_is_touched(
    autojump_clock: trio.abc.Clock, make_call: Any, expected: list[str]
) -> None:
    async def handler(payload: Any, ctx: trioqueue.JobContext) -> None:
        raise AssertionError("no pool may start")

    async with two_backends() as (one, two):
        with pytest.raises(trioqueue.ConfigError) as caught:
            await make_call(one, two, handler)
        assert list(caught.value.problems) == expected
        assert not any(one.statistics().calls.values()) and not any(two.statistics().calls.values())
