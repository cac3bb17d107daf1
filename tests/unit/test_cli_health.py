"""The worker's health checks (trioqueue/cli/_health.py, docs/howto/deploy.rst).

The verdicts are functions of the state and a time, tested with a clock the test sets; the
tasks run under trio's MockClock on the memory backend (the clock the state reads is then
trio's own). One test serves the checks over a real socket, as the worker does.
"""

from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import pytest
import trio

import trioqueue
from trioqueue.cli import _health
from trioqueue.cli._commands import main
from trioqueue.cli._health import RegistryRead, WorkerHealth, liveness, pool_states, readiness
from trioqueue.metrics import serve_metrics

NOW = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
HOST, PID = socket.gethostname(), os.getpid()


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def worker(
    queue: str, *, stale: bool = False, host: str = HOST, pid: int = PID
) -> trioqueue.WorkerInfo:
    return trioqueue.WorkerInfo(
        worker_id=f"{host}:{pid}:{queue}",
        host=host,
        pid=pid,
        queue=queue,
        concurrency=1,
        in_flight=0,
        abandoned_renewals=0,
        last_beat_at=NOW,
        started_at=NOW,
        stale=stale,
    )


def started(clock: Clock, **pools: _health.PoolState) -> WorkerHealth:
    """A health whose pools have started and whose registry read just answered ``pools``."""
    health = WorkerHealth(list(pools), clock)
    health.started = True
    health.read = RegistryRead(clock(), answered=True, pools=pools)
    return health


# -- the verdicts ---------------------------------------------------------------------------


def test_a_started_process_whose_pools_beat_is_live_and_ready() -> None:
    clock = Clock()
    health = started(clock, emails="registered", reports="registered")
    assert liveness(health, clock()).checks == {
        "event_loop": "responsive",
        "guards": {"emails": "beating", "reports": "beating"},
    }
    assert readiness(health, clock()).ok
    status, body = health.readyz()
    assert status == 200
    assert json.loads(body)["status"] == "ok"


def test_a_loop_that_stopped_ticking_is_neither_live_nor_ready() -> None:
    clock = Clock()
    health = started(clock, q="registered")
    clock.now += _health.LOOP_STALE  # exactly at the bound: still responsive
    assert liveness(health, clock()).ok
    clock.now += 1.0
    health.read = RegistryRead(clock(), answered=True, pools={"q": "registered"})
    verdict = liveness(health, clock())
    assert not verdict.ok
    assert verdict.checks["event_loop"] == "blocked for 11s"
    assert not readiness(health, clock()).ok
    assert health.livez()[0] == 503


@pytest.mark.parametrize("state", ["stale", "missing"])
def test_a_pool_not_beating_while_the_database_answers_is_not_live(
    state: _health.PoolState,
) -> None:
    clock = Clock()
    health = started(clock, emails="registered", reports=state)
    verdict = liveness(health, clock())
    assert not verdict.ok
    assert verdict.checks["guards"] == {"emails": "beating", "reports": "not beating"}
    assert readiness(health, clock()).checks["pools"] == {
        "emails": "registered",
        "reports": state,
    }


def test_an_unreachable_database_fails_readiness_only() -> None:
    """The registry cannot tell whether a guard beats: restarting would not help."""
    clock = Clock()
    health = started(clock, q="stale")
    health.read = RegistryRead(clock(), answered=False)
    live, ready = liveness(health, clock()), readiness(health, clock())
    assert live.ok and live.checks["guards"] == {"q": "unknown"}
    assert not ready.ok
    assert ready.checks["database"] == "unreachable"


def test_an_old_registry_read_says_nothing() -> None:
    clock = Clock()
    health = started(clock, q="stale")
    clock.now += _health.READ_STALE + 1
    health.ticked_at = clock()
    assert liveness(health, clock()).ok  # a stale pool, but read too long ago to judge
    assert readiness(health, clock()).checks["database"] == "unreachable"


def test_pools_still_starting_are_live_but_not_ready() -> None:
    clock = Clock()
    health = WorkerHealth(["q"], clock)
    health.read = RegistryRead(clock(), answered=True, pools={"q": "missing"})
    assert liveness(health, clock()).checks["guards"] == {"q": "unknown"}
    ready = readiness(health, clock())
    assert not ready.ok and ready.checks["pools"] == {"q": "starting"}


def test_a_read_sent_before_the_pools_started_does_not_judge_them() -> None:
    """It finds them missing, as they were: not a guard that stopped beating."""
    clock = Clock()
    health = started(clock, q="missing")
    health.read = RegistryRead(clock(), answered=True, pools={"q": "missing"}, after_start=False)
    assert liveness(health, clock()).checks["guards"] == {"q": "unknown"}
    assert liveness(health, clock()).ok
    ready = readiness(health, clock())
    assert not ready.ok and ready.checks["pools"] == {"q": "starting"}


async def test_a_process_shutting_down_is_live_but_not_ready(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The tasks stop with the pools; the shutdown's grace is not a hang."""
    health = WorkerHealth(["q"], trio.current_time)
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        await nursery.start(_health.watch_health, health, backend)
        nursery.cancel_scope.cancel()  # as the first signal cancels serve_worker
    assert health.stopping
    await trio.sleep(10 * _health.LOOP_STALE)  # no tick since: not taken for a blocked loop
    assert health.livez()[0] == 200
    ready = readiness(health, trio.current_time())
    assert not ready.ok and ready.checks["pools"] == {"q": "stopping"}


def test_pool_states_count_only_this_process() -> None:
    workers = [
        worker("a"),
        worker("b", stale=True),
        worker("c", pid=PID + 1),  # another process on this host
        worker("d", host=HOST + "-other"),
        worker("e", stale=True),
        worker("e"),  # restarted: a live row beside its stale one
    ]
    assert pool_states(workers, ["a", "b", "c", "d", "e"], HOST, PID) == {
        "a": "registered",
        "b": "stale",
        "c": "missing",
        "d": "missing",
        "e": "registered",
    }


# -- the tasks, on the memory backend ---------------------------------------------------------


async def _noop(payload: object, ctx: trioqueue.JobContext) -> None:
    pass


async def test_a_running_pool_is_ready_and_live(autojump_clock: trio.abc.Clock) -> None:
    health = WorkerHealth(["q"], trio.current_time)
    config = trioqueue.WorkerConfig(handler=_noop, queue="q")
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        await nursery.start(_health.watch_health, health, backend)
        assert not readiness(health, trio.current_time()).ok  # not started yet

        async def run(*, task_status: trio.TaskStatus[None]) -> None:
            status = _health.StartedTo(health, task_status)
            await trioqueue.run_workers(backend, [config], task_status=status)

        await nursery.start(run)
        assert health.started
        await trio.sleep(0.5)  # the registry is read again as soon as the pools start
        assert readiness(health, trio.current_time()).ok
        assert liveness(health, trio.current_time()).checks["guards"] == {"q": "beating"}
        nursery.cancel_scope.cancel()


class FailingRegistry:
    async def list_workers(self) -> list[trioqueue.WorkerInfo]:
        raise trioqueue.BackendError("the database is down")


class SilentRegistry:
    async def list_workers(self) -> list[trioqueue.WorkerInfo]:
        await trio.sleep_forever()
        raise AssertionError("unreachable")


@pytest.mark.parametrize("registry", [FailingRegistry(), SilentRegistry()])
async def test_a_read_that_fails_or_hangs_is_not_answered(
    autojump_clock: trio.abc.Clock, registry: _health.Registry
) -> None:
    health = WorkerHealth(["q"], trio.current_time)
    await _health.read_once(health, registry)
    assert health.read is not None and not health.read.answered


async def test_the_liveness_file_is_touched_only_while_live(
    autojump_clock: trio.abc.Clock, tmp_path: Path
) -> None:
    path = tmp_path / "live"
    health = WorkerHealth(["q"], trio.current_time)
    health.started = True
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_health.tick, health)
        nursery.start_soon(_health.touch_while_live, health, path)
        await trio.sleep(1)
        assert path.exists()
        path.unlink()
        # The registry now reads the pool stale while the database answers: not live.
        health.read = RegistryRead(trio.current_time(), answered=True, pools={"q": "stale"})
        await trio.sleep(3 * _health.TOUCH_INTERVAL)
        assert not path.exists()
        health.read = RegistryRead(trio.current_time(), answered=True, pools={"q": "registered"})
        await trio.sleep(_health.TOUCH_INTERVAL)
        assert path.exists()
        nursery.cancel_scope.cancel()


async def test_a_liveness_file_that_cannot_be_touched_is_logged_once(
    autojump_clock: trio.abc.Clock, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "no such directory" / "live"
    health = WorkerHealth(["q"], trio.current_time)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_health.touch_while_live, health, path)
        await trio.sleep(3 * _health.TOUCH_INTERVAL)
        nursery.cancel_scope.cancel()
    assert [r.message.split(":")[0] for r in caplog.records] == [
        f"cannot touch the liveness file {path}"
    ]


# -- over HTTP, beside /metrics ---------------------------------------------------------------


def _get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.headers["Content-Type"], answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read().decode()


async def test_the_checks_are_served_beside_the_metrics() -> None:
    """A real socket: the server's thread answers from the state the trio tasks keep."""
    clock = Clock()
    health = started(clock, q="registered")
    health.read = RegistryRead(clock(), answered=False)
    routes = {"/livez": health.livez, "/readyz": health.readyz}
    async with (
        trioqueue.open_memory() as backend,
        serve_metrics(backend, port=0, interval=3600, routes=routes) as served,
    ):
        base = f"http://127.0.0.1:{served.port}"
        live = await trio.to_thread.run_sync(_get, base + "/livez")
        ready = await trio.to_thread.run_sync(_get, base + "/readyz")
        metrics = await trio.to_thread.run_sync(_get, base + "/metrics")
    assert live[:2] == (200, "application/json")
    assert json.loads(live[2]) == {
        "status": "ok",
        "checks": {"event_loop": "responsive", "guards": {"q": "unknown"}},
    }
    assert ready[0] == 503
    assert json.loads(ready[2])["checks"]["database"] == "unreachable"
    assert metrics[0] == 200 and "trioqueue_jobs" in metrics[2]


# -- the worker's options -------------------------------------------------------------------


async def _handler(payload: object, ctx: trioqueue.JobContext) -> None:
    pass


def test_worker_passes_the_liveness_file_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    given: dict[str, object] = {}

    async def serve_worker(
        dsn: str, schema: str, configs: object, *, task_status: trio.TaskStatus[None], **kw: object
    ) -> None:
        given.update(kw)
        task_status.started()

    monkeypatch.setattr("trioqueue.cli._commands.worker.serve_worker", serve_worker)
    argv = ["--dsn", "postgresql://x@127.0.0.1:1/x", "worker", f"{__name__}:_handler"]
    assert main([*argv, "--queue", "q", "--liveness-file", str(tmp_path / "live")]) == 0
    assert given["liveness_file"] == tmp_path / "live"
    given.clear()
    assert main([*argv, "--queue", "q"]) == 0
    assert "liveness_file" not in given  # not given: stand-ins need not know it
