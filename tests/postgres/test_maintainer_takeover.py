"""Two ``trioqueue worker`` processes on one schema elect one maintainer; the maintainer is
killed with SIGKILL, and the other takes the lease over within a lease and a heartbeat,
then prunes what retention says (docs/protocol.rst §15, docs/howto/retention.rst).

Everything is judged by the database's lease row (``maintainer()``), polled with bounded
timeouts: no wall-clock sleep stands in for a takeover.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

import trio

from trioqueue._backends.postgres import open_postgres
from trioqueue._operator_types import MaintainerInfo
from trioqueue._types import Ack

ROOT = Path(__file__).resolve().parents[2]
Q = "work"
OLD = "history"  # finished jobs retention then prunes
V, H = 3.0, 0.5
#: A loaded machine's scheduling: the survivor's claim may go out this much late.
SLACK = 1.5

APP = textwrap.dedent(
    """
    async def handle(payload, ctx):
        pass
    """
)

WORKER_OPTIONS = [
    *("--queue", Q, "--visibility-timeout", str(V), "--heartbeat-interval", str(H)),
    *("--maintenance-interval", "0.5", "--poll-interval", "0.5", "--shutdown-grace", "1"),
    *("--schedule-interval", "off"),
]

T = TypeVar("T")


def _db(dsn: str, schema: str, work: Callable[..., object]) -> object:
    async def run() -> object:
        async with open_postgres(dsn, schema=schema) as backend:
            return await work(backend)  # type: ignore[misc]

    return trio.run(run)


def _lease(dsn: str, schema: str) -> MaintainerInfo | None:
    info = _db(dsn, schema, lambda backend: backend.maintainer())
    assert info is None or isinstance(info, MaintainerInfo)
    return info


def _poll(what: str, read: Callable[[], T], done: Callable[[T], bool], timeout: float) -> T:
    """``read()`` until ``done`` says so, at most ``timeout`` seconds (then fail)."""
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if done(value):
            return value
        assert time.monotonic() < deadline, f"{what}: not within {timeout}s (last: {value!r})"
        time.sleep(0.05)


def _setup(dsn: str, schema: str) -> list[int]:
    """Migrate, and leave finished jobs on ``OLD`` (kept: the default keeps them a week)."""

    async def setup(backend: object) -> list[int]:
        from trioqueue._backends.postgres import PostgresBackend

        assert isinstance(backend, PostgresBackend)
        await backend.migrate()
        ids = await backend.enqueue_many(OLD, [{}] * 20)
        claimed = await backend.claim(OLD, limit=20, worker_id="setup", visibility_timeout=60)
        await backend.ack([Ack(c.job.id, c.job.claim_seq) for c in claimed])
        return ids

    ids = _db(dsn, schema, setup)
    assert isinstance(ids, list)
    return ids


@contextmanager
def _workers(dsn: str, schema: str, cwd: Path, n: int) -> Iterator[list[subprocess.Popen[str]]]:
    argv = [
        sys.executable, "-m", "trioqueue", "--dsn", dsn, "--schema", schema,
        "worker", "maintapp:handle", "-v", *WORKER_OPTIONS,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(cwd)])}
    with ExitStack() as stack:
        workers = [
            stack.enter_context(
                subprocess.Popen(
                    argv,
                    cwd=cwd,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
            for _ in range(n)
        ]
        try:
            yield workers
        finally:
            for worker in workers:
                worker.kill()


def _pid(holder: str) -> int:
    """The process of a pool's worker_id, ``host:pid:suffix``."""
    return int(holder.rsplit(":", 2)[1])


def test_the_maintainer_killed_is_replaced_within_a_lease_and_the_new_one_prunes(
    postgres_dsn: str, postgres_schema: str, tmp_path: Path
) -> None:
    dsn, schema = postgres_dsn, postgres_schema
    (tmp_path / "maintapp.py").write_text(APP, encoding="utf-8")
    old_jobs = _setup(dsn, schema)
    with _workers(dsn, schema, tmp_path, 2) as workers:
        by_pid = {worker.pid: worker for worker in workers}
        first = _poll(
            "a maintainer elected", lambda: _lease(dsn, schema), lambda i: i is not None, 60
        )
        assert first is not None and _pid(first.holder) in by_pid
        # It renews: the lease's end moves on, under the same fence.
        renewed = _poll(
            "the lease renewed",
            lambda: _lease(dsn, schema),
            lambda i: i is not None and i.expires_at > first.expires_at,
            30,
        )
        assert renewed is not None and (renewed.holder, renewed.seq) == (first.holder, first.seq)

        victim = by_pid.pop(_pid(first.holder))
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        # Its last renewal stands: nothing renews it any more.
        last = _lease(dsn, schema)
        assert last is not None and (last.holder, last.seq) == (first.holder, first.seq)
        # Now retention says the history goes: only the survivor can prune it.
        _db(dsn, schema, lambda b: b.set_retention(OLD, succeeded=0.1, failed=0.1))

        second = _poll(
            "the survivor took the lease over",
            lambda: _lease(dsn, schema),
            lambda i: i is not None and i.holder != first.holder,
            60,
        )
        assert second is not None
        (survivor,) = by_pid.values()
        assert _pid(second.holder) == survivor.pid
        assert second.seq == first.seq + 1
        # Never two holders: the takeover came once the dead lease had run out, and at the
        # survivor's next claim after that. The kill came after the last renewal, which
        # began no earlier than expires_at - V: so within V + H of the kill.
        assert second.acquired_at >= last.expires_at
        assert second.acquired_at - last.expires_at <= timedelta(seconds=H + SLACK)

        left = _poll(
            "the history pruned by the new maintainer",
            lambda: _db(dsn, schema, lambda b: b.get_jobs(old_jobs, preview=0)),
            lambda jobs: jobs == {},
            60,
        )
        assert left == {}

        survivor.send_signal(signal.SIGTERM)
        _, err = survivor.communicate(timeout=60)
        assert survivor.returncode == 0, err
        # Its log says when it took over, and each pass (-v: the library's info lines).
        assert f"worker pool {second.holder} is the maintainer now" in err
        assert f"pruned 20 jobs ('{OLD}' succeeded 20)" in err
    # A graceful stop gives the lease up: it is not live any more.
    released = _lease(dsn, schema)
    assert released is not None and released.seq == second.seq
    now = _db(dsn, schema, lambda b: b.database_clock())
    assert isinstance(now, float)
    assert released.expires_at.timestamp() <= now
