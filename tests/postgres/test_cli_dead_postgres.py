"""``trioqueue dead`` and ``dead redrive`` on a real server (docs/cli.rst): the count, the
breakdown, paging by id with the printed cursor, a time filter, and a redrive counted first
and done with ``--yes``; and ``jobs --after`` with the cursor it prints."""

from __future__ import annotations

import pytest

from .test_cli_postgres import Cli, run  # noqa: F401  (the fixture)

pytestmark = pytest.mark.postgres


def _cancelled(cli: Cli, n: int) -> list[str]:
    """``n`` jobs of queue q cancelled before they ran: dead letters with no error type."""
    ids = [cli("enqueue", "q", f'"job {i}"')[1].strip() for i in range(n)]
    for job_id in ids:
        assert cli("cancel", job_id)[0] == 0
    return ids


def test_dead_counts_lists_pages_and_redrives(run: Cli) -> None:  # noqa: F811
    ids = _cancelled(run, 3)
    kept = run("enqueue", "other", '"waits"')[1].strip()
    code, out, err = run("dead", "--limit", "2")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "3 dead letter(s) match every dead letter"
    assert lines[3].split() == ["q", "3"]
    assert lines[6].split() == ["-", "3"]  # a cancellation has no error type
    assert lines[-1] == f"next page: --after {ids[1]}"  # newest first: ids[2], ids[1]
    code, out, _ = run("dead", "--limit", "2", "--after", ids[1])
    assert [line.split()[0] for line in out.splitlines()[-1:]] == [ids[0]]
    assert run("dead", "--before", "2000-01-01T00:00Z")[1] == (
        "no dead letters match --before 2000-01-01T00:00:00+00:00\n"
    )
    code, _, err = run("dead", "redrive", "--cancelled-only", "--since", "1h")
    assert code == 1
    assert "3 dead letter(s) match --since " in err
    assert err.endswith(" --cancelled-only; nothing done: add --yes to redrive them\n")
    code, out, _ = run("dead", "redrive", "--cancelled-only", "--yes", "--batch-size", "2")
    assert (code, out) == (
        0,
        "3 dead letter(s) matching --cancelled-only redriven (back on their queues)\n",
    )
    assert sorted(info.status for info in run.jobs()) == ["ready"] * 4
    assert kept in {str(info.id) for info in run.jobs(queue="other")}


def test_jobs_pages_by_the_cursor_it_prints(run: Cli) -> None:  # noqa: F811
    ids = [run("enqueue", "q", str(n))[1].strip() for n in range(3)]
    code, out, _ = run("jobs", "--limit", "2")
    lines = out.splitlines()
    assert [line.split()[0] for line in lines[1:3]] == ids[:2]
    cursor = lines[-1].removeprefix("next page: --after ")
    code, out, _ = run("jobs", "--limit", "2", "--after", cursor)
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[1:]] == ids[2:]
