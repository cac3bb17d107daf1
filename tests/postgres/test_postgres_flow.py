"""Flow control on PostgreSQL across processes: limits and groups hold for every pool at once.

The conformance suite checks the claim statement from one backend; here several processes,
each running one worker pool, drain a queue together, and the handlers' own records (job id,
start and end on the wall clock, written by each process to its own file) show what ran
when. A handler runs inside its job's lease (claimed before it starts, acked after it ends),
so what the claim counts (live leases, claims per second, a group's running job) bounds what
the records show.

Real time, a real server. The parent waits for conditions (jobs finished, bounded by a
deadline), and only the rate test runs for a fixed time, since that is what it measures.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
import trio

import trioqueue
from trioqueue._backends.postgres import PostgresBackend

from .._postgres_harness import read_until, wait_until_finished

pytestmark = pytest.mark.postgres

Q = "flow"
PROCESSES = 3

#: One child process: one worker pool on Q. Its handler sleeps ``payload["sleep"]`` seconds
#: and appends ``job_id start end tag`` (time.time()) to the file named on the command line.
CHILD = textwrap.dedent(
    """
    import sys
    import time

    import trio

    import trioqueue

    async def main():
        dsn, schema, queue, out, concurrency, poll = sys.argv[1:7]
        with open(out, "a") as records:

            async def handler(payload, ctx):
                start = time.time()
                await trio.sleep(payload["sleep"])
                end = time.time()
                records.write(f"{ctx.job_id} {start!r} {end!r} {payload['tag']}\\n")
                records.flush()

            async with trioqueue.open_postgres(dsn, schema=schema) as backend:
                config = trioqueue.WorkerConfig(
                    handler=handler,
                    queue=queue,
                    concurrency=int(concurrency),
                    batch_size=1,
                    poll_interval=float(poll),
                    visibility_timeout=30,
                    heartbeat_interval=10,
                    max_job_duration=20,
                    shutdown_grace=5,
                    schedule_interval=None,
                )
                print("ready", flush=True)
                await trio.to_thread.run_sync(sys.stdin.readline)  # "go"
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(trioqueue.run_worker_pool, backend, config)
                    # Stop when the parent closes stdin.
                    await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
                    nursery.cancel_scope.cancel()

    trio.run(main)
    """
)


@dataclass(frozen=True)
class Run:
    job_id: int
    start: float
    end: float
    tag: str


class Children:
    """PROCESSES child pools on Q of ``backend``'s schema, started together."""

    def __init__(self, backend: PostgresBackend, dsn: str, tmp_path: Path) -> None:
        self.backend = backend
        self.dsn = dsn
        self.tmp_path = tmp_path
        self.script = tmp_path / "child.py"
        self.script.write_text(CHILD)
        self.outputs = [tmp_path / f"records-{n}.txt" for n in range(PROCESSES)]
        # The children import the trioqueue this test imported, wherever that is.
        root = str(Path(trioqueue.__file__).parent.parent)
        self.env = {**os.environ, "PYTHONPATH": root}
        if os.environ.get("PYTHONPATH"):
            self.env["PYTHONPATH"] += os.pathsep + os.environ["PYTHONPATH"]

    async def run(
        self, nursery: trio.Nursery, *, concurrency: int, poll_interval: float
    ) -> list[trio.Process]:
        processes: list[trio.Process] = []
        for out in self.outputs:
            command = [
                sys.executable,
                str(self.script),
                self.dsn,
                self.backend.schema,
                Q,
                str(out),
                str(concurrency),
                str(poll_interval),
            ]
            process: trio.Process = await nursery.start(
                partial(
                    trio.run_process,
                    command,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    env=self.env,  # stderr: the test's own
                    check=False,
                )
            )
            processes.append(process)
        with trio.fail_after(60):
            for process in processes:
                assert process.stdout is not None
                await read_until(process.stdout, b"ready")
        for process in processes:  # as close to one instant as the pipes allow
            assert process.stdin is not None
            await process.stdin.send_all(b"go\n")
        return processes

    @staticmethod
    async def stop(processes: list[trio.Process]) -> None:
        for process in processes:
            assert process.stdin is not None
            await process.stdin.aclose()
        with trio.fail_after(60):
            for process in processes:
                assert await process.wait() == 0

    async def drain(self, ids: list[int], *, poll_interval: float) -> list[Run]:
        """Run the children until every job of ``ids`` has finished; each must have
        succeeded, and run once. The runs recorded, by start."""
        with trio.fail_after(120):
            async with trio.open_nursery() as nursery:
                processes = await self.run(nursery, concurrency=4, poll_interval=poll_interval)
                infos = await wait_until_finished(self.backend, ids, within=60)
                await self.stop(processes)
        assert {info.status for info in infos} == {"succeeded"}
        runs = self.records()
        assert sorted(run.job_id for run in runs) == sorted(ids)
        return runs

    def records(self) -> list[Run]:
        runs = []
        for out in self.outputs:
            if not out.exists():
                continue
            for line in out.read_text().splitlines():
                job_id, start, end, tag = line.split()
                runs.append(Run(int(job_id), float(start), float(end), tag))
        return sorted(runs, key=lambda run: run.start)


def most_at_once(runs: list[Run]) -> int:
    """The most intervals [start, end] open at one instant (a sweep; an end at the instant
    of a start counts as before it, since the ack comes before the next claim)."""
    events = sorted([(run.start, 1) for run in runs] + [(run.end, -1) for run in runs])
    # At equal times -1 sorts first: an end before a start.
    open_, most = 0, 0
    for _, step in events:
        open_ += step
        most = max(most, open_)
    return most


async def test_max_running_holds_across_processes(
    backend: PostgresBackend, postgres_dsn: str, tmp_path: Path
) -> None:
    """max_running=3 with 3 processes of 4 handlers each: never more than 3 handlers run at
    once, and 3 do run at once (the limit is reached, not merely never approached)."""
    await backend.set_queue_limits(Q, max_running=3)
    ids = await backend.enqueue_many(Q, [{"sleep": 0.05, "tag": "j"} for _ in range(40)])
    runs = await Children(backend, postgres_dsn, tmp_path).drain(ids, poll_interval=0.05)
    assert most_at_once(runs) == 3


async def test_max_per_second_holds_across_processes(
    backend: PostgresBackend, postgres_dsn: str, tmp_path: Path
) -> None:
    """max_per_second=20 for 10 s, 3 processes on 300 instant jobs: within any span of T
    seconds at most 20·T + 20 handlers start (the bucket holds one second's worth), and the
    total is near 200 + 20 (the pools keep claiming when the claim says to retry)."""
    rate, seconds = 20, 10.0
    await backend.set_queue_limits(Q, max_per_second=rate)
    await backend.enqueue_many(Q, [{"sleep": 0, "tag": "j"} for _ in range(300)])
    children = Children(backend, postgres_dsn, tmp_path)
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            processes = await children.run(nursery, concurrency=4, poll_interval=0.1)
            await trio.sleep(seconds)
            await children.stop(processes)
    starts = [run.start for run in children.records()]
    # Near 200 + 20 (the span also holds the children's start and stop): not idle.
    assert len(starts) >= 150
    # A handler starts a little after its claim (the statement's clock), by a different
    # delay in each process: up to `slack` seconds of that delay are allowed on each span
    # (4 starts; a rate 30% too high would be 60 over across the 10 s).
    slack = 0.2
    worst = max(
        (j - i + 1) - (rate * (starts[j] - starts[i] + slack) + rate)
        for i in range(len(starts))
        for j in range(i, len(starts))
    )
    assert worst <= 0, f"{worst:.2f} starts over the bound"


async def test_group_runs_in_order_one_at_a_time_across_processes(
    backend: PostgresBackend, postgres_dsn: str, tmp_path: Path
) -> None:
    """A group of 50 among 3 other groups and ungrouped jobs, 3 processes: the group's jobs
    start in enqueue order, each after the one before ended, while other jobs run alongside."""
    ids: list[int] = []
    watched: list[int] = []
    for n in range(50):  # interleaved, so the group's ids are not consecutive
        watched.append(await backend.enqueue(Q, {"sleep": 0.01, "tag": "g"}, group="watched"))
        ids.append(watched[-1])
        if n % 5 == 0:
            for other in ("a", "b", "c"):
                ids.append(
                    await backend.enqueue(Q, {"sleep": 0.01, "tag": other}, group=f"other-{other}")
                )
        if n % 2 == 0:
            ids.append(await backend.enqueue(Q, {"sleep": 0.02, "tag": "none"}))
    runs = await Children(backend, postgres_dsn, tmp_path).drain(ids, poll_interval=0.05)
    group = [run for run in runs if run.tag == "g"]  # by start
    assert [run.job_id for run in group] == watched
    for before, after in itertools.pairwise(group):
        assert after.start >= before.end, (before, after)
    others = [run for run in runs if run.tag != "g"]
    assert any(
        other.start < run.end and run.start < other.end for run in group for other in others
    ), "nothing else ran alongside the group"
