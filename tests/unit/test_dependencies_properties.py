"""Property test of dependencies (docs/protocol.rst §21, I23 and I24): random DAGs run by
whole worker pools on the memory backend, under faults.

Each example enqueues a random DAG (each job depending on a random set of earlier ones,
with a random policy), runs two pools on it under a ``MockClock``, and injects faults:
renewals that hang (leases lapse and are taken over), acks and failures whose answers are
lost after they applied (``after=True``), claims that fail, and one pool killed mid-run
(its scope cancelled while it holds work). Then, with every fault lifted:

- no handler of a job starts before every one of its dependencies has succeeded (I23);
- every job ends (nothing lost, nothing waits for ever); a job ends ``succeeded`` only if
  every dependency did, and a job none of whose attempts ran fails naming a failed
  dependency, by its policy (I24).
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial
from typing import Any

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trioqueue
from tests._pool_harness import Recorder, config, finish_all, inject_faults
from trioqueue import testing as faults

BASE = datetime(2026, 1, 1, tzinfo=UTC)  # what trio's clock stands for when the backend opens
HEAL_AT = 120.0  # every fault is lifted then, so every job must finish
GIVE_UP = 5000.0  # fake seconds; an example that needs longer has lost a job
FAULT_OPS = ("claim", "renew", "ack", "fail")


def fault(op: str) -> st.SearchStrategy[object]:
    times = st.integers(1, 3)
    if op == "renew":  # a renewal that hangs: the lease lapses and is taken over
        return st.builds(faults.hang, seconds=st.sampled_from([30.0]), times=times)
    if op in ("ack", "fail"):  # the write applied, its answer lost
        return st.one_of(
            st.builds(faults.error, times=times),
            st.builds(faults.delay, st.just(1.0), after=st.just(True), times=times),
            st.builds(faults.hang, seconds=st.just(20.0), after=st.just(True), times=times),
        )
    return st.builds(faults.error, times=times)


@st.composite
def graphs(draw: st.DrawFn) -> dict[str, Any]:
    size = draw(st.integers(1, 9))
    jobs = []
    for n in range(size):
        jobs.append(
            {
                "depends_on": sorted(draw(st.sets(st.integers(0, n - 1), max_size=3))) if n else [],
                "policy": draw(st.sampled_from(["fail", "cancel"])),
                "sleep": draw(st.sampled_from([0, 1, 5, 25])),
                "fail_attempts": draw(st.sampled_from([0, 0, 1, 2])),
            }
        )
    injections = []
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(FAULT_OPS))
        injections.append((draw(st.floats(0, 60)), op, draw(fault(op))))
    return {
        "jobs": jobs,
        "max_attempts": draw(st.integers(1, 3)),
        "injections": sorted(injections, key=lambda i: i[0]),
        "kill_at": draw(st.none() | st.floats(0, 60)),
        "concurrency": draw(st.integers(1, 3)),
    }


def run_graph(graph: dict[str, Any]) -> tuple[Recorder, list[int], dict[int, Any], float]:
    rec = Recorder()
    ids: list[int] = []
    finals: dict[int, Any] = {}
    anchor: list[float] = []

    async def doomed_pool(backend: trioqueue.MemoryBackend, cfg: trioqueue.WorkerConfig) -> None:
        # A worker killed mid-run: its scope is cancelled, whatever it holds (its leases
        # then lapse, or its shutdown writes what it can).
        with trio.move_on_at(graph["kill_at"]):
            await trioqueue.run_worker_pool(backend, cfg)

    async def main() -> None:
        anchor.append(trio.current_time())
        async with trioqueue.open_memory(now=BASE) as backend, trio.open_nursery() as nursery:
            for job in graph["jobs"]:
                ids.append(
                    await backend.enqueue(
                        "q",
                        {"sleep": job["sleep"], "fail_attempts": job["fail_attempts"]},
                        max_attempts=graph["max_attempts"],
                        depends_on=[ids[i] for i in job["depends_on"]],
                        on_dependency_failure=job["policy"],
                    )
                )
            cfg = config(
                rec,
                concurrency=graph["concurrency"],
                visibility_timeout=10,
                heartbeat_interval=2,
                backoff=trioqueue.ExponentialBackoff(initial=1, cap=8),
            )
            nursery.start_soon(
                partial(inject_faults, heal_at=HEAL_AT, ops=FAULT_OPS), backend, graph["injections"]
            )
            if graph["kill_at"] is not None:
                nursery.start_soon(doomed_pool, backend, cfg)
            await nursery.start(trioqueue.run_worker_pool, backend, cfg)
            finals.update(await finish_all(backend, ids, give_up=GIVE_UP, ops=FAULT_OPS))
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return rec, ids, finals, anchor[0]


def seconds(when: datetime | None, anchor: float) -> float:
    """A JobInfo time as trio's clock read it: the backend maps ``anchor`` to ``BASE``."""
    assert when is not None
    return anchor + (when - BASE).total_seconds()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_random_dags_under_faults(graph: dict[str, Any]) -> None:
    rec, ids, finals, anchor = run_graph(graph)
    # Nothing lost: every job ended once the faults were lifted.
    assert {info.status for info in finals.values()} <= {"succeeded", "failed"}, finals
    for n, job in enumerate(graph["jobs"]):
        job_id = ids[n]
        dependencies = [finals[ids[i]] for i in job["depends_on"]]
        # I23: no attempt of this job started before every dependency had succeeded.
        for started in rec.of("started", job_id):
            for dependency in dependencies:  # (datetimes hold microseconds)
                assert dependency.status == "succeeded", (n, job, dependency)
                assert seconds(dependency.finished_at, anchor) <= started.at + 1e-5, (n, started)
        info = finals[job_id]
        if info.status == "succeeded":
            assert all(d.status == "succeeded" for d in dependencies), (n, info)
        # I24: a dependency that failed reached this job, by its policy, and it never ran.
        if any(d.status == "failed" for d in dependencies):
            assert info.status == "failed" and info.attempts == 0, (n, info)
            assert rec.of("started", job_id) == []
            assert info.cancelled == (job["policy"] == "cancel"), (n, info)
            failed = {d.id for d in dependencies if d.status == "failed"}
            named = int(info.last_error.split("dependency ")[1].split(" ")[0])
            assert named in failed, (n, info.last_error, failed)
