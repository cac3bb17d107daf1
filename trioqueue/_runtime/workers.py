"""Several worker pools in one process: :func:`run_workers`, and the resources they share.

The nursery tree::

    run_workers
    └── async with resources as value       entered first, exited last
        └── pools nursery
            ├── run_worker_pool(backend, configs[0], resources=value)
            └── run_worker_pool(backend, configs[1], resources=value)  ...

The pools may be on several backends (``run_workers({backend_a: [...], backend_b: [...]})``,
queues spread over several databases, docs/howto/beyond-one-server.rst): they are still
children of the one pools nursery, so one shutdown drains them all, and nothing else ties
them. A backend that stops answering costs its own pools only: each pool retries its
claims while the trouble is transient (docs/usage.rst), and the pools of the other
backends never wait on it.

Every config is checked before anything starts, so a bad one stops the whole process before
the resources hook runs. Cancelling ``run_workers`` shuts every pool down gracefully, each
with its own ``shutdown_grace``; the hook exits only after the last pool has stopped, so no
handler ever sees a closed resource, and it exits as from a clean block (the cancellation
is how run_workers is asked to stop, not an error of the hook's). The hook exits shielded from the cancellation that
stopped the pools, so its cleanup may await; only ``stop_now`` cuts it short. A pool that fails (a claim error retrying cannot fix)
cancels the others through the nursery, and the hook still exits.

A pool whose handler asked the process to exit (``SystemExit``, ``KeyboardInterrupt``)
raises that exception bare, and so does run_workers, whatever the other pools raised
beside it (docs/protocol.rst §4.1): the first exit request to reach the pools nursery wins,
and the group of every pool's error is its ``__cause__``. The hook's exit is given that
same exception.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeAlias, TypeVar

import trio

from trioqueue._backends.interface import Backend
from trioqueue._errors import ConfigError, exit_request
from trioqueue._runtime.config import WorkerConfig, problems_of
from trioqueue._runtime.observer import PoolObserver
from trioqueue._runtime.pool import run_worker_pool

Resources: TypeAlias = (
    "AbstractAsyncContextManager[Any] | Callable[[], AbstractAsyncContextManager[Any]]"
)
"""An async context manager, or a function of no arguments returning one (such as an
``@asynccontextmanager`` function): what it yields becomes ``ctx.resources``."""

#: A backend's own type (a mapping is invariant in its keys: ``{pg_a: ..., pg_b: ...}``
#: is a mapping of PostgresBackend, which must do as one of Backend).
AnyBackend = TypeVar("AnyBackend", bound=Backend)
#: One pool to run: its backend and its config.
Placed: TypeAlias = tuple[Backend, WorkerConfig]


async def run_workers(
    backend: Backend | Mapping[AnyBackend, Iterable[WorkerConfig]],
    configs: Iterable[WorkerConfig] | None = None,
    *,
    resources: Resources | None = None,
    stop_now: trio.Event | None = None,
    observer: PoolObserver | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run one worker pool per config, all on ``backend`` or each on its own backend, until
    cancelled; then shut every pool down gracefully.

    Args:
        backend: where the jobs live, shared by every pool. On PostgreSQL, size its
            ``max_connections`` for all of them (docs/usage.rst, "Several queues in one
            process"). Or a mapping ``{backend: configs}`` to run pools on several backends
            in one process (queues spread over several databases; then ``configs`` is left
            out): one shutdown drains them all, and a backend that stops answering costs
            only its own pools, which retry meanwhile (docs/howto/beyond-one-server.rst).
        configs: one per pool, each on a queue of its own; a queue name is the pool's name
            in logs and metrics, so it is given once in the whole process, whatever the
            backend.
        resources: an async context manager, or a function of no arguments returning one
            (an ``@asynccontextmanager`` function, say). It is entered before any pool
            starts and exited after every pool has stopped, shielded from the cancellation
            that stopped them (its cleanup may await; ``stop_now`` cuts it short); what it
            yields is every handler's ``ctx.resources``. None: ``ctx.resources`` is None.
        stop_now: as for :func:`run_worker_pool`, for every pool: once set, the shutdown
            has no grace left.
        observer: told of every pool's events (each event names its queue).
        task_status: for ``nursery.start``, which returns once every pool is claiming.

    Raises:
        ConfigError: listing every problem of every config (each prefixed with its queue),
            a queue named twice (on any backends), no config at all, ``configs`` beside a
            mapping of backends (or missing without one), or ``resources`` of the wrong
            kind; raised before the resources are entered or any backend is touched.
        Exception: whatever entering or exiting ``resources`` raised (no pool started when
            entering failed), or a pool's own error (the other pools are then shut down).
        SystemExit: a claim hook or handler of one of the pools raised it
            (``KeyboardInterrupt`` likewise), as :func:`run_worker_pool` does: the other
            pools are shut down gracefully first, and the exception is raised as it was
            raised, not inside exception groups. If several were raised, the first one
            wins, even over other errors of the pools; the group of them all is its
            ``__cause__`` (docs/protocol.rst §4.1).
    """
    placed = _placed(backend, configs)
    _check_configs(placed)
    manager = _resources_manager(resources)
    if manager is None:
        await _run_pools(placed, None, stop_now, observer, task_status)
        return
    value = await manager.__aenter__()
    try:
        await _run_pools(placed, value, stop_now, observer, task_status)
    except BaseException as exc:
        if _is_shutdown(exc):
            # Cancelling is how run_workers is asked to stop: the pools stopped as they
            # should, so the hook exits as from a clean block. Else code after an
            # @asynccontextmanager's ``yield`` without ``finally`` (the usual cleanup)
            # would never run.
            await _exit(manager, None, stop_now)
            raise
        if not await _exit(manager, exc, stop_now):
            raise
    else:
        await _exit(manager, None, stop_now)


def _is_shutdown(exc: BaseException) -> bool:
    """Whether the pools ended by the cancellation that asks them to stop (and nothing
    else went wrong)."""
    if isinstance(exc, trio.Cancelled):
        return True
    if isinstance(exc, BaseExceptionGroup):
        _, rest = exc.split(trio.Cancelled)
        return rest is None
    return False


async def _exit(
    manager: AbstractAsyncContextManager[Any],
    exc: BaseException | None,
    stop_now: trio.Event | None,
) -> bool:
    """Exit ``manager`` (with ``exc``, if the pools raised one), shielded from the
    cancellation that stopped the pools, so that its cleanup can still await (close a
    client, flush a buffer); but ``stop_now`` cancels it too, as it ends the pools' grace.

    Returns:
        Whether the manager suppressed ``exc``.
    """
    with trio.CancelScope(shield=True) as exiting:
        async with trio.open_nursery() as nursery:
            if stop_now is not None:
                nursery.start_soon(_cancel_when_set, stop_now, exiting)
            try:
                kind = None if exc is None else type(exc)
                traceback = None if exc is None else exc.__traceback__
                suppressed: bool | None = await manager.__aexit__(kind, exc, traceback)
            finally:
                nursery.cancel_scope.cancel()
        return bool(suppressed)
    return False  # stop_now cut the exit short: the pools' exception goes on


async def _cancel_when_set(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


def _placed(
    backend: Backend | Mapping[AnyBackend, Iterable[WorkerConfig]],
    configs: Iterable[WorkerConfig] | None,
) -> list[Placed]:
    """Every pool to run, as ``(backend, config)``, in the order given.

    Raises:
        ConfigError: ``configs`` given with a mapping of backends, or left out without one.
    """
    if isinstance(backend, Mapping):
        if configs is not None:
            raise ConfigError(
                ["configs must be left out when backend is a mapping {backend: configs}"]
            )
        lone = [type(each).__name__ for each, group in backend.items() if _is_config(group)]
        if lone:
            raise ConfigError(
                [f"the configs of {name} must be a list of WorkerConfig, not one" for name in lone]
            )
        return [(each, config) for each, group in backend.items() for config in group]
    if configs is None:
        raise ConfigError(["no worker config given: run_workers(backend, configs)"])
    return [(backend, config) for config in configs]


def _is_config(value: object) -> bool:
    return isinstance(value, WorkerConfig)


async def _run_pools(
    placed: list[Placed],
    resources: object,
    stop_now: trio.Event | None,
    observer: PoolObserver | None,
    task_status: trio.TaskStatus[None],
) -> None:
    """Run the pools; raise an exit request of theirs bare (docs/protocol.rst §4.1)."""
    try:
        async with trio.open_nursery() as pools:
            for backend, config in placed:
                pool = functools.partial(
                    run_worker_pool,
                    backend,
                    config,
                    stop_now=stop_now,
                    observer=observer,
                    resources=resources,
                )
                await pools.start(pool, name=f"trioqueue.pool[{config.queue}]")
            task_status.started()
    except BaseExceptionGroup as group:
        # The nursery holds each pool's error in the order the pools stopped: the first
        # exit request is the one that stopped the others. The process must exit as it
        # asks, so it goes on alone, even past an error that came before it.
        asked = exit_request(group)
        if asked is None:
            raise
        raise asked from group


def _check_configs(placed: Sequence[tuple[Backend, object]]) -> None:
    """Every problem of every config at once, as one ConfigError (configs are read as
    plain objects: they often come from untyped settings)."""
    if not placed:
        raise ConfigError(["no worker config given: run_workers needs at least one"])
    problems: list[str] = []
    seen: set[object] = set()
    for backend, config in placed:
        found = problems_of(config)
        if not isinstance(config, WorkerConfig):
            problems.extend(found)
            continue
        queue: object = config.queue
        problems.extend(f"queue {queue!r}: {problem}" for problem in found)
        if config.transactional and not backend.supports_transactions:
            problems.append(
                f"queue {queue!r}: transactional mode needs a backend with transactions, "
                f"not {type(backend).__name__}"
            )
        if isinstance(queue, str):
            if queue in seen:
                problems.append(f"queue {queue!r} is given twice: one pool per queue")
            seen.add(queue)
    if problems:
        raise ConfigError(problems)


def _resources_manager(resources: object) -> AbstractAsyncContextManager[Any] | None:
    """``resources`` as the context manager to enter (calling a factory for it), or None.

    Raises:
        ConfigError: ``resources`` is neither an async context manager nor a function
            returning one.
    """
    if resources is None or _is_async_context_manager(resources):
        return resources  # type: ignore[return-value]  # checked just above
    if callable(resources):
        made = resources()
        if _is_async_context_manager(made):
            return made  # type: ignore[no-any-return]
        raise ConfigError(
            [
                "resources must be an async context manager or a function returning one; "
                f"calling it returned {type(made).__name__}"
            ]
        )
    raise ConfigError(
        [
            "resources must be an async context manager or a function returning one, "
            f"not {type(resources).__name__}"
        ]
    )


def _is_async_context_manager(value: object) -> bool:
    return hasattr(value, "__aenter__") and hasattr(value, "__aexit__")
