"""The ``trioqueue`` command line: parsing, the demo, and the terminal helpers it draws with.

``main`` calls ``trio.run`` itself, so these tests are plain ``def`` functions (pytest-trio's
trio_mode leaves sync tests alone). The demo runs on the real clock: it *is* the behaviour
under test, sped up twentyfold so it takes well under two seconds.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import trio

import trioqueue
from trioqueue._backends.postgres.embedded import EmbeddedPostgresError, embedded_postgres
from trioqueue._backends.postgres.sqlstate import backend_error
from trioqueue._types import PoolBeat, PoolRegistration
from trioqueue.cli import _demo
from trioqueue.cli._commands import build_parser, main
from trioqueue.cli._commands.common import LISTEN_DSN_ENV, database_hint
from trioqueue.cli._commands.enqueue import duplicate_news
from trioqueue.cli._commands.jobs import LIST_PREVIEW
from trioqueue.cli._commands.queue import flow_text, limits_text
from trioqueue.cli._commands.status import clock_text, status_table, workers_table
from trioqueue.cli._commands.worker import supervise_worker
from trioqueue.cli._terminal import CSI, LiveBlock, clip, format_age, format_table, progress_bar

ROOT = Path(__file__).resolve().parents[2]


# -- the demo -----------------------------------------------------------------------------


def test_demo_on_memory_backend_ends_as_expected(capsys: pytest.CaptureFixture[str]) -> None:
    """Every job ends as designed: the flaky one on its retry, the export cancelled mid-run."""
    code = main(["demo", "--backend", "memory", "--speed", "20", "--no-live"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "export-customer-archive: cancel requested at stored progress" in out
    assert "export-customer-archive: failed as expected, last_error: cancelled" in out
    assert "invoice-sync: attempt 1 failed, retry in" in out
    assert "invoice-sync: succeeded on attempt 2, after a retry, as expected" in out
    assert "demo OK: every job ended as expected" in out


def test_demo_puts_the_library_loggers_back(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo routes ``trioqueue`` logs to its view only while it runs."""
    logger = logging.getLogger("trioqueue")
    level, handlers = logger.level, list(logger.handlers)
    assert (
        main(["demo", "--backend", "memory", "--jobs", "3", "--speed", "40", "--no-live", "-v"])
        == 0
    )
    assert (logger.level, logger.handlers) == (level, handlers)
    assert "info trioqueue.pool: worker pool" in capsys.readouterr().out  # -v shows info lines


def _info(
    job_id: int, status: trioqueue.JobStatus, attempts: int, error: str | None
) -> trioqueue.JobInfo:
    now = datetime.now(UTC)
    return trioqueue.JobInfo(
        id=job_id, queue="demo", payload={}, status=status, attempts=attempts, max_attempts=3,
        priority=0, progress=None, last_error=error, created_at=now, finished_at=now,
    )  # fmt: skip


def test_demo_verdict_names_every_job_that_ended_wrongly() -> None:
    """Exit 1 with one line per job that ended other than designed."""
    specs = {1: _demo.EXPORT, 2: _demo.FLAKY, 3: _demo.REPORTS[0]}
    jobs = {
        1: _info(1, "succeeded", 1, None),  # should have been cancelled
        2: _info(2, "succeeded", 1, None),  # should have needed a retry
        3: _info(3, "succeeded", 1, None),
    }
    lines, code = _demo.summary(_demo.Result(specs, jobs, 1.0, timed_out=False), speed=1.0)
    assert code == 1
    assert "demo FAILED: 2 job(s) did not end as expected:" in lines
    assert any("job 1 export-customer-archive" in line and "cancelled" in line for line in lines)
    assert any("job 2 invoice-sync" in line and "attempt 1" in line for line in lines)


def test_demo_verdict_reports_a_timeout() -> None:
    specs = {3: _demo.REPORTS[0]}
    jobs = {3: _info(3, "running", 1, None)}
    lines, code = _demo.summary(_demo.Result(specs, jobs, 9.0, timed_out=True), speed=1.0)
    assert code == 1
    assert "demo FAILED: jobs still unfinished after 9.0s" in lines


# -- parsing ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        ([], "the following arguments are required: COMMAND"),
        (["demo", "--backend", "sqlite"], "invalid choice: 'sqlite'"),
        (["enqueue", "q"], "the following arguments are required: JSON"),
        (["cancel", "seven"], "not a job id: 'seven'"),
        (["worker", "m:h", "--queue", "q", "--heartbeat-interval", "often"], "not a number"),
        (["jobs", "--status", "lost"], "invalid choice: 'lost'"),
        (["jobs", "--limit", "0"], "must be between 1 and 10000"),
        (["demo", "--speed", "0"], "must be above 0"),
        (["demo", "--speed", "nan"], "must be above 0"),
        (["demo", "--jobs", "2"], "must be between 3 and 100"),
        (["demo", "--jobs", "many"], "not a whole number"),
        (["queue", "pause"], "the following arguments are required: QUEUE"),
        (["queue", "drain", "q"], "invalid choice: 'drain'"),
        (["queue", "limits", "q", "--max-running", "lots"], "not a number or 'none': 'lots'"),
        (["queue", "limits", "q", "--max-running", "2.5"], "not a number or 'none': '2.5'"),
        (["queue", "limits", "q", "--max-per-second", "inf"], "must be finite or 'none'"),
    ],
)
def test_usage_errors_exit_2_with_a_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: trioqueue")
    assert message in err


def test_help_lists_the_demo(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    assert "demo" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("command", "schema"), [("demo", "trioqueue_demo"), ("status", "trioqueue")]
)
def test_schema_help_names_the_schema_the_command_uses(
    command: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"the schema holding trioqueue's tables (default: {schema})" in help_text


def test_python_dash_m_runs_the_same_command_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "trioqueue", "demo", "--help"],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: trioqueue demo")


@pytest.mark.parametrize(
    "argv",
    [
        ["migrate"],
        ["status"],
        ["jobs"],
        ["cancel", "1"],
        ["retry", "1"],
        ["delete", "1"],
        ["enqueue", "q", "{}"],
        ["queue", "pause", "q"],
        ["queue", "resume", "q"],
        ["queue", "limits", "q", "--max-running", "none"],
    ],
)
def test_database_commands_need_a_dsn(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TRIOQUEUE_DSN", raising=False)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "no database given: pass --dsn" in err
    assert "TRIOQUEUE_DSN" in err


def test_bad_json_is_refused_before_connecting(capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing is written: the payload is parsed before any connection is opened."""
    code = main(["--dsn", "postgresql://nobody@127.0.0.1:1/none", "enqueue", "q", "{oops"])
    assert code == 2
    err = capsys.readouterr().err
    assert "the payload is not valid JSON" in err
    assert "nothing was enqueued" in err


def _enqueue_recorded(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Stand in for the database: the payloads ``enqueue`` would write, in order."""
    written: list[Any] = []

    async def enqueue_reporting(
        dsn: str, schema: str, queue: str, payload: Any, options: dict[str, Any]
    ) -> trioqueue.Enqueued:
        written.append(payload)
        return trioqueue.Enqueued(7, "added")

    monkeypatch.setattr("trioqueue.cli._commands.enqueue.enqueue_reporting", enqueue_reporting)
    return written


@pytest.mark.parametrize(
    ("outcome", "news"),
    [
        ("kept", "; not enqueued again"),
        ("replaced", "; it waited, and now has this payload, priority and delay"),
        ("debounced", "; it waited, and now runs after the delay"),
        ("running", " and is running; left unchanged, not enqueued again"),
    ],
)
def test_enqueue_says_what_befell_the_duplicate(
    outcome: trioqueue.EnqueueOutcome, news: str
) -> None:
    done = trioqueue.Enqueued(7, outcome)
    assert duplicate_news(done, "k") == f"job 7 already exists with dedup key 'k'{news}"


def test_enqueue_reads_the_payload_from_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    written = _enqueue_recorded(monkeypatch)
    monkeypatch.setattr("sys.stdin", io.StringIO('{"to": "a@example.org", "n": [1, 2]}\n'))
    assert main(["--dsn", UNREACHABLE, "enqueue", "q", "-"]) == 0
    assert written == [{"to": "a@example.org", "n": [1, 2]}]
    assert capsys.readouterr().out == "7\n"


def test_enqueue_reads_the_payload_from_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    written = _enqueue_recorded(monkeypatch)
    path = tmp_path / "payload.json"
    path.write_text('["@not-a-path", {"deep": {"er": true}}]', encoding="utf-8")
    assert main(["--dsn", UNREACHABLE, "enqueue", "q", f"@{path}"]) == 0
    assert written == [["@not-a-path", {"deep": {"er": True}}]]
    assert capsys.readouterr().out == "7\n"


@pytest.mark.parametrize(
    ("arg", "stdin", "file_text", "message"),
    [
        pytest.param("-", "", None, "the payload on stdin is empty", id="empty-stdin"),
        pytest.param("-", " \n", None, "the payload on stdin is empty", id="blank-stdin"),
        pytest.param("-", "{oops", None, "the payload is not valid JSON", id="bad-stdin"),
        pytest.param("-", "[" * 100_000, None, "nests too deeply", id="deep-stdin"),
        pytest.param("@missing.json", "", None, "No such file or directory", id="no-file"),
        pytest.param("@payload.json", "", "{oops", "the payload is not valid JSON", id="bad-file"),
        pytest.param("@payload.json", "", "", "the payload is not valid JSON", id="empty-file"),
        pytest.param("@payload.json", "", "[" * 100_000, "nests too deeply", id="deep-file"),
        pytest.param("@", "", None, "cannot read the payload file ''", id="no-path"),
        pytest.param("@.", "", None, "cannot read the payload file '.'", id="a-directory"),
    ],
)
def test_unusable_payload_input_is_one_line_and_exit_2(
    arg: str,
    stdin: str,
    file_text: str | None,
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Nothing is written: the payload is read and parsed before any connection."""
    written = _enqueue_recorded(monkeypatch)
    monkeypatch.chdir(tmp_path)
    if file_text is not None:
        (tmp_path / "payload.json").write_text(file_text, encoding="utf-8")
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(["--dsn", UNREACHABLE, "enqueue", "q", arg])
    err = capsys.readouterr().err
    assert code == 2
    assert written == []
    assert _one_line(err).startswith("trioqueue enqueue: error: ")
    assert message in err
    assert "nothing was enqueued" in err


def test_options_are_accepted_before_and_after_the_command() -> None:
    parser = build_parser()
    before = parser.parse_args(["--dsn", "A", "--schema", "s1", "jobs"])
    after = parser.parse_args(["jobs", "--dsn", "B", "--schema", "s2"])
    assert (before.dsn, before.schema) == ("A", "s1")
    assert (after.dsn, after.schema) == ("B", "s2")


def test_worker_reports_every_config_problem_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--dsn", "postgresql://nobody@127.0.0.1:1/none", "worker", "tests.unit.test_cli:noop"]
    argv += ["--queue", "q", "--concurrency", "0", "--visibility-timeout", "-1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "invalid worker configuration (" in err
    assert "concurrency" in err
    assert "visibility_timeout" in err


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("tests.unit.test_cli", "must look like MODULE:HANDLER"),
        ("tests.no_such_module:noop", "cannot import module 'tests.no_such_module'"),
        ("tests.unit.test_cli:missing", "has no attribute 'missing'"),
        ("tests.unit.test_cli:ROOT", "is not callable"),
    ],
)
def test_worker_names_a_handler_it_cannot_import(
    spec: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--dsn", "postgresql://x@127.0.0.1:1/x", "worker", spec, "--queue", "q"]) == 2
    assert message in capsys.readouterr().err


async def noop(payload: object, ctx: trioqueue.JobContext) -> None:
    """A handler for the worker tests."""


def test_demo_without_pgserver_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TRIOQUEUE_DSN", raising=False)
    monkeypatch.setitem(sys.modules, "pgserver", None)  # import fails
    monkeypatch.setitem(sys.modules, "pgserver.postgres_server", None)
    assert main(["demo", "--no-live"]) == 1
    err = capsys.readouterr().err
    assert "install the embedded extra: pip install -e '.[embedded]' from a checkout" in err


def test_embedded_server_without_pgserver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pgserver", None)
    monkeypatch.setitem(sys.modules, "pgserver.postgres_server", None)
    hint = r"pip install -e '\.\[embedded\]' from a checkout, or the wheel with \[embedded\]"
    with pytest.raises(EmbeddedPostgresError, match=hint), embedded_postgres():
        pass


def test_status_table_counts_every_state() -> None:
    counts = {"b": Counter({"ready": 2, "failed": 1}), "a": Counter({"running": 1})}
    assert status_table(counts, {"a": None, "b": 12.7}) == [
        "QUEUE  SCHEDULED  READY  RUNNING  SUCCEEDED  FAILED  TOTAL  OLDEST READY  FLOW",
        "a      0          0      1        0          0       1      -             -",
        "b      0          2      0        0          1       3      12s           -",
    ]


def test_status_table_marks_estimated_counts_as_the_dashboard_does() -> None:
    counts = {
        "big": Counter({"ready": 3, "succeeded": 1_234_567, "failed": 870}),
        "small": Counter({"succeeded": 2}),
    }
    assert status_table(counts, {}, {}, {"big"}) == [
        "QUEUE  SCHEDULED  READY  RUNNING  SUCCEEDED  FAILED  TOTAL  OLDEST READY  FLOW",
        "big    0          3      0        ~1.2M      ~870    ~1.2M  -             -",
        "small  0          0      0        2          0       2      -             -",
    ]


def test_queue_without_an_action_says_which_exist(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--dsn", "postgresql://nobody@127.0.0.1:1/none", "queue"]) == 2
    assert "choose an action: pause, resume or limits" in capsys.readouterr().err


def test_status_table_shows_each_queues_flow_control() -> None:
    counts = {"a": Counter({"ready": 1}), "b": Counter()}
    flow = {"a": "paused, max 5 running", "b": "max 2.5/s"}
    assert status_table(counts, {}, flow) == [
        "QUEUE  SCHEDULED  READY  RUNNING  SUCCEEDED  FAILED  TOTAL  OLDEST READY  FLOW",
        "a      0          1      0        0          0       1      -             paused, max 5 running",
        "b      0          0      0        0          0       0      -             max 2.5/s",
    ]


@pytest.mark.skipif(
    "paused" not in trioqueue.QueueStats.__dataclass_fields__,
    reason="QueueStats has no flow control fields yet",
)
def test_flow_and_limits_texts() -> None:
    def stats(**flow: Any) -> trioqueue.QueueStats:
        return trioqueue.QueueStats({}, None, **flow)

    assert [flow_text(s) for s in (None, stats(), stats(paused=True))] == ["-", "-", "paused"]
    limited = stats(paused=True, max_running=5, max_per_second=2.5)
    assert flow_text(limited) == "paused, max 5 running, max 2.5/s"
    assert flow_text(stats(max_per_second=10.0)) == "max 10/s"
    assert limits_text(limited) == "max_running 5, max_per_second 2.5, paused"
    assert limits_text(stats()) == "max_running none, max_per_second none"
    assert limits_text(None).startswith("max_running none, max_per_second none (")


def test_workers_table_shows_each_pool_its_last_beat_and_state() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)

    def pool(worker_id: str, beat_ago: float, stale: bool) -> trioqueue.WorkerInfo:
        return trioqueue.WorkerInfo(
            worker_id=worker_id,
            host="box",
            pid=41,
            queue="mail",
            concurrency=4,
            in_flight=3,
            abandoned_renewals=0,
            last_beat_at=now - timedelta(seconds=beat_ago),
            started_at=now - timedelta(hours=1),
            stale=stale,
        )

    # A beat "in the future" (clocks a little apart) shows as 0s.
    pools = [pool("box:41:aa", 2.5, False), pool("box:41:bb", 125, True), pool("c", -1, False)]
    assert workers_table(pools, now) == [
        "WORKER     HOST  PID  QUEUE  CONC  IN FLIGHT  LAST BEAT  STATE  CLOCK",
        "box:41:aa  box   41   mail   4     3          2s ago     live   -",
        "box:41:bb  box   41   mail   4     3          2m05s ago  stale  -",
        "c          box   41   mail   4     3          0s ago     live   -",
    ]


async def test_status_shows_each_pools_clock_and_flags_ahead_and_stopped() -> None:
    """The clock a pool's beat carried (docs/protocol.rst §8), read back from the memory
    backend's registry: its offset, and the dashboard's flags past the margins."""
    now = datetime.now(UTC)
    beats = {
        "a:1:sync": (0.0123, "in_sync"),
        "b:2:ahead": (2.5, "ahead"),
        "c:3:stopped": (75.0, "stopped"),
        "d:4:behind": (-60.0, "in_sync"),
        "e:5:new": (None, None),
    }
    async with trioqueue.open_memory() as backend:
        for worker_id, (skew, verdict) in beats.items():
            pool = PoolRegistration(worker_id, "box", 1, "mail", 1, 30.0)
            await backend.register_pool(pool)
            beat = PoolBeat(pool, 0, 0, clock_skew=skew, clock_verdict=verdict)
            await backend.renew([], visibility_timeout=60, beat=beat)
        pools = sorted(await backend.list_workers(), key=lambda p: p.worker_id)
    rows = workers_table(pools, now)
    assert rows[0].split()[-1] == "CLOCK"
    clocks = [row.split("live", 1)[1].strip() for row in rows[1:]]
    assert clocks == ["+0.012s", "+2.500s ahead", "+75.000s claims stopped", "-60.000s", "-"]


def test_the_clock_column_shows_a_stored_verdict_escaped() -> None:
    """A row another tool wrote may hold any verdict: shown as it is, escaped."""
    assert clock_text(1.0, "\x1b[2Jodd") == "+1.000s \x1b[2Jodd"
    assert clock_text(None, "ahead") == "- ahead"


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (None, "-"),
        (0.0, "0s"),
        (59.9, "59s"),
        (60.0, "1m00s"),
        (185.0, "3m05s"),
        (3600.0, "1h00m"),
        (7625.0, "2h07m"),
        (86400.0 * 3 + 3600 * 4 + 59, "3d04h"),
    ],
)
def test_format_age(seconds: float | None, shown: str) -> None:
    assert format_age(seconds) == shown


# -- terminal helpers ---------------------------------------------------------------------


def test_progress_bar() -> None:
    assert progress_bar(None, width=4) == "....    -"
    assert progress_bar(0.5, width=4) == "##..  50%"
    assert progress_bar(1.0, width=4, unicode=True) == "████ 100%"


def test_clip_marks_what_it_cut() -> None:
    assert clip("abcdef", 6) == "abcdef"
    assert clip("abcdefg", 6) == "abc..."


def test_format_table_aligns_columns() -> None:
    assert format_table(("A", "BB"), [("xyz", "1"), ("x", "22")]) == [
        "A    BB",
        "xyz  1",
        "x    22",
    ]


def test_live_block_redraws_in_place() -> None:
    """The second frame moves up over the first, clears every line, and blanks leftovers."""
    out = io.StringIO()
    with LiveBlock(out) as block:
        block.draw(["one", "two"])
        start = out.tell()
        block.draw(["three"])
    second = out.getvalue()[start:]
    assert second.startswith(f"{CSI}2A\r{CSI}2Kthree\n\r{CSI}2K\n")
    assert second.endswith(f"{CSI}?25h")  # the cursor is shown again


def test_ctrl_c_exits_130_also_inside_exception_groups(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """trio re-raises Ctrl-C from inside a nursery wrapped in an exception group."""

    def interrupted(*args: object) -> int:
        raise BaseExceptionGroup("from a nursery", [KeyboardInterrupt()])

    monkeypatch.setattr("trioqueue.cli._commands.demo.trio.run", interrupted)
    assert main(["demo", "--backend", "memory", "--no-live"]) == 130
    assert "interrupted" in capsys.readouterr().err


# -- one line, not a traceback (issue 7 items 13 and 14) ----------------------------------

UNREACHABLE = "postgresql://postgres@127.0.0.1:1/test"  # nothing listens on port 1


def _one_line(err: str) -> str:
    """The only line of ``err``; fails on a traceback or anything else printed."""
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err
    return err


def test_worker_with_the_database_down_prints_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The connection error, raised inside the worker's nursery, is one line (not a group)."""
    code = main(["--dsn", UNREACHABLE, "worker", "tests.unit.test_cli:noop", "--queue", "q"])
    err = _one_line(capsys.readouterr().err)
    assert code == 1
    assert err.startswith("trioqueue worker: error: PostgreSQL: ConnectionRefusedError")
    assert "is PostgreSQL running and listening at the host and port in the DSN?" in err


class PoolStopped(trioqueue.BackendError):
    """Stands for the error a pool stops with when its claims cannot succeed."""


def test_worker_stopped_by_its_pool_prints_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pool that stops with a non-transient claim error: one line, hint included, exit 1."""

    async def serve_worker(
        dsn: str,
        schema: str,
        config: trioqueue.WorkerConfig,
        *,
        listen_dsn: str | None,
        stop_now: trio.Event,
        task_status: trio.TaskStatus[None],
        **_: object,  # metrics, out
    ) -> None:
        task_status.started()
        await trio.lowlevel.checkpoint()
        cause = backend_error(asyncpg.UndefinedTableError('relation "s.jobs" does not exist'))
        raise PoolStopped(f"claims fail: {cause} ({cause.hint})", hint=cause.hint) from cause

    monkeypatch.setattr("trioqueue.cli._commands.worker.serve_worker", serve_worker)
    argv = [
        "--dsn",
        UNREACHABLE,
        "--schema",
        "s",
        "worker",
        "tests.unit.test_cli:noop",
        "--queue",
        "q",
    ]
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 1
    assert _one_line(captured.err) == (
        "trioqueue worker: error: claims fail: PostgreSQL: UndefinedTableError: "
        'relation "s.jobs" does not exist (has the schema been migrated? run '
        "`trioqueue migrate`, or backend.migrate())\n"
    )


@pytest.mark.parametrize(
    ("flag", "env", "expected"),
    [
        pytest.param([], None, None, id="neither"),
        pytest.param([], "postgresql://u@direct/db", "postgresql://u@direct/db", id="env"),
        pytest.param(
            ["--listen-dsn", "postgresql://u@flag/db"],
            "postgresql://u@direct/db",
            "postgresql://u@flag/db",
            id="flag-wins",
        ),
    ],
)
def test_worker_passes_the_listen_dsn_to_its_backend(
    monkeypatch: pytest.MonkeyPatch, flag: list[str], env: str | None, expected: str | None
) -> None:
    """``--listen-dsn``, else ``TRIOQUEUE_LISTEN_DSN``, reaches the backend the worker opens."""
    seen: list[str | None] = []

    async def serve_worker(
        dsn: str,
        schema: str,
        config: trioqueue.WorkerConfig,
        *,
        listen_dsn: str | None,
        stop_now: trio.Event,
        task_status: trio.TaskStatus[None],
        **_: object,  # metrics, out
    ) -> None:
        seen.append(listen_dsn)
        task_status.started()
        await trio.lowlevel.checkpoint()
        raise PoolStopped("stop here")

    monkeypatch.setattr("trioqueue.cli._commands.worker.serve_worker", serve_worker)
    if env is None:
        monkeypatch.delenv(LISTEN_DSN_ENV, raising=False)
    else:
        monkeypatch.setenv(LISTEN_DSN_ENV, env)
    argv = ["--dsn", UNREACHABLE, "worker", "tests.unit.test_cli:noop", "--queue", "q", *flag]
    assert main(argv) == 1
    assert seen == [expected]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        pytest.param([], None, id="none"),
        pytest.param(["--metrics-port", "9108"], ("127.0.0.1", 9108), id="loopback"),
        pytest.param(
            ["--metrics-port", "0", "--metrics-host", "0.0.0.0"], ("0.0.0.0", 0), id="any-host"
        ),
    ],
)
def test_worker_metrics_options_reach_the_server(
    monkeypatch: pytest.MonkeyPatch, flags: list[str], expected: tuple[str, int] | None
) -> None:
    """``--metrics-port`` (and ``--metrics-host``, loopback by default) reach ``serve_worker``."""
    seen: list[object] = []

    async def serve_worker(
        dsn: str,
        schema: str,
        config: trioqueue.WorkerConfig,
        *,
        metrics: tuple[str, int] | None,
        task_status: trio.TaskStatus[None],
        **_: object,
    ) -> None:
        seen.append(metrics)
        task_status.started()
        await trio.lowlevel.checkpoint()
        raise PoolStopped("stop here")

    monkeypatch.setattr("trioqueue.cli._commands.worker.serve_worker", serve_worker)
    argv = ["--dsn", UNREACHABLE, "worker", "tests.unit.test_cli:noop", "--queue", "q", *flags]
    assert main(argv) == 1
    assert seen == [expected]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            "import json\n\nLIMIT = 1 / 0\n",
            "ZeroDivisionError: division by zero (at {path}, line 3)",
        ),
        ('import json\n\nCONF = json.loads("{")\n', "JSONDecodeError: Expecting property name"),
        (
            "async def handler(payload, ctx)\n    pass\n",
            "SyntaxError: expected ':' ({name}.py, line 1)",
        ),
    ],
    ids=["raises", "raises-in-the-stdlib", "syntax-error"],
)
def test_worker_names_a_handler_module_that_fails_to_import(
    source: str,
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> None:
    """One line naming the module, the error and its line; exit 2, nothing connected."""
    name = f"failing_handlers_{request.node.callspec.id.replace('-', '_')}"
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    code = main(["--dsn", UNREACHABLE, "worker", f"{name}:handler", "--queue", "q"])
    err = _one_line(capsys.readouterr().err)
    assert code == 2
    assert f"trioqueue worker: error: cannot import module {name!r}: " in err
    assert message.format(path=path, name=name) in err
    if "stdlib" in request.node.callspec.id:
        assert f"(at {path}, line 3)" in err  # the user's line, not json's


def test_deeply_nested_json_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """60,000 levels: Python's parser gives up (RecursionError); exit 2 before connecting."""
    deep = "[" * 60_000 + "]" * 60_000
    code = main(["--dsn", UNREACHABLE, "enqueue", "q", deep])
    err = _one_line(capsys.readouterr().err)
    assert code == 2
    assert "the payload nests too deeply to be parsed" in err
    assert "nothing was enqueued" in err


@pytest.mark.parametrize(
    ("error", "hint"),
    [
        ("UndefinedTableError", "has the schema been migrated? run: trioqueue migrate --schema s"),
        ("InvalidSchemaNameError", "has the schema been migrated?"),
        ("UndefinedFunctionError", "has the schema been migrated?"),
        ("UndefinedColumnError", "has the schema been migrated?"),
        ("InvalidCatalogNameError", "check the database name in the DSN"),
        ("InvalidAuthorizationSpecificationError", "check the user name in the DSN"),
        ("InvalidPasswordError", "check the user name and password in the DSN"),
        ("DeadlockDetectedError", None),
    ],
)
def test_database_hints_follow_the_server_error(error: str, hint: str | None) -> None:
    """Only a missing object of ours suggests migrating; a missing database or role does not.
    The backend chooses the hint (``BackendError.hint``); the command line names the schema."""
    cause = getattr(asyncpg, error)("something does not exist")
    wrapped = trioqueue.BackendError("a backend call failed")
    wrapped.__cause__ = backend_error(cause)
    given = database_hint(wrapped, "s")
    if hint is None:
        assert given is None
    else:
        assert given is not None and hint in given
        assert ("migrate" in given) == ("migrated" in hint)


# -- what the backends tell the command line (issue 7 item 16) ----------------------------


async def test_memory_backend_reports_migrations_and_dedup_hits() -> None:
    """Like PostgreSQL's (tests/postgres/test_cli_postgres.py): nothing to migrate, dedup hits said."""
    async with trioqueue.open_memory() as backend:
        assert await backend.migrate() == []
        first = await backend.enqueue_deduplicated("q", 1, dedup_key="k")
        again = await backend.enqueue_deduplicated("q", 2, dedup_key="k")
        other = await backend.enqueue_deduplicated("q", 3, dedup_key="other")
        assert (first, again, other) == ((first[0], True), (first[0], False), (other[0], True))
        assert await backend.enqueue("q", 4, dedup_key="k") == first[0]
        assert len(await backend.list_jobs()) == 2


# -- stopping the worker (issue 7 item 15) ------------------------------------------------


async def test_second_signal_ends_the_grace_at_once(autojump_clock: trio.abc.Clock) -> None:
    """The first signal starts a 600 s grace; the second cancels the handler at once and
    releases its job uncharged, so the pool stops at the same (mock) instant."""
    started = trio.Event()

    async def handler(payload: object, ctx: trioqueue.JobContext) -> None:
        started.set()
        await trio.sleep_forever()

    config = trioqueue.WorkerConfig(
        handler=handler, queue="q", shutdown_grace=600, visibility_timeout=30,
        heartbeat_interval=5, max_job_duration=3600,
    )  # fmt: skip
    send, signals = trio.open_memory_channel[int](0)  # a send returns once it was taken
    out = io.StringIO()
    async with trioqueue.open_memory() as backend:
        job_id = await backend.enqueue("q", {})

        async def serve(config: trioqueue.WorkerConfig, **kwargs: Any) -> None:
            await trioqueue.run_worker_pool(backend, config, **kwargs)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                functools.partial(supervise_worker, serve, config, signals, out, where="memory")
            )
            await started.wait()
            await trio.sleep(10)  # the handler has been running a while
            await send.send(signal.SIGTERM)
            await trio.sleep(10)  # well into the grace
            assert (await backend.get_job(job_id)).status == "running"
            await send.send(signal.SIGINT)  # taken once the first was handled
            second_at = trio.current_time()
        stopped_at = trio.current_time()
        info = await backend.get_job(job_id)
    assert stopped_at == second_at  # not a timing: the pool took no mock time to stop
    assert (info.status, info.attempts, info.last_error) == ("ready", 0, None)
    assert out.getvalue().splitlines()[1:] == [
        "SIGTERM: shutting down; handlers may finish for up to 600s (signal again to stop at once)",
        "SIGINT again: stopping at once; running handlers are cancelled and their jobs "
        "released for another worker",
        "worker pool stopped",
    ]


async def test_later_signals_only_say_it_is_stopping(autojump_clock: trio.abc.Clock) -> None:
    config = trioqueue.WorkerConfig(
        handler=sleep_forever, queue="q", shutdown_grace=600, max_job_duration=3600
    )
    send, signals = trio.open_memory_channel[int](3)
    for signum in (signal.SIGTERM, signal.SIGTERM, signal.SIGTERM):
        send.send_nowait(signum)
    out = io.StringIO()
    async with trioqueue.open_memory() as backend:
        await backend.enqueue("q", {})

        async def serve(config: trioqueue.WorkerConfig, **kwargs: Any) -> None:
            await trioqueue.run_worker_pool(backend, config, **kwargs)

        assert await supervise_worker(serve, config, signals, out, where="memory")
        assert trio.current_time() < 600
    assert out.getvalue().splitlines()[-2:] == [
        "SIGTERM: already stopping at once; releasing the running jobs",
        "worker pool stopped",
    ]


async def sleep_forever(payload: object, ctx: trioqueue.JobContext) -> None:
    """A handler that runs until it is cancelled."""
    await trio.sleep_forever()


@pytest.mark.parametrize(
    ("status", "command", "said"),
    [
        ("succeeded", "retry", "job 2 has succeeded: only a failed job can be retried"),
        ("ready", "retry", "job 2 is ready: only a failed job can be retried"),
        ("scheduled", "retry", "job 2 is scheduled: only a failed job can be retried"),
        (
            "running",
            "delete",
            "job 2 is running: a running job cannot be deleted (cancel it first)",
        ),
    ],
)
def test_a_refused_operation_names_the_jobs_state_in_good_english(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    status: str,
    command: str,
    said: str,
) -> None:
    async def job_operation(dsn: str, schema: str, operation: object, job_id: int) -> Any:
        return False, status

    monkeypatch.setattr("trioqueue.cli._commands.job.job_operation", job_operation)
    assert main(["--dsn", "postgresql://x@127.0.0.1:1/x", command, "2"]) == 1
    assert capsys.readouterr().err == f"trioqueue {command}: error: {said}\n"


def test_cancel_reports_read_well_in_every_state() -> None:
    from trioqueue.cli._commands.job import cancel_report

    def job(status: str) -> trioqueue.JobInfo:
        return trioqueue.JobInfo(
            id=2, queue="q", payload=None, status=status, attempts=1, max_attempts=3,  # type: ignore[arg-type]
            priority=0, progress=None, last_error=None, created_at=datetime.now(UTC),
            finished_at=None,
        )  # fmt: skip

    assert cancel_report(2, False, job("succeeded")) == (
        "job 2 has already succeeded: nothing to cancel"
    )
    assert cancel_report(2, False, job("failed")) == "job 2 has already failed: nothing to cancel"
    assert cancel_report(2, True, job("succeeded")) == (
        "job 2: cancel requested, but by now it has succeeded"
    )
    assert cancel_report(2, True, job("ready")) == "job 2: cancel requested, but by now it is ready"


# -- jobs reads a prefix of each payload, show the whole job ------------------------------


class ListsRecorded:
    """The memory backend standing in for PostgreSQL (``trioqueue.open_postgres``), with a
    big job and a small one, recording what each ``list_jobs`` answered."""

    def __init__(self) -> None:
        self.listed: list[list[trioqueue.JobInfo]] = []
        self.ids: list[int] = []

    @contextlib.asynccontextmanager
    async def open(self, dsn: str, **options: Any) -> AsyncIterator[trioqueue.MemoryBackend]:
        async with trioqueue.open_memory() as backend:
            self.ids = [
                await backend.enqueue("big", {"blob": "x" * 1_000_000}),
                await backend.enqueue("small", {"n": 1}),
            ]
            real = backend.list_jobs

            async def list_jobs(*args: Any, **kwargs: Any) -> list[trioqueue.JobInfo]:
                self.listed.append(await real(*args, **kwargs))
                return self.listed[-1]

            backend.list_jobs = list_jobs  # type: ignore[method-assign]
            yield backend


def test_jobs_reads_only_a_prefix_of_each_payload_and_show_the_whole_job(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    database = ListsRecorded()
    monkeypatch.setattr(trioqueue, "open_postgres", database.open)
    assert main(["--dsn", "postgresql://x@127.0.0.1:1/x", "jobs"]) == 0
    [listed] = database.listed
    big, small = listed
    assert isinstance(big.payload, trioqueue.TruncatedText)
    assert len(big.payload) == LIST_PREVIEW and big.payload.length > 1_000_000
    assert small.payload == {"n": 1}
    _header, big_row, small_row = capsys.readouterr().out.splitlines()
    assert big_row.endswith('{"blob": "xxxxxxxxxxxxxxxxxxxxxxxxxxx...')  # cut, and says so
    assert small_row.endswith('{"n":1}')

    assert main(["--dsn", "postgresql://x@127.0.0.1:1/x", "show", str(database.ids[0])]) == 0
    assert f'  payload   {{"blob": "{"x" * 1_000_000}"}}' in capsys.readouterr().out.splitlines()
