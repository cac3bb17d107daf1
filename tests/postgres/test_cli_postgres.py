"""The database commands of ``trioqueue`` against a real server, each test in its own schema.

Commands run through :func:`trioqueue.cli.main` (which calls ``trio.run`` itself, so these
are plain ``def`` tests), except the worker: its pools run until a signal, so some tests
drive the async ``serve_worker`` directly and others run ``python -m trioqueue worker`` in a
subprocess and stop it with SIGINT or SIGTERM, as an operator or systemd would.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

import trioqueue
from tests._hostile_text import unsafe_in
from trioqueue._backends.postgres.sql import MIGRATIONS, QUERIES, render
from trioqueue._types import Ack, PoolBeat, PoolRegistration
from trioqueue.cli import main
from trioqueue.cli._commands import build_parser
from trioqueue.cli._commands import enqueue as enqueue_cmd
from trioqueue.cli._commands import jobs as jobs_cmd
from trioqueue.cli._commands import migrate as migrate_cmd
from trioqueue.cli._commands import worker as worker_cmd

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]


class Cli:
    """Runs ``trioqueue --dsn DSN --schema SCHEMA ...`` and captures what it printed."""

    def __init__(self, dsn: str, schema: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.dsn = dsn
        self.schema = schema
        self._capsys = capsys

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        code = main(["--dsn", self.dsn, "--schema", self.schema, *argv])
        captured = self._capsys.readouterr()
        return code, captured.out, captured.err

    def jobs(self, **filters: Any) -> list[trioqueue.JobInfo]:
        infos: list[trioqueue.JobInfo] = trio.run(
            jobs_cmd.list_jobs,
            self.dsn,
            self.schema,
            filters.get("queue"),
            filters.get("status"),
            100,
            0,
        )
        return infos


@pytest.fixture
def run(postgres_dsn: str, postgres_schema: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    """The command line on a migrated schema of its own."""
    tq = Cli(postgres_dsn, postgres_schema, capsys)
    code, out, err = tq("migrate")
    assert code == 0, err
    applied = ", ".join(f"{m.version:04d}_{m.name}" for m in MIGRATIONS)
    assert out == f"schema {postgres_schema}: applied {applied}\n"
    return tq


def test_migrate_is_idempotent(run: Cli) -> None:
    code, out, _ = run("migrate")
    assert code == 0
    assert out == f"schema {run.schema} is already up to date\n"


def test_dsn_comes_from_the_environment(run: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIOQUEUE_DSN", run.dsn)
    assert main(["--schema", run.schema, "status"]) == 0


def test_enqueue_prints_the_id_and_stores_the_options(run: Cli) -> None:
    code, out, err = run(
        "enqueue", "mail", '{"to": "a@example.com"}', "--priority", "7", "--max-attempts", "2"
    )
    assert code == 0, err
    job_id = int(out)
    [info] = run.jobs()
    assert (info.id, info.queue, info.payload) == (job_id, "mail", {"to": "a@example.com"})
    assert (info.priority, info.max_attempts, info.status) == (7, 2, "ready")


def test_enqueue_with_delay_and_dedup_key(run: Cli) -> None:
    first = run("enqueue", "q", "1", "--delay", "60", "--dedup-key", "k")
    second = run("enqueue", "q", "2", "--dedup-key", "k")
    assert first[1] == second[1]  # the duplicate's id
    assert (first[0], first[2]) == (0, "")
    job_id = first[1].strip()
    assert second[0] == 0
    assert second[2] == f"job {job_id} already exists with dedup key 'k'; not enqueued again\n"
    [info] = run.jobs()
    assert (info.status, info.payload) == ("scheduled", 1)


def test_enqueue_on_duplicate_replaces_or_debounces_the_waiting_holder(run: Cli) -> None:
    """docs/protocol.rst §18: the id on stdout is the holder's; stderr says what it got."""
    code, out, err = run("enqueue", "q", "1", "--delay", "600", "--dedup-key", "k")
    assert (code, err) == (0, "")
    job_id = out.strip()
    held = f"job {job_id} already exists with dedup key 'k'"
    code, out, err = run(
        "enqueue", "q", "2", "--dedup-key", "k", "--on-duplicate", "replace", "--priority", "4"
    )
    assert (code, out.strip()) == (0, job_id)
    assert err == f"{held}; it waited, and now has this payload, priority and delay\n"
    [info] = run.jobs()
    assert (info.status, info.payload, info.priority) == ("ready", 2, 4)
    code, out, err = run(
        "enqueue", "q", "3", "--dedup-key", "k", "--on-duplicate", "debounce", "--delay", "60"
    )
    assert (code, out.strip()) == (0, job_id)
    assert err == f"{held}; it waited, and now runs after the delay\n"
    [info] = run.jobs()
    assert (info.status, info.payload, info.priority) == ("scheduled", 2, 4)


def test_enqueue_on_duplicate_without_what_it_needs_exits_2(run: Cli) -> None:
    code, out, err = run("enqueue", "q", "1", "--on-duplicate", "debounce")
    assert (code, out) == (2, "")
    assert "needs a dedup_key" in err
    assert "needs a delay > 0" in err
    assert run.jobs() == []


def test_enqueue_with_a_group(run: Cli) -> None:
    code, out, err = run("enqueue", "q", "1", "--group", "customer-42")
    assert (code, err) == (0, "")
    [info] = run.jobs()
    assert (info.id, info.group) == (int(out), "customer-42")
    code, out, err = run("enqueue", "q", "2", "--group", "")
    assert (code, out) == (2, "")
    assert "group must not be empty" in err


def test_enqueue_bad_json_writes_nothing(run: Cli) -> None:
    code, out, err = run("enqueue", "q", "{'single': 'quotes'}")
    assert (code, out) == (2, "")
    assert "the payload is not valid JSON" in err
    assert run.jobs() == []


def test_enqueue_bad_options_are_clear_errors(run: Cli) -> None:
    code, _, err = run("enqueue", "q", "{}", "--max-attempts", "0")
    assert code == 2
    assert "max_attempts" in err
    assert run.jobs() == []


def test_enqueue_reads_the_payload_from_stdin_and_from_a_file(
    run: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO('{"from": "stdin"}'))
    code, out, err = run("enqueue", "q", "-")
    assert code == 0, err
    from_stdin = int(out)
    path = tmp_path / "payload.json"
    path.write_text('{"from": "@file"}', encoding="utf-8")
    code, out, err = run("enqueue", "q", f"@{path}")
    assert code == 0, err
    from_file = int(out)
    assert {info.id: info.payload for info in run.jobs()} == {
        from_stdin: {"from": "stdin"},
        from_file: {"from": "@file"},
    }


def test_enqueue_unreadable_payload_file_writes_nothing(run: Cli, tmp_path: Path) -> None:
    code, out, err = run("enqueue", "q", f"@{tmp_path / 'missing.json'}")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "cannot read the payload file" in err
    assert run.jobs() == []


def test_jobs_lists_with_filters(run: Cli) -> None:
    for queue, payload in (("a", "1"), ("b", '"two"'), ("a", "[3]")):
        assert run("enqueue", queue, payload)[0] == 0
    code, out, _ = run("jobs", "--queue", "a")
    lines = out.splitlines()
    assert code == 0
    assert lines[0].split() == jobs_cmd.jobs_table([])[0].split()
    assert [line.split()[1] for line in lines[1:]] == ["a", "a"]
    _, out, _ = run("jobs", "--limit", "1", "--offset", "1")
    assert out.splitlines()[1].split()[:3] == ["2", "b", "ready"]
    _, out, _ = run("jobs", "--status", "failed")
    assert out == "no jobs\n"


def test_status_counts_per_queue_and_state(run: Cli) -> None:
    assert run("status")[1] == (
        f"no jobs in schema {run.schema}\n\nno worker pools in schema {run.schema}\n"
    )
    for argv in (("a", "1"), ("a", "2", "--delay", "60"), ("b", "3")):
        run("enqueue", *argv)
    run("cancel", "3")
    code, out, _ = run("status")
    assert code == 0
    header, a, b, blank, pools = out.splitlines()
    assert (blank, pools) == ("", f"no worker pools in schema {run.schema}")
    assert header == (
        "QUEUE  SCHEDULED  READY  RUNNING  SUCCEEDED  FAILED  TOTAL  OLDEST READY  FLOW"
    )
    # The ready job's age is real time since it was enqueued: a number of seconds.
    assert re.fullmatch(r"a      1          1      0        0          0       2      \d+s +-", a)
    assert b == "b      0          0      0        0          1       1      -             -"


def test_queue_pause_and_resume(run: Cli) -> None:
    run("enqueue", "mail", "1")
    code, out, err = run("queue", "pause", "mail")
    assert (code, err) == (0, "")
    assert out == "queue mail: paused (running jobs go on; `trioqueue queue resume` resumes)\n"
    header, mail, *_ = run("status")[1].splitlines()
    assert header.endswith("FLOW")
    assert mail.endswith("  paused")
    assert run("queue", "resume", "mail")[1:] == ("queue mail: resumed\n", "")
    assert run("status")[1].splitlines()[1].endswith("  -")


def test_queue_limits_change_only_what_is_given(run: Cli) -> None:
    assert run("queue", "limits", "mail")[1] == (
        "queue mail: max_running none, max_per_second none (no jobs, not configured)\n"
    )
    code, out, _ = run("queue", "limits", "mail", "--max-running", "5", "--max-per-second", "2.5")
    assert (code, out) == (0, "queue mail: max_running 5, max_per_second 2.5\n")
    out = run("queue", "limits", "mail", "--max-per-second", "none")[1]
    assert out == "queue mail: max_running 5, max_per_second none\n"
    assert run("queue", "limits", "mail")[1] == out  # shown, not changed
    # A configured queue without jobs is listed by status, with its limits.
    code, out, _ = run("status")
    assert out.splitlines()[1].split() == [
        "mail", "0", "0", "0", "0", "0", "0", "-", "max", "5", "running"
    ]  # fmt: skip


def test_queue_limits_out_of_range_write_nothing(run: Cli) -> None:
    code, _, err = run("queue", "limits", "mail", "--max-running", "0")
    assert code == 2
    assert "max_running" in err
    assert run("queue", "limits", "mail")[1].startswith(
        "queue mail: max_running none, max_per_second none"
    )


def test_status_lists_the_worker_pools_live_and_stale(run: Cli) -> None:
    async def register() -> None:
        async with trioqueue.open_postgres(run.dsn, schema=run.schema) as backend:
            live = PoolRegistration("box:7:live", "box", 7, "mail", 4, 30.0)
            await backend.register_pool(live)
            beat = PoolBeat(live, 3, 0, clock_skew=75.0, clock_verdict="stopped")
            await backend.renew([], visibility_timeout=60, beat=beat)
            await backend.register_pool(PoolRegistration("box:8:gone", "box", 8, "mail", 1, 0.01))

    trio.run(register)
    time.sleep(0.05)  # past three of the second pool's 0.01 s intervals, by the database's clock
    code, out, _ = run("status")
    assert code == 0
    _, _, header, live, gone = out.splitlines()
    assert header.split() == [
        "WORKER", "HOST", "PID", "QUEUE", "CONC", "IN", "FLIGHT", "LAST", "BEAT", "STATE",
        "CLOCK",
    ]  # fmt: skip
    # The clock the live pool's beat carried (docs/protocol.rst §8); the other never measured.
    assert re.fullmatch(
        r"box:7:live  box   7    mail   4     3          \d+s ago +live +\+75\.000s claims stopped",
        live,
    )
    assert re.fullmatch(r"box:8:gone  box   8    mail   1     0          \d+s ago +stale +-", gone)


def test_cancel_a_waiting_job_and_an_unknown_one(run: Cli) -> None:
    job_id = run("enqueue", "q", "{}")[1].strip()
    code, out, _ = run("cancel", job_id)
    assert (code, out) == (
        0,
        f"job {job_id} cancelled at once, it was not running (cancelled before it ran)\n",
    )
    [info] = run.jobs()
    assert info.status == "failed"
    assert info.last_error == "cancelled before it ran"
    code, _, err = run("cancel", job_id)
    assert code == 1
    assert err == f"trioqueue cancel: error: job {job_id} has already failed: nothing to cancel\n"
    code, _, err = run("cancel", "999999")
    assert code == 1
    assert err == "trioqueue cancel: error: no job with id 999999\n"


def test_cancel_a_running_job_only_requests_it(run: Cli) -> None:
    """A leased job keeps running until its worker passes the request on."""
    job_id = int(run("enqueue", "q", "{}")[1])
    trio.run(_claim, run.dsn, run.schema, "q")
    code, out, _ = run("cancel", str(job_id))
    assert (code, out) == (
        0,
        f"job {job_id}: cancel requested; the running handler will stop at its next "
        "checkpoint, and the job then fails\n",
    )
    [info] = run.jobs()
    assert info.status == "running"


async def _claim(dsn: str, schema: str, queue: str) -> None:
    """Lease every job of ``queue`` for a minute, as a worker would."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        await backend.claim(queue, limit=100, worker_id="test", visibility_timeout=60)


def test_retry_puts_a_failed_job_back(run: Cli) -> None:
    job_id = run("enqueue", "q", "{}")[1].strip()
    run("cancel", job_id)
    code, out, _ = run("retry", job_id)
    assert (code, out) == (0, f"job {job_id}: back on its queue\n")
    assert run.jobs()[0].status == "ready"
    code, _, err = run("retry", job_id)  # no longer failed
    assert code == 1
    assert (
        err == f"trioqueue retry: error: job {job_id} is ready: only a failed job can be retried\n"
    )


def test_retry_of_an_unknown_job_says_so(run: Cli) -> None:
    code, _, err = run("retry", "424242")
    assert code == 1
    assert err == "trioqueue retry: error: no job with id 424242\n"


def test_delete_removes_a_job_that_is_not_running(run: Cli) -> None:
    waiting = run("enqueue", "q", "{}")[1].strip()
    code, out, _ = run("delete", waiting)
    assert (code, out) == (0, f"job {waiting}: deleted\n")
    assert run.jobs() == []
    code, _, err = run("delete", waiting)  # gone now
    assert (code, err) == (1, f"trioqueue delete: error: no job with id {waiting}\n")


def test_delete_refuses_a_running_job(run: Cli) -> None:
    job_id = run("enqueue", "q", "{}")[1].strip()
    trio.run(_claim, run.dsn, run.schema, "q")
    code, _, err = run("delete", job_id)
    assert code == 1
    assert err == (
        f"trioqueue delete: error: job {job_id} is running: a running job cannot be deleted "
        "(cancel it first)\n"
    )
    assert [info.status for info in run.jobs()] == ["running"]


def test_commands_on_a_schema_never_migrated_fail_cleanly(
    postgres_dsn: str, postgres_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--dsn", postgres_dsn, "--schema", postgres_schema, "jobs"])
    err = capsys.readouterr().err
    assert code == 1
    assert "does not exist" in err
    assert f"has the schema been migrated? run: trioqueue migrate --schema {postgres_schema}" in err
    assert "Traceback" not in err


# -- worker -------------------------------------------------------------------------------


def _work_until_succeeded(
    run: Cli, argv: list[str], stop: signal.Signals, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """Run the worker command ``argv`` as a process until every job of the schema has
    succeeded (30 s at most), then send it ``stop``: its exit code, stdout and stderr."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    with subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as worker:
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and {j.status for j in run.jobs()} != {"succeeded"}:
                time.sleep(0.05)  # another process's progress, read from the database
            worker.send_signal(stop)
            out, err = worker.communicate(timeout=30)
        finally:
            worker.kill()
    return worker.returncode, out, err


def test_worker_on_a_schema_never_migrated_says_so_once(
    postgres_dsn: str, postgres_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """One line with the migrate hint, before any pool starts (no registration or claim
    failures logged on the way)."""
    argv = ["--dsn", postgres_dsn, "--schema", postgres_schema, "worker"]
    code = main([*argv, "tests.postgres.test_cli_postgres:noop", "--queue", "q"])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""
    [line] = err.splitlines()
    assert line.startswith("trioqueue worker: error: PostgreSQL: UndefinedTableError")
    assert line.endswith(
        f"has the schema been migrated? run: trioqueue migrate --schema {postgres_schema}"
    )


async def _migrate_to(dsn: str, schema: str, last: int, *, extra: int | None = None) -> None:
    """The schema with migrations 1..``last`` applied, as an older trioqueue left it; with
    ``extra``, also a record of that migration number, as a newer trioqueue would leave."""
    async with (
        trioqueue.open_postgres(dsn, schema=schema) as backend,
        backend.acquire() as connection,
        connection.transaction(),
    ):
        await connection.execute(render(QUERIES["migrate_prepare"], schema))
        record = render(QUERIES["record_migration"], schema)
        for migration in MIGRATIONS[:last]:
            await connection.execute(render(migration.sql, schema))
            await connection.execute(record, migration.version, migration.name, migration.checksum)
        if extra is not None:
            await connection.execute(record, extra, "from_the_future", "?")


@pytest.mark.parametrize("command", ["worker", "dashboard"])
def test_a_schema_missing_the_newest_migrations_is_refused_before_starting(
    postgres_dsn: str, postgres_schema: str, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """A schema at 0002 passed the old check (its workers table exists) and then failed at
    the first statement needing a newer column: now it is named, with the fix."""
    trio.run(_migrate_to, postgres_dsn, postgres_schema, 2)
    argv = ["--dsn", postgres_dsn, "--schema", postgres_schema, command]
    if command == "worker":
        argv += ["tests.postgres.test_cli_postgres:noop", "--queue", "q"]
    else:
        argv += ["--port", "0"]
    code = main(argv)
    out, err = capsys.readouterr()
    missing = ", ".join(f"{m.version:04d}_{m.name}" for m in MIGRATIONS[2:])
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        f"trioqueue {command}: error: schema {postgres_schema!r} lacks migration(s) {missing} "
        f"of this trioqueue; run: trioqueue migrate --schema {postgres_schema}"
    ]


def test_a_schema_migrated_by_a_newer_trioqueue_is_refused(
    postgres_dsn: str, postgres_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    newer = len(MIGRATIONS) + 1
    trio.run(
        functools.partial(_migrate_to, extra=newer),
        postgres_dsn,
        postgres_schema,
        len(MIGRATIONS),
    )
    argv = ["--dsn", postgres_dsn, "--schema", postgres_schema, "worker"]
    code = main([*argv, "tests.postgres.test_cli_postgres:noop", "--queue", "q"])
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    [line] = err.splitlines()
    assert line == (
        f"trioqueue worker: error: schema {postgres_schema!r} has migrations this trioqueue "
        f"does not know ([{newer}]): it was migrated by a newer version; upgrade trioqueue"
    )


async def test_pending_migrations_of_a_schema(postgres_dsn: str, postgres_schema: str) -> None:
    names = [f"{m.version:04d}_{m.name}" for m in MIGRATIONS]
    await _migrate_to(postgres_dsn, postgres_schema, 2)
    async with trioqueue.open_postgres(postgres_dsn, schema=postgres_schema) as backend:
        assert await backend.pending_migrations() == names[2:]
        assert await backend.migrate() == names[2:]
        assert await backend.pending_migrations() == []


HANDLED: list[Any] = []


async def record(payload: Any, ctx: trioqueue.JobContext) -> None:
    """A handler that records each payload (the in-process worker test)."""
    HANDLED.append(payload)


async def noop(payload: Any, ctx: trioqueue.JobContext) -> None:
    """A handler for the subprocess worker test."""


async def test_serve_worker_runs_jobs_until_cancelled(
    postgres_dsn: str, postgres_schema: str
) -> None:
    HANDLED.clear()
    await migrate_cmd.migrate(postgres_dsn, postgres_schema)
    for n in range(3):
        await enqueue_cmd.enqueue(postgres_dsn, postgres_schema, "work", {"n": n}, {})
    config = trioqueue.WorkerConfig(handler=record, queue="work", concurrency=2, poll_interval=0.1)
    async with trio.open_nursery() as nursery:
        await nursery.start(worker_cmd.serve_worker, postgres_dsn, postgres_schema, config)
        with trio.fail_after(20):
            while len(HANDLED) < 3:
                await trio.sleep(0.02)
        nursery.cancel_scope.cancel()
    assert sorted(payload["n"] for payload in HANDLED) == [0, 1, 2]
    infos = await jobs_cmd.list_jobs(postgres_dsn, postgres_schema, "work", None, 100, 0)
    # Ack writes are flushed before the pool returns from its graceful shutdown.
    assert [info.status for info in infos] == ["succeeded"] * 3


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:
        body: bytes = answer.read()
        return body.decode()


Sample = tuple[str, tuple[tuple[str, str], ...]]
SUCCEEDED_IN_WORK: Sample = (
    "trioqueue_jobs_finished_total",
    (("outcome", "succeeded"), ("queue", "work")),
)


def _samples(text: str) -> dict[Sample, float]:
    """Every sample of an exposition, by name and sorted labels."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_serve_worker_serves_metrics_that_move_while_its_pool_works(
    postgres_dsn: str, postgres_schema: str
) -> None:
    """``worker --metrics-port``: /metrics over real HTTP, scraped from a thread."""
    HANDLED.clear()
    await migrate_cmd.migrate(postgres_dsn, postgres_schema)
    for n in range(3):
        await enqueue_cmd.enqueue(postgres_dsn, postgres_schema, "work", {"n": n}, {})
    config = trioqueue.WorkerConfig(handler=record, queue="work", poll_interval=0.1)
    out = io.StringIO()
    async with trio.open_nursery() as nursery:
        serve = functools.partial(
            worker_cmd.serve_worker,
            postgres_dsn,
            postgres_schema,
            metrics=("127.0.0.1", 0),
            out=out,
        )
        await nursery.start(serve, config)
        with trio.fail_after(20):
            while len(HANDLED) < 3:
                await trio.sleep(0.02)
        [line] = out.getvalue().splitlines()
        assert line.startswith("metrics on http://127.0.0.1:") and line.endswith("/metrics")
        url = line.removeprefix("metrics on ")
        with trio.fail_after(20):
            while True:  # the third ack may still be on its way when the handler returns
                samples = _samples(await trio.to_thread.run_sync(_scrape, url))
                if samples.get(SUCCEEDED_IN_WORK) == 3:
                    break
                await trio.sleep(0.05)
        # The health checks share the port (trioqueue/cli/_health.py).
        live = json.loads(await trio.to_thread.run_sync(_scrape, url.replace("/metrics", "/livez")))
        nursery.cancel_scope.cancel()
    assert live["status"] == "ok" and live["checks"]["event_loop"] == "responsive"
    assert samples["trioqueue_handler_duration_seconds_count", (("queue", "work"),)] == 3
    assert ("trioqueue_renewal_duration_seconds_count", ()) in samples  # no-op jobs: maybe 0
    # Sampled when serving began, before the pool claimed: three ready jobs.
    assert samples["trioqueue_jobs", (("queue", "work"), ("status", "ready"))] == 3
    assert ("trioqueue_connections_in_use", ()) in samples


def test_worker_metrics_port_in_use_is_a_one_line_error(run: Cli) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = ["worker", "tests.postgres.test_cli_postgres:noop", "--queue", "work"]
        code, _, err = run(*argv, "--metrics-port", str(port))
    assert code == 1
    assert err.startswith(f"trioqueue worker: error: cannot serve metrics on 127.0.0.1:{port}: ")
    assert "Traceback" not in err


def test_worker_command_runs_jobs_and_stops_gracefully_on_ctrl_c(run: Cli) -> None:
    for n in range(2):
        run("enqueue", "work", json.dumps({"n": n}))
    argv = [sys.executable, "-m", "trioqueue", "--dsn", run.dsn, "--schema", run.schema]
    argv += [
        "worker",
        "tests.postgres.test_cli_postgres:noop",
        "--queue",
        "work",
        "--concurrency",
        "2",
    ]
    argv += ["--visibility-timeout", "10", "--heartbeat-interval", "2", "--shutdown-grace", "1"]
    code, out, err = _work_until_succeeded(run, argv, signal.SIGINT)
    assert code == 0, err
    assert [info.status for info in run.jobs()] == ["succeeded", "succeeded"]
    assert "worker pool on queue 'work'" in out
    assert "SIGINT: shutting down" in out
    assert out.endswith("worker pool stopped\n")


def test_worker_command_serves_metrics_over_http(run: Cli) -> None:
    """``python -m trioqueue worker --metrics-port 0``: it prints the address, a scrape
    there shows the jobs it finished, and Ctrl-C stops both."""
    for n in range(2):
        run("enqueue", "work", json.dumps({"n": n}))
    argv = [sys.executable, "-m", "trioqueue", "--dsn", run.dsn, "--schema", run.schema]
    argv += ["worker", "tests.postgres.test_cli_postgres:noop", "--queue", "work"]
    argv += ["--metrics-port", "0", "--shutdown-grace", "1"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as worker:
        try:
            assert worker.stdout is not None
            first = worker.stdout.readline()  # printed before the pool starts
            assert first.startswith("metrics on http://127.0.0.1:"), first
            url = first.split()[-1]
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                samples = _samples(_scrape(url))
                if samples.get(SUCCEEDED_IN_WORK) == 2:
                    break
                time.sleep(0.05)
            worker.send_signal(signal.SIGINT)
            out, err = worker.communicate(timeout=30)
        finally:
            worker.kill()
    assert worker.returncode == 0, err
    assert samples[SUCCEEDED_IN_WORK] == 2
    assert ("trioqueue_connections_in_use", ()) in samples
    assert out.endswith("worker pool stopped\n")


def test_worker_command_logs_json_lines_with_the_job_fields(run: Cli) -> None:
    """``worker --log-format json -v``: every line is one JSON object on stderr, the
    startup warning and the command's own lines (banner, metrics, signal, stop) among
    them, nothing on stdout, and a job's outcome carries its fields."""
    _, out, _ = run("enqueue", "work", "{}")
    job_id = int(out)
    argv = [sys.executable, "-m", "trioqueue", "--dsn", run.dsn, "--schema", run.schema]
    argv += ["worker", "tests.postgres.test_cli_postgres:noop", "--queue", "work", "-v"]
    argv += ["--log-format", "json", "--shutdown-grace", "1", "--metrics-port", "0"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    records: list[dict[str, Any]] = []
    with subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as worker:
        try:
            assert worker.stderr is not None
            for line in worker.stderr:  # until the job's outcome is logged
                records.append(json.loads(line))
                if records[-1]["message"] == f"job {job_id} succeeded (attempt 1)":
                    break
            worker.send_signal(signal.SIGINT)
            out, err = worker.communicate(timeout=30)
        finally:
            worker.kill()
    assert worker.returncode == 0, err
    assert out == ""  # every line on one stream, stderr
    records += [json.loads(line) for line in err.splitlines()]
    own = [r["event"] for r in records if r["logger"] == "trioqueue.cli"]
    assert own == ["metrics_serving", "worker_started", "shutting_down", "worker_stopped"]
    warnings = [r for r in records if r["level"] == "WARNING"]
    assert [r["message"][:27] for r in warnings] == ["max_job_duration is not set"]
    [done] = [r for r in records if r["message"].startswith(f"job {job_id} succeeded")]
    assert (done["logger"], done["job_id"], done["queue"], done["attempt"]) == (
        "trioqueue.worker",
        job_id,
        "work",
        1,
    )
    assert done["event"] == "succeeded"
    assert any(r["message"].startswith("worker pool") for r in records if "job_id" not in r)


# -- demo ---------------------------------------------------------------------------------


def test_demo_on_postgres_ends_as_expected(
    postgres_dsn: str, postgres_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--dsn", postgres_dsn, "demo", "--schema", postgres_schema]
    code = main([*argv, "--speed", "20", "--no-live"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"on PostgreSQL (your server), schema {postgres_schema}" in out
    assert "invoice-sync: succeeded on attempt 2, after a retry, as expected" in out
    assert "export-customer-archive: failed as expected, last_error: cancelled" in out
    # A second run starts from a fresh schema: the same ids again.
    assert main([*argv, "--jobs", "3", "--speed", "40", "--no-live"]) == 0
    assert "job   1 export-customer-archive" in capsys.readouterr().out


def test_demo_without_a_dsn_runs_on_an_embedded_server(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's main command: ``trioqueue demo`` with no server configured."""
    pytest.importorskip("pgserver")
    monkeypatch.delenv("TRIOQUEUE_DSN", raising=False)
    assert main(["demo", "--jobs", "3", "--speed", "40", "--no-live"]) == 0
    captured = capsys.readouterr()
    assert "starting an embedded PostgreSQL server" in captured.err
    assert "on PostgreSQL (embedded), schema trioqueue_demo" in captured.out
    assert "demo OK" in captured.out


def _with_path(dsn: str, path: str) -> str:
    """``dsn`` naming database ``path`` instead (keeping its query string)."""
    base, _, query = dsn.partition("?")
    head = base.rsplit("/", 1)[0]
    return f"{head}/{path}" + (f"?{query}" if query else "")


def _with_user(dsn: str, user: str) -> str:
    """``dsn`` connecting as ``user`` (keeping any password)."""
    if "://" not in dsn or "@" not in dsn:
        pytest.skip("needs a URI DSN with a user name")
    scheme, rest = dsn.split("://", 1)
    userinfo, host = rest.split("@", 1)
    password = "".join(userinfo.partition(":")[1:])
    return f"{scheme}://{user}{password}@{host}"


@pytest.mark.parametrize(
    ("change", "says", "hint"),
    [
        pytest.param(
            lambda dsn: _with_path(dsn, "no_such_db_tq"),
            'database "no_such_db_tq" does not exist',
            "check the database name in the DSN",
            id="database",
        ),
        pytest.param(
            lambda dsn: _with_user(dsn, "no_such_role_tq"),
            'role "no_such_role_tq" does not exist',
            "check the user name in the DSN",
            id="role",
        ),
    ],
)
def test_an_unknown_database_or_role_is_not_taken_for_an_unmigrated_schema(
    postgres_dsn: str,
    capsys: pytest.CaptureFixture[str],
    change: Callable[[str], str],
    says: str,
    hint: str,
) -> None:
    code = main(["--dsn", change(postgres_dsn), "jobs"])
    err = capsys.readouterr().err
    assert code == 1
    assert says in err
    assert hint in err
    assert "migrate" not in err


def test_demo_refuses_a_schema_it_did_not_create(
    run: Cli, capsys: pytest.CaptureFixture[str]
) -> None:
    """A migrated schema with jobs and the user's own table survives ``demo --schema``."""
    job_id = run("enqueue", "mail", '{"to": "a@example.com"}')[1].strip()
    trio.run(_sql, run.dsn, f'CREATE TABLE "{run.schema}".invoices (n int)')
    trio.run(_sql, run.dsn, f'INSERT INTO "{run.schema}".invoices VALUES (7)')
    code, out, err = run("demo", "--jobs", "3", "--speed", "40", "--no-live")
    assert (code, out) == (2, "")
    assert err == (
        f"trioqueue demo: error: schema {run.schema} already exists and was not made by "
        "trioqueue demo, so the demo will not drop it; nothing was written. Choose a new "
        "name with --schema\n"
    )
    assert [info.id for info in run.jobs()] == [int(job_id)]
    assert trio.run(_sql, run.dsn, f'SELECT n FROM "{run.schema}".invoices') == 7


async def _sql(dsn: str, query: str) -> Any:
    """``fetchval(query)`` on a connection of its own."""
    async with (
        trioqueue.open_postgres(dsn, max_connections=1) as backend,
        backend.acquire() as connection,
    ):
        return await connection.fetchval(query)


BLOCKING_HANDLER = """\
import trio


async def handler(payload, ctx):
    print(f"handler started job {ctx.job_id}", flush=True)
    await trio.sleep_forever()
"""


def test_a_second_sigterm_stops_the_worker_at_once(run: Cli, tmp_path: Path) -> None:
    """The grace is 600 s: only the second signal lets this test finish. The running job is
    released for another worker, its attempt not charged."""
    job_id = int(run("enqueue", "work", "{}")[1])
    (tmp_path / "blocking_jobs.py").write_text(BLOCKING_HANDLER)
    argv = [sys.executable, "-m", "trioqueue", "--dsn", run.dsn, "--schema", run.schema]
    argv += ["worker", "blocking_jobs:handler", "--queue", "work", "--shutdown-grace", "600"]
    argv += ["--visibility-timeout", "30", "--heartbeat-interval", "5"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    with subprocess.Popen(
        argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as worker:
        assert worker.stdout is not None and worker.stderr is not None
        try:
            lines = _lines_until(worker.stdout, f"handler started job {job_id}")
            worker.send_signal(signal.SIGTERM)
            lines += _lines_until(worker.stdout, "SIGTERM: shutting down")
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=120)  # a safety net: without the fix it takes 600 s
            # Read after the exit, through the same buffered streams as the lines above.
            out, err = worker.stdout.read(), worker.stderr.read()
        finally:
            worker.kill()
    assert worker.returncode == 130, err
    assert lines[-1] == (
        "SIGTERM: shutting down; handlers may finish for up to 600s (signal again to stop at once)"
    )
    assert out.splitlines() == [
        "SIGTERM again: stopping at once; running handlers are cancelled and their jobs "
        "released for another worker",
        "worker pool stopped",
    ]
    [info] = run.jobs()
    assert (info.status, info.attempts, info.last_error) == ("ready", 0, None)


def _lines_until(stream: Any, wanted: str) -> list[str]:
    """Lines read from ``stream`` up to and including the one starting with ``wanted``."""
    lines = []
    for line in stream:
        lines.append(line.rstrip("\n"))
        if line.startswith(wanted):
            return lines
    raise AssertionError(f"the worker exited before printing {wanted!r}; it printed {lines}")


def _watch_argv(run: Cli) -> list[str]:
    argv = [sys.executable, "-m", "trioqueue", "--dsn", run.dsn, "--schema", run.schema]
    return [*argv, "jobs", "--watch", "--interval", "0.2", "--queue", "work"]


def test_jobs_watch_into_a_pipe_prints_snapshots_until_ctrl_c(run: Cli) -> None:
    run("enqueue", "work", json.dumps({"n": 1}))
    run("enqueue", "other", json.dumps({"n": 2}))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen(
        _watch_argv(run), cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as watch:
        assert watch.stdout is not None
        try:
            snapshots: list[list[str]] = [[]]
            while len(snapshots) < 3:  # two whole snapshots, then the start of a third
                line = watch.stdout.readline().decode()
                assert line, "the watch ended early"
                if line == "\n":
                    snapshots.append([])
                else:
                    snapshots[-1].append(line.rstrip("\n"))
            watch.send_signal(signal.SIGINT)
            _, err = watch.communicate(timeout=30)
        finally:
            watch.kill()
    assert watch.returncode == 0, err
    assert err == b""  # no traceback, no "interrupted"
    for snapshot in snapshots[:2]:
        assert snapshot[0].startswith(f"trioqueue jobs --watch  schema {run.schema}")
        assert snapshot[1].startswith("work: 1 ready; oldest ready ")
        assert [line.split()[:4] for line in snapshot[3:]] == [["1", "work", "ready", "0/10"]]
        assert "\x1b" not in "".join(snapshot)  # no escape codes in a pipe


def test_jobs_watch_on_a_terminal_redraws_and_restores_the_cursor(run: Cli) -> None:
    run("enqueue", "work", json.dumps({"n": 1}))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100", "LINES": "30"}
    controller, terminal = os.openpty()
    try:
        with subprocess.Popen(
            _watch_argv(run), cwd=ROOT, env=env, stdout=terminal, stderr=subprocess.PIPE
        ) as watch:
            os.close(terminal)
            terminal = -1
            try:
                seen = b""
                while seen.count(b"trioqueue jobs --watch") < 2:
                    chunk = os.read(controller, 4096)
                    assert chunk, "the watch ended early"
                    seen += chunk
                watch.send_signal(signal.SIGINT)
                while True:
                    try:
                        chunk = os.read(controller, 4096)
                    except OSError:  # EIO: the child closed the terminal
                        break
                    if not chunk:
                        break
                    seen += chunk
                _, err = watch.communicate(timeout=30)
            finally:
                watch.kill()
    finally:
        os.close(controller)
        if terminal >= 0:
            os.close(terminal)
    assert watch.returncode == 0, err
    assert err == b""
    assert seen.startswith(b"\x1b[?25l")  # the cursor hidden while live
    assert b"\x1b[4A" in seen  # the second frame drawn over the first
    assert seen.endswith(b"\x1b[?25h")  # and shown again after Ctrl-C


# -- several queues and a resources hook (docs/cli.rst, "worker") -------------------------

#: Where the subprocess's resources hook writes its entry and exit (one line each).
HOOK_FILE_ENV = "TRIOQUEUE_TEST_HOOK_FILE"


@contextlib.asynccontextmanager
async def shared_client() -> AsyncIterator[dict[str, str]]:
    """The ``--resources`` hook of the subprocess test: logs its entry and exit to a file."""
    path = os.environ[HOOK_FILE_ENV]
    await _note(path, "enter")
    try:
        yield {"client": "shared"}
    finally:
        await _note(path, "exit")


async def _note(path: str, line: str) -> None:
    async with await trio.open_file(path, "a") as log:
        await log.write(line + "\n")


async def needs_client(payload: Any, ctx: trioqueue.JobContext) -> None:
    """Fails its job unless the hook's value came through ``ctx.resources``."""
    if ctx.resources != {"client": "shared"}:
        raise AssertionError(f"ctx.resources is {ctx.resources!r}")


HANDLERS = {"emails": needs_client, "reports": needs_client}


def test_worker_command_runs_a_pool_per_queue_with_a_resources_hook(
    run: Cli, tmp_path: Path
) -> None:
    """``python -m trioqueue worker MAPPING --queue Q=... --resources HOOK``: jobs of every
    queue succeed with the hook's value, and SIGTERM stops the pools, then the hook."""
    for queue in ("emails", "reports", "alerts"):
        run("enqueue", queue, "{}")
    hook_file = tmp_path / "hook.log"
    module = "tests.postgres.test_cli_postgres"
    argv = [sys.executable, "-m", "trioqueue", "--dsn", run.dsn, "--schema", run.schema]
    argv += ["worker", f"{module}:HANDLERS", "--queue", f"alerts={module}:needs_client"]
    argv += ["--resources", f"{module}:shared_client", "--concurrency", "2"]
    argv += ["--poll-interval", "0.5", "--shutdown-grace", "1"]
    code, out, err = _work_until_succeeded(
        run, argv, signal.SIGTERM, {HOOK_FILE_ENV: str(hook_file)}
    )
    assert code == 0, err
    assert sorted((info.queue, info.status) for info in run.jobs()) == [
        ("alerts", "succeeded"),
        ("emails", "succeeded"),
        ("reports", "succeeded"),
    ]
    assert hook_file.read_text() == "enter\nexit\n"
    assert out.splitlines() == [
        f"worker pools on queues 'emails', 'reports', 'alerts' (schema {run.schema}); "
        "Ctrl-C to stop",
        "SIGTERM: shutting down; handlers may finish for up to 1s (signal again to stop at once)",
        "worker pools stopped",
    ]


def test_worker_command_refuses_to_start_when_its_hook_fails(run: Cli, tmp_path: Path) -> None:
    """A hook that cannot start (here: no file to log to) is one line, exit 1, no job run."""
    run("enqueue", "emails", "{}")
    module = "tests.postgres.test_cli_postgres"
    argv = [sys.executable, "-m", "trioqueue", "--dsn", run.dsn, "--schema", run.schema]
    argv += ["worker", f"{module}:HANDLERS", "--resources", f"{module}:shared_client"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), HOOK_FILE_ENV: str(tmp_path / "no" / "log")}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 1
    assert done.stderr.startswith(
        f"trioqueue worker: error: --resources {module}:shared_client failed starting: "
        "FileNotFoundError: "
    )
    assert done.stderr.count("\n") == 1
    assert [info.status for info in run.jobs()] == ["ready"]


async def in_transaction(payload: Any, ctx: trioqueue.JobContext) -> None:
    """A transactional handler: reads through ``ctx.connection``, inside the ack's transaction."""
    HANDLED.append(await ctx.connection.fetchval("SELECT $1::int", payload["n"]))


async def test_worker_transactional_option_gives_handlers_their_connection(
    postgres_dsn: str, postgres_schema: str
) -> None:
    """``worker --transactional`` on two queues: each pool's handlers get ``ctx.connection``,
    within the connection budget sized for both pools."""
    HANDLED.clear()
    await migrate_cmd.migrate(postgres_dsn, postgres_schema)
    for n in range(6):
        await enqueue_cmd.enqueue(postgres_dsn, postgres_schema, ("a", "b")[n % 2], {"n": n}, {})
    module = "tests.postgres.test_cli_postgres"
    argv = [
        "worker",
        "--queue",
        f"a={module}:in_transaction",
        "--queue",
        f"b={module}:in_transaction",
    ]
    argv += ["--transactional", "--concurrency", "2", "--batch-size", "2", "--poll-interval", "0.1"]
    args = build_parser().parse_args(argv)
    configs = worker_cmd.worker_configs(args)
    assert [(c.queue, c.transactional) for c in configs] == [("a", True), ("b", True)]
    async with trio.open_nursery() as nursery:
        await nursery.start(worker_cmd.serve_worker, postgres_dsn, postgres_schema, configs)
        with trio.fail_after(20):
            while len(HANDLED) < 6:
                await trio.sleep(0.02)
        nursery.cancel_scope.cancel()
    assert sorted(HANDLED) == list(range(6))
    infos = await jobs_cmd.list_jobs(postgres_dsn, postgres_schema, None, None, 100, 0)
    assert [info.status for info in infos] == ["succeeded"] * 6


async def _run_to_success(dsn: str, schema: str, queue: str, result: str) -> None:
    """Claim the queue's jobs and ack them with ``result`` (JSON text), as a worker would."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        claimed = await backend.claim(queue, limit=100, worker_id="test", visibility_timeout=60)
        await backend.ack([Ack(c.job.id, c.job.claim_seq, result=result) for c in claimed])


def test_show_prints_a_job_with_its_group_and_result(run: Cli) -> None:
    job_id = int(run("enqueue", "q", '{"page": 3}', "--group", "customer-42")[1])
    trio.run(_run_to_success, run.dsn, run.schema, "q", '{"pages": [3], "ok": true}')
    code, out, err = run("show", str(job_id))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"job {job_id} in queue q: succeeded (attempt 1 of 10)"
    assert '  payload   {"page": 3}' in lines
    assert "  group     customer-42" in lines
    assert '  result    {"ok": true, "pages": [3]}' in lines  # (jsonb orders keys)
    assert not any(line.startswith("  error") for line in lines)


def test_show_wait_times_out_on_a_job_nobody_runs(run: Cli) -> None:
    job_id = int(run("enqueue", "q", "1")[1])
    code, out, err = run("show", str(job_id), "--wait", "--timeout", "0.2")
    assert code == 1
    assert out.splitlines()[0] == f"job {job_id} in queue q: ready (attempt 0 of 10)"
    assert err == f"trioqueue show: error: job {job_id} is still ready after 0.2 s\n"


def test_show_refuses_unknown_ids_and_a_timeout_without_wait(run: Cli) -> None:
    code, out, err = run("show", "999")
    assert (code, out, err) == (1, "", "trioqueue show: error: no job with id 999\n")
    code, out, err = run("show", "1", "--timeout", "5")
    assert (code, out) == (2, "")
    assert "--timeout needs --wait" in err


#: Escape codes that recolour, retitle and clear the terminal, a forged ``show`` field on a
#: line of its own, and a bidi override (PostgreSQL's text holds anything but NUL).
HOSTILE = "\x1b]0;pwned\x07\x1b[31mred\r\n  error     none\u202eliam\x9b2J\x85\x7f\u2028"


async def _store_hostile_fields(dsn: str, schema: str, job_ids: list[int]) -> None:
    """Write ``HOSTILE`` into every stored text field the command line prints: the jobs'
    queue, group, error, worker, payload and result, a worker pool's names, a schedule's
    every field (its clock verdict too) and a queue's flow row. Written straight into the
    tables, as an older version or another client might have, so that no check at enqueue
    or registration stands in the way."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        await backend.register_pool(PoolRegistration("w", "h", 7, "q", 1, 30.0))
        await backend.set_schedule("s", "q", "* * * * *")
        async with backend.acquire() as connection:
            await connection.execute(
                f"""UPDATE {schema}.workers SET worker_id = $1, host = $1, queue = $1,
                    clock_skew = 1.5, clock_verdict = $1""",
                HOSTILE,
            )
            await connection.execute(
                f"""UPDATE {schema}.jobs SET queue = $1, group_key = $1, last_error = $1,
                    worker_id = $1, payload = jsonb_build_object($1::text, $1::text),
                    result = to_jsonb($1::text)
                    WHERE id = ANY($2::bigint[])""",
                HOSTILE,
                job_ids,
            )
            await connection.execute(
                f"""UPDATE {schema}.jobs SET status = 'succeeded', finished_at = now()
                    WHERE id = $1""",
                job_ids[0],
            )
            await connection.execute(
                f"""UPDATE {schema}.schedules SET name = $1, queue = $1, cron = $1,
                    timezone = $1""",
                HOSTILE,
            )
            await connection.execute(
                f"INSERT INTO {schema}.queues (queue, paused) VALUES ($1, true)", HOSTILE
            )


def test_no_command_prints_a_stored_string_raw(run: Cli) -> None:
    """Every command that shows stored text, with hostile text in every field, prints no
    control character, bidi control or line break of it: each shows escaped, on stdout
    and stderr alike, and ``show`` prints one ``error`` field."""
    ids = [int(run("enqueue", "q", "{}")[1]) for _ in range(3)]
    trio.run(_store_hostile_fields, run.dsn, run.schema, ids)
    succeeded, ready, failing = ids
    printed: dict[str, tuple[int, str, str]] = {}
    for argv in (
        ["status"],
        ["jobs"],
        ["jobs", "--queue", HOSTILE],
        ["show", str(succeeded)],
        ["show", str(ready)],
        ["cancel", str(succeeded)],  # refused: it already succeeded
        ["cancel", str(failing)],  # at once: it was not running
        ["show", str(failing)],
        ["retry", str(succeeded)],  # refused
        ["delete", str(ready)],
        ["schedule", "list"],
        ["schedule", "delete", HOSTILE],
        ["queue", "limits", HOSTILE, "--max-running", "3"],
        ["queue", "pause", HOSTILE],
        ["enqueue", HOSTILE, "{}", "--dedup-key", HOSTILE],
        ["schedule", "disable", HOSTILE],
        ["tables"],
    ):
        printed[" ".join(argv)] = result = run(*argv)
        assert result[1] + result[2], argv
    for command, (_, out, err) in printed.items():
        assert not unsafe_in(out + err), (command, out, err)
        assert "\x1b" not in out + err
    show = printed[f"show {succeeded}"][1].splitlines()
    assert [line for line in show if line.startswith("  error")] == [
        "  error     (of an earlier attempt) \\x1b]0;pwned\\x07\\x1b[31mred\\r"
    ]
    assert "\\u202eliam" in printed["status"][1]  # shown whole, escaped
    # JSON escapes what it must (ESC as \u001b), the rest shows escaped the same way.
    assert show[-1].startswith('  result    "\\u001b]0;pwned\\u0007\\u001b[31mred\\r\\n')
    assert show[-1].endswith('none\\u202eliam\\x9b2J\\x85\\x7f\\u2028"')


def test_jobs_watch_into_a_pipe_prints_stored_strings_escaped(run: Cli) -> None:
    ids = [int(run("enqueue", "q", "{}")[1]) for _ in range(2)]
    trio.run(_store_hostile_fields, run.dsn, run.schema, ids)
    argv = [sys.executable, "-m", "trioqueue", "--dsn", run.dsn, "--schema", run.schema]
    argv += ["jobs", "--watch", "--interval", "0.2"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as watch:
        assert watch.stdout is not None
        try:
            lines: list[str] = []
            while "" not in lines:  # one whole snapshot: a blank line starts the next
                line = watch.stdout.readline().decode()
                assert line, "the watch ended early"
                lines.append(line.rstrip("\n"))
            watch.send_signal(signal.SIGINT)
            _, err = watch.communicate(timeout=30)
        finally:
            watch.kill()
    assert watch.returncode == 0, err
    assert not unsafe_in("\n".join(lines)), lines
    assert any("\\u202eliam" in line for line in lines)


def _into_a_closed_pipe(argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    """Run ``python -m trioqueue ARGV`` with stdout a pipe whose reading end is already
    closed (as after ``| head -1`` has read its line): every write to it fails."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "trioqueue", *argv],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)


def test_a_reader_that_stops_early_ends_the_command_quietly(run: Cli) -> None:
    """``trioqueue status | head -1``: no BrokenPipeError traceback, nothing on stderr,
    exit 141 (128 + SIGPIPE: what ``cat`` or ``yes`` give under ``set -o pipefail``)."""
    job_id = run("enqueue", "q", "{}")[1].strip()
    database = ["--dsn", run.dsn, "--schema", run.schema]
    # jobs --watch writes inside trio.run: its error comes inside exception groups.
    for argv in (["status"], ["show", job_id], ["jobs"], ["schedule", "list"], ["jobs", "--watch"]):
        done = _into_a_closed_pipe([*database, *argv])
        assert (done.returncode, done.stderr) == (141, b""), argv
    # argparse ignores a failed write of its help itself: quiet too, exit 0 as ever.
    done = _into_a_closed_pipe(["--help"])
    assert (done.returncode, done.stderr) == (0, b"")


# -- the operator's commands (docs/cli.rst) -----------------------------------------------


def test_the_operator_commands_on_postgresql(run: Cli) -> None:
    """Cancellations told apart, bulk retry and delete counted then confirmed, schedules
    disabled, run and enabled, the audit log and table health, on a real server."""
    first, second, kept = (int(run("enqueue", "q", f'"job {n}"')[1]) for n in range(3))
    assert run("cancel", str(first))[0] == 0
    assert run("cancel", str(second))[0] == 0
    code, out, _ = run("show", str(first))
    assert out.splitlines()[0] == f"job {first} in queue q: failed (cancelled) (attempt 0 of 10)"
    code, out, _ = run("jobs", "--status", "failed", "--cancelled-only")
    assert [row.split()[0] for row in out.splitlines()[1:]] == [str(first), str(second)]
    assert run("jobs", "--status", "failed", "--no-cancelled")[1] == "no jobs\n"

    code, _, err = run("retry", "--all-matching", "--search", "job 1")
    assert (code, err.splitlines()[-1]) == (
        1,
        "trioqueue retry: error: 1 job(s) match --search job 1 --status failed; "
        "nothing done: add --yes to retry them",
    )
    assert run("retry", "--all-matching", "--search", "job 1", "--yes")[0] == 0
    assert [info.status for info in run.jobs()] == ["failed", "ready", "ready"]
    code, out, _ = run("delete", "--all-matching", "--status", "failed", "--yes")
    assert (code, out) == (0, "1 job(s) matching --status failed deleted\n")
    assert [info.id for info in run.jobs()] == [second, kept]

    assert run("schedule", "set", "nightly", "q", "0 3 * * *")[0] == 0
    assert run("schedule", "disable", "nightly")[1] == "schedule 'nightly' disabled\n"
    assert run("schedule", "list")[1].splitlines()[1].split()[8:10] == ["disabled", "-"]
    assert run("schedule", "enable", "nightly")[1] == "schedule 'nightly' enabled\n"
    code, out, _ = run("schedule", "run", "nightly")
    assert code == 0 and int(out) in {info.id for info in run.jobs()}

    assert run("audit")[1] == f"no audit entries in schema {run.schema}\n"
    code, out, _ = run("tables")
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[0] == "TABLE"
    assert any(line.split()[0] == "jobs" for line in lines[1:])
    assert lines[-2] == "oldest running: none"
    assert lines[-1].startswith(f"oldest ready: job {kept}, for ")  # visible the longest


async def test_serve_worker_keeps_a_liveness_file_while_it_serves(
    postgres_dsn: str, postgres_schema: str, tmp_path: Path
) -> None:
    """``worker --liveness-file``: there once the pools claim, gone once they stopped."""
    await migrate_cmd.migrate(postgres_dsn, postgres_schema)
    path = tmp_path / "live"
    config = trioqueue.WorkerConfig(handler=record, queue="work")
    async with trio.open_nursery() as nursery:
        serve = functools.partial(
            worker_cmd.serve_worker, postgres_dsn, postgres_schema, liveness_file=path
        )
        await nursery.start(serve, config)
        assert path.exists()  # touched when the health tasks began, before the pools
        nursery.cancel_scope.cancel()
    assert not path.exists()


def test_enqueue_depends_on_and_show_tree(run: Cli) -> None:
    """docs/protocol.rst §21: ``enqueue --depends-on`` (repeated) and ``show ID --tree``,
    which lists both directions with their states; an unknown dependency writes nothing."""
    first = run("enqueue", "q", "1")[1].strip()
    second = run("enqueue", "other", "2")[1].strip()
    code, out, err = run(
        "enqueue", "q", "3", "--depends-on", first, "--depends-on", second,
        "--on-dependency-failure", "cancel",
    )  # fmt: skip
    assert code == 0, err
    joined = out.strip()
    code, out, err = run("show", joined, "--tree")
    assert code == 0, err
    assert f"  waiting   for jobs {first}, {second}\n" in out
    assert out.endswith(
        f"  depends on\n    job {first} in queue q: ready\n"
        f"    job {second} in queue other: ready\n  dependents  (none)\n"
    )
    code, out, _ = run("show", first, "--tree")
    assert out.endswith(
        f"  depends on  (none)\n  dependents\n    job {joined} in queue q: scheduled\n"
    )
    code, _, err = run("enqueue", "q", "4", "--depends-on", "999999")
    assert code == 2
    assert err == (
        "trioqueue enqueue: error: depends_on names no job with id 999999; nothing was enqueued\n"
    )
    assert len(run.jobs()) == 3
