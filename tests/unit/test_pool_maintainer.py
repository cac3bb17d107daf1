"""The maintainer in the worker pools (trioqueue/_runtime/maintainer.py, docs/protocol.rst
§15): one pool per store is elected and renews its lease, gives it up on a graceful stop,
is stopped by its fence when renewals fail, and prunes. Memory backend, MockClock: times
are exact."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio
import trio.testing

import trioqueue
from trioqueue import PoolObserver
from trioqueue._runtime.config import check
from trioqueue.testing import error, hang

V, H, M = 6.0, 2.0, 10.0


async def _noop(payload: Any, ctx: trioqueue.JobContext) -> None:
    pass


def _config(**options: Any) -> trioqueue.WorkerConfig:
    values: dict[str, Any] = {
        "handler": _noop,
        "queue": "q",
        "visibility_timeout": V,
        "heartbeat_interval": H,
        "maintenance_interval": M,
        "schedule_interval": None,
        "poll_interval": 1.0,
        "shutdown_grace": 1.0,
    }
    return trioqueue.WorkerConfig(**(values | options))


@dataclass
class Pass:
    at: float
    result: str
    deleted: dict[tuple[str, str], int]
    audit_deleted: int
    oldest_finished_age: float | None


@dataclass
class Watcher(PoolObserver):
    """Records which pools hold the lease (checking that no two ever do) and the passes.
    Watchers given one ``holding`` set check it across their pools."""

    holding: set[str] = field(default_factory=set)
    changes: list[tuple[float, str, bool]] = field(default_factory=list)
    passes: list[Pass] = field(default_factory=list)
    changed: trio.Event = field(default_factory=trio.Event)

    def maintainer_changed(self, worker_id: str, holding: bool) -> None:
        if holding:
            assert not self.holding, f"{worker_id} holds the lease beside {self.holding}"
            self.holding.add(worker_id)
        else:
            self.holding.discard(worker_id)
        self.changes.append((trio.current_time(), worker_id, holding))
        self._signal()

    def maintenance_pass(
        self,
        result: str,
        deleted: Mapping[tuple[str, str], int],
        audit_deleted: int,
        oldest_finished_age: float | None,
        seconds: float,
    ) -> None:
        self.passes.append(
            Pass(trio.current_time(), result, dict(deleted), audit_deleted, oldest_finished_age)
        )
        self._signal()

    def _signal(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    async def until(self, condition: Any) -> None:
        while not condition():
            await self.changed.wait()


async def test_two_pools_elect_one_maintainer_which_keeps_its_lease(
    autojump_clock: object,
) -> None:
    watcher = Watcher()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        for _ in range(2):
            await nursery.start(
                lambda task_status: trioqueue.run_worker_pool(
                    backend, _config(), observer=watcher, task_status=task_status
                )
            )
        await watcher.until(lambda: watcher.holding)
        elected = trio.current_time()
        first = await backend.maintainer()
        assert first is not None and {first.holder} == watcher.holding
        await trio.sleep(10 * V)
        later = await backend.maintainer()
        nursery.cancel_scope.cancel()
    assert later is not None
    assert (later.holder, later.seq) == (first.holder, first.seq)  # renewed, never re-taken
    assert later.expires_at > first.expires_at
    assert [(holder, holding) for _, holder, holding in watcher.changes][:1] == [
        (first.holder, True)
    ]
    assert elected == 0.0  # the first candidate found the lease free at once
    # A pass at once, then one every maintenance_interval while it holds the lease.
    assert [p.at for p in watcher.passes] == [M * k for k in range(len(watcher.passes))]
    assert len(watcher.passes) == 7


async def test_a_graceful_stop_releases_the_lease_and_another_pool_takes_over_within_h(
    autojump_clock: object,
) -> None:
    holders: set[str] = set()  # shared: no two pools ever hold the lease at once
    watchers = [Watcher(holders), Watcher(holders)]
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        scopes = [trio.CancelScope(), trio.CancelScope()]
        for scope, watcher in zip(scopes, watchers, strict=True):

            async def pool(
                scope: trio.CancelScope = scope, watcher: Watcher = watcher, *, task_status: Any
            ) -> None:
                with scope:
                    await trioqueue.run_worker_pool(
                        backend, _config(), observer=watcher, task_status=task_status
                    )

            await nursery.start(pool)
        await watchers[0].until(lambda: holders)
        first = await backend.maintainer()
        assert first is not None
        await trio.sleep(3.3)  # well inside a lease: a takeover below is no expiry
        index = 0 if watchers[0].changes else 1
        holder, other = watchers[index], watchers[1 - index]
        scopes[index].cancel()
        stopped = trio.current_time()
        await other.until(lambda: other.changes)
        taken = trio.current_time()
        second = await backend.maintainer()
        nursery.cancel_scope.cancel()
    assert second is not None and second.holder != first.holder
    assert second.seq == first.seq + 1
    assert taken - stopped <= H  # the next claim, not the lease running out (V)
    assert [(h, on) for _, h, on in holder.changes] == [(first.holder, True), (first.holder, False)]
    assert holder.changes[1][0] - stopped <= 1.0  # released within the shutdown grace


async def test_the_fence_cuts_a_wedged_batch_when_renewals_fail(
    autojump_clock: object, caplog: pytest.LogCaptureFixture
) -> None:
    """A batch stuck in the store while every renewal fails: the batch is cancelled at
    the fence (claim sent + V), with no database answer, and the pass is reported cut."""
    watcher = Watcher()
    caplog.set_level(logging.INFO, "trioqueue.maintainer")
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        backend.inject("prune_retained", hang())
        backend.inject("renew_maintainer", error())
        await nursery.start(
            lambda task_status: trioqueue.run_worker_pool(
                backend, _config(), observer=watcher, task_status=task_status
            )
        )
        await watcher.until(lambda: watcher.passes)
        nursery.cancel_scope.cancel()
    (cut,) = watcher.passes
    assert cut.result == "cut"
    assert cut.at == V  # the claim went out at 0.0
    assert [holding for _, _, holding in watcher.changes[:2]] == [True, False]
    assert watcher.changes[1][0] == V
    messages = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert any(
        level == logging.WARNING and text.startswith("maintenance pass cut short")
        for level, text in messages
    ), messages
    assert any("is no longer the maintainer" in text for _, text in messages)


async def test_a_refused_renewal_cancels_the_batch_at_once(autojump_clock: object) -> None:
    """Another holder took the lease over (here: the row is rewritten as if this pool's
    lease had run out and another claimed it): the next renewal answers False, and the
    wedged batch stops then, not at the fence."""
    watcher = Watcher()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        backend.inject("prune_retained", hang())
        await nursery.start(
            lambda task_status: trioqueue.run_worker_pool(
                backend, _config(), observer=watcher, task_status=task_status
            )
        )
        await watcher.until(lambda: watcher.holding)
        info = await backend.maintainer()
        assert info is not None
        # Another pool's release-and-claim, as the store sees it (fenced by the seq).
        assert await backend.release_maintainer(info.holder, info.seq)
        assert await backend.claim_maintainer("someone-else", 60.0) == info.seq + 1
        await watcher.until(lambda: watcher.passes)
        nursery.cancel_scope.cancel()
    (cut,) = watcher.passes
    assert cut.result == "cut"
    assert cut.at == H  # the first renewal after the takeover
    assert watcher.changes[-1][1:] == (info.holder, False)


async def test_a_batch_stuck_while_renewals_pass_fails_after_one_lease_and_is_retried(
    autojump_clock: object,
) -> None:
    watcher = Watcher()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        backend.inject("prune_retained", hang(times=1))
        await nursery.start(
            lambda task_status: trioqueue.run_worker_pool(
                backend, _config(), observer=watcher, task_status=task_status
            )
        )
        await watcher.until(lambda: len(watcher.passes) >= 2)
        changes = list(watcher.changes)
        nursery.cancel_scope.cancel()
    assert [(p.at, p.result) for p in watcher.passes] == [(V, "failed"), (M, "complete")]
    assert [holding for _, _, holding in changes] == [True]  # the lease held throughout


async def test_database_errors_are_retried_and_never_stop_the_pool(
    autojump_clock: object,
) -> None:
    watcher = Watcher()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        backend.inject("claim_maintainer", error(times=3))
        backend.inject("prune_retained", error(times=1))
        await nursery.start(
            lambda task_status: trioqueue.run_worker_pool(
                backend, _config(), observer=watcher, task_status=task_status
            )
        )
        job_id = await backend.enqueue("q", {})
        await watcher.until(lambda: len(watcher.passes) >= 2)
        done = await backend.get_job(job_id)
        nursery.cancel_scope.cancel()
    assert watcher.changes[0][0] == 3 * H  # the fourth claim, one cadence apart
    assert [p.result for p in watcher.passes] == ["failed", "complete"]
    assert watcher.passes[1].at - watcher.passes[0].at == M
    assert done.status == "succeeded"  # the pool ran on


async def test_the_maintainer_prunes_finished_jobs_past_their_policy(
    autojump_clock: object,
) -> None:
    watcher = Watcher()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        await backend.set_retention("q", succeeded=5.0, failed=None)
        ids = await backend.enqueue_many("q", [{}] * 3)
        await nursery.start(
            lambda task_status: trioqueue.run_worker_pool(
                backend, _config(), observer=watcher, task_status=task_status
            )
        )
        await watcher.until(lambda: len(watcher.passes) >= 2)
        left = await backend.get_jobs(ids, preview=0)
        nursery.cancel_scope.cancel()
    first, second = watcher.passes[:2]
    assert first.deleted == {}  # at 0.0 the jobs had just finished
    assert first.oldest_finished_age is not None and first.oldest_finished_age < 5.0
    assert second.deleted == {("q", "succeeded"): 3}
    assert second.oldest_finished_age == 0.0  # none kept
    assert left == {}


async def test_a_pool_without_a_maintenance_interval_takes_no_part(
    autojump_clock: object,
) -> None:
    watcher = Watcher()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        await nursery.start(
            lambda task_status: trioqueue.run_worker_pool(
                backend,
                _config(maintenance_interval=None),
                observer=watcher,
                task_status=task_status,
            )
        )
        await trio.sleep(3 * V)
        calls = backend.statistics()["calls"]
        info = await backend.maintainer()
        nursery.cancel_scope.cancel()
    assert info is None
    assert calls["claim_maintainer"] == calls["prune_retained"] == 0
    assert watcher.changes == [] and watcher.passes == []


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "maintenance_interval"),
        (-1.0, "maintenance_interval"),
        ("60", "maintenance_interval"),
        (float("nan"), "maintenance_interval"),
    ],
)
def test_a_bad_maintenance_interval_is_listed_with_the_other_problems(
    value: object, message: str
) -> None:
    config = _config(maintenance_interval=value, concurrency=0)
    with pytest.raises(trioqueue.ConfigError) as raised:
        check(config)
    text = str(raised.value)
    assert message in text and "concurrency" in text


async def test_the_metrics_and_the_log_line_of_each_pass(
    autojump_clock: object, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/metrics.rst and docs/howto/retention.rst, "What to watch"."""
    from trioqueue.metrics import PrometheusObserver

    observer = PrometheusObserver(process=False)

    def sample(name: str, **labels: str) -> float | None:
        return observer.registry.get_sample_value(name, labels)

    caplog.set_level(logging.INFO, "trioqueue.maintainer")
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        await backend.set_retention("q", succeeded=5.0, failed=5.0)
        await backend.enqueue_many("q", [{}] * 3)
        await nursery.start(
            lambda task_status: trioqueue.run_worker_pool(
                backend, _config(), observer=observer, task_status=task_status
            )
        )
        assert sample("trioqueue_oldest_finished_age_seconds") != 0.0  # NaN: no pass yet
        await trio.sleep(M + 1)  # the pass at 0 (nothing old enough), the one at M
        info = await backend.maintainer()
        assert info is not None
        holding = sample("trioqueue_maintainer", worker_id=info.holder)
        nursery.cancel_scope.cancel()
    assert holding == 1.0
    assert sample("trioqueue_maintainer", worker_id=info.holder) is None  # the pool stopped
    assert sample("trioqueue_pruned_jobs_total", queue="q", status="succeeded") == 3.0
    assert sample("trioqueue_pruned_audit_entries_total") == 0.0
    assert sample("trioqueue_maintenance_passes_total", result="complete") == 2.0
    assert sample("trioqueue_maintenance_passes_total", result="cut") == 0.0
    assert sample("trioqueue_oldest_finished_age_seconds") == 0.0  # none kept
    pruned = [r for r in caplog.records if getattr(r, "event", None) == "pruned"]
    assert [r.levelno for r in pruned] == [logging.INFO, logging.INFO]
    assert (
        pruned[1]
        .getMessage()
        .startswith("pruned 3 jobs ('q' succeeded 3) and 0 audit entries in 1 batches, ")
    )
    assert pruned[1].getMessage().endswith("; oldest finished job: 0s")
    assert getattr(pruned[1], "queue", None) == "q"
    events = [getattr(r, "event", None) for r in caplog.records if r.name == "trioqueue.maintainer"]
    assert events == ["maintainer", "pruned", "pruned", "maintainer_released"]
