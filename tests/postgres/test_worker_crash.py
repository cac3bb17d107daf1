"""A job that kills its worker process, beside an innocent one (docs/protocol.rst §13, I14).

The test plays a supervisor (systemd, Kubernetes): it runs ``trioqueue worker`` as a
process, and starts it again each time it dies. The app's one handler calls ``os._exit(1)``
for the poison job, once the innocent job's handler is running beside it (or after a
second, when it runs alone). Without quarantine both jobs would lose an attempt on every
crash until both ended ``failed``; with it, the third claim runs the poison job alone, its
crash then takes nothing else down, the next claim parks it, and the innocent job, run
alone too, succeeds. Each ``last_error`` says what happened.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import trio

import trioqueue
from trioqueue._backends.postgres import open_postgres
from trioqueue.testing._conformance.crashes import parked, runs_alone

ROOT = Path(__file__).resolve().parents[2]
Q = "crash"

APP = textwrap.dedent(
    """
    import os
    from pathlib import Path

    import trio

    MARKS = Path(os.environ["CRASH_MARKS"])


    async def handle(payload, ctx):
        if payload == "innocent":
            (MARKS / f"innocent-{ctx.attempt}").touch()  # running now
            await trio.sleep(1)
            return
        # The poison job: once the innocent job's handler of the same round runs beside it
        # (at most a second: it may run alone), the process dies without a word.
        with trio.move_on_after(1):
            while not (MARKS / f"innocent-{ctx.attempt}").exists():
                await trio.sleep(0.01)
        os._exit(1)
    """
)

#: Short leases, so that a dead worker's jobs are claimable again within a second.
WORKER_OPTIONS = [
    *("--queue", Q, "--concurrency", "2", "--visibility-timeout", "1"),
    *("--heartbeat-interval", "0.3", "--poll-interval", "0.1", "--shutdown-grace", "1"),
    *("--schedule-interval", "off"),
]


def _jobs(dsn: str, schema: str) -> dict[int, trioqueue.JobInfo]:
    async def read() -> dict[int, trioqueue.JobInfo]:
        async with open_postgres(dsn, schema=schema) as backend:
            return {info.id: info for info in await backend.list_jobs(Q)}

    return trio.run(read)


def _setup(dsn: str, schema: str) -> tuple[int, int]:
    async def setup() -> tuple[int, int]:
        async with open_postgres(dsn, schema=schema) as backend:
            await backend.migrate()
            poison = await backend.enqueue(Q, "poison")
            innocent = await backend.enqueue(Q, "innocent")
            return poison, innocent

    return trio.run(setup)


def _run_worker(argv: list[str], env: dict[str, str], cwd: Path, dsn: str, schema: str) -> int:
    """One life of the worker: until it dies (its exit code), or until both jobs have
    finished (30 s at most), when it is stopped with SIGTERM (then ``-SIGTERM`` for a
    worker that did not stop, else its exit code after a graceful stop, 0)."""
    with subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    ) as worker:
        try:
            deadline = time.monotonic() + 30
            while worker.poll() is None and time.monotonic() < deadline:
                jobs = _jobs(dsn, schema)
                if {j.status for j in jobs.values()} <= {"succeeded", "failed"}:
                    worker.send_signal(signal.SIGTERM)
                    _, err = worker.communicate(timeout=30)
                    assert worker.returncode == 0, err
                    return 0
                time.sleep(0.05)  # another process's progress, read from the database
            assert worker.poll() is not None, "the worker neither died nor finished in 30 s"
            return worker.returncode
        finally:
            worker.kill()


def test_I14_a_worker_killed_by_one_job_spares_its_neighbour_and_parks_the_job(
    postgres_dsn: str, postgres_schema: str, tmp_path: Path
) -> None:
    (tmp_path / "crashapp.py").write_text(APP, encoding="utf-8")
    marks = tmp_path / "marks"
    marks.mkdir()
    poison, innocent = _setup(postgres_dsn, postgres_schema)
    argv = [
        sys.executable, "-m", "trioqueue", "--dsn", postgres_dsn, "--schema", postgres_schema,
        "worker", "crashapp:handle", *WORKER_OPTIONS,
    ]  # fmt: skip
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)]),
        "CRASH_MARKS": str(marks),
    }
    lives = []
    for _ in range(6):  # the supervisor: start it again while it dies
        lives.append(_run_worker(argv, env, tmp_path, postgres_dsn, postgres_schema))
        if lives[-1] == 0:
            break
    # Two crashes with both jobs in flight, one with the poison job alone; then a worker
    # that parks it, runs the innocent job alone, and stops when told to.
    assert lives == [1, 1, 1, 0]
    assert sorted(p.name for p in marks.glob("innocent-*")) == [f"innocent-{n}" for n in (1, 2, 3)]
    jobs = _jobs(postgres_dsn, postgres_schema)
    assert (jobs[poison].status, jobs[poison].attempts) == ("failed", 3)
    assert jobs[poison].last_error == parked(1, 3)
    assert (jobs[innocent].status, jobs[innocent].attempts) == ("succeeded", 3)
    assert jobs[innocent].last_error == runs_alone(1, 2)
