"""A transactional handler that asks the worker process to exit (docs/protocol.rst §4.1).

A real ``trioqueue worker`` process, with an app module written to a temporary directory:
its handler inserts a row through ``ctx.connection`` and then calls ``sys.exit(3)`` (or
raises ``KeyboardInterrupt``). The job is enqueued with ``--max-attempts 1`` through the
command line. The attempt must not count as a success: its transaction is rolled back (the
row is absent), the job ends ``failed`` with an error that names the exception, and the
process exits as the exception asks (code 3; 130 for the interrupt, as for Ctrl-C).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

import trioqueue

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]

APP = """\
import sys


async def handler(payload, ctx):
    await ctx.connection.execute(
        'INSERT INTO "{schema}".effects (job_id) VALUES ($1)', ctx.job_id
    )
    print(f"job {{ctx.job_id}} inserted its row", flush=True)
    if payload["raise"] == "exit":
        sys.exit(3)
    raise KeyboardInterrupt
"""


async def _sql(dsn: str, schema: str, query: str) -> object:
    async with (
        trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend,
        backend.acquire() as connection,
    ):
        return await connection.fetchval(query)


def _cli(dsn: str, schema: str, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(cwd)])}
    command = [sys.executable, "-m", "trioqueue", "--dsn", dsn, "--schema", schema, *argv]
    # A safety net only: the worker exits within a second or two once the job is claimed.
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("raised", "code"), [("exit", 3), ("interrupt", 130)])
def test_a_transactional_handler_that_exits_rolls_back_and_the_worker_exits_as_asked(
    postgres_dsn: str, postgres_schema: str, tmp_path: Path, raised: str, code: int
) -> None:
    dsn, schema = postgres_dsn, postgres_schema
    assert _cli(dsn, schema, "migrate", cwd=tmp_path).returncode == 0
    table = f'"{schema}".effects'
    trio.run(_sql, dsn, schema, f"CREATE TABLE {table} (job_id bigint NOT NULL)")
    (tmp_path / "exiting_app.py").write_text(APP.format(schema=schema))
    payload = json.dumps({"raise": raised})
    enqueued = _cli(dsn, schema, "enqueue", "work", payload, "--max-attempts", "1", cwd=tmp_path)
    assert enqueued.returncode == 0, enqueued.stderr
    job_id = int(enqueued.stdout)

    worker = _cli(
        dsn,
        schema,
        *("worker", "exiting_app:handler", "--queue", "work", "--transactional"),
        *("--visibility-timeout", "30", "--heartbeat-interval", "5", "--poll-interval", "0.1"),
        cwd=tmp_path,
    )

    assert f"job {job_id} inserted its row" in worker.stdout
    assert worker.returncode == code, worker.stderr
    assert "Traceback" not in worker.stderr
    assert trio.run(_sql, dsn, schema, f"SELECT count(*) FROM {table}") == 0
    status = trio.run(_sql, dsn, schema, f'SELECT status FROM "{schema}".jobs WHERE id = {job_id}')
    error = trio.run(
        _sql, dsn, schema, f'SELECT last_error FROM "{schema}".jobs WHERE id = {job_id}'
    )
    name = "SystemExit: 3" if raised == "exit" else "KeyboardInterrupt"
    assert (status, error) == (
        "failed",
        f"{name} (raised by the handler; the worker process exits)",
    )
