"""``trioqueue retention`` and ``trioqueue prune`` against a real server, in a schema of
the test's own (docs/cli.rst): a smoke test of the whole path, from the command line
through the backend's statements (the commands' rules are tested on the memory backend,
tests/unit/test_cli_retention.py)."""

from __future__ import annotations

import re

import pytest
import trio

import trioqueue
from trioqueue._types import Ack
from trioqueue.cli import main

pytestmark = pytest.mark.postgres


async def seed(dsn: str, schema: str) -> None:
    """A migrated schema with, finished three days ago: two jobs of ``mail`` and one of
    ``sms``; and a job of ``mail`` still ready."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=2) as backend:
        await backend.migrate()
        for queue, n in (("mail", 2), ("sms", 1)):
            await backend.enqueue_many(queue, list(range(n)))
            claimed = await backend.claim(queue, limit=n, worker_id="w", visibility_timeout=60)
            await backend.ack([Ack(c.job.id, c.job.claim_seq) for c in claimed])
        await backend.enqueue("mail", "waits")
        async with backend.acquire() as conn:
            await conn.execute(
                f"UPDATE \"{schema}\".jobs SET finished_at = now() - interval '3 days' "
                "WHERE finished_at IS NOT NULL"
            )


async def left(dsn: str, schema: str) -> list[tuple[str, str]]:
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        return sorted((j.queue, j.status) for j in await backend.list_jobs(limit=100))


def test_set_show_and_prune_by_policy_then_by_age(
    postgres_dsn: str, postgres_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    trio.run(seed, postgres_dsn, postgres_schema)
    db = ["--dsn", postgres_dsn, "--schema", postgres_schema]

    assert main([*db, "retention", "set", "mail", "--succeeded", "1d", "--failed", "2d"]) == 0
    assert main([*db, "retention", "audit", "forever"]) == 0
    capsys.readouterr()
    assert main([*db, "retention"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[:3] == [
        "POLICY      SUCCEEDED  FAILED",
        "default     7d         30d",
        "queue mail  1d         2d",
    ]
    assert shown[4:] == [
        "audit log: kept forever",
        "maintainer: none (no pool has taken the lease)",
    ]

    assert main([*db, "prune", "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "QUEUE  STATUS     WOULD DELETE",
        "mail   succeeded  2",
        "",
        "would prune 2 jobs and 0 audit entries past their retention",
        "dry run: nothing was deleted",
    ]
    assert main([*db, "prune", "--older-than", "2d", "--dry-run"]) == 0
    assert "would prune 3 jobs finished more than 2d ago" in capsys.readouterr().out
    assert len(trio.run(left, postgres_dsn, postgres_schema)) == 4  # nothing deleted

    assert main([*db, "prune", "--batch-size", "1"]) == 0
    out = capsys.readouterr().out
    assert "mail   succeeded  2" in out
    # Batches of one: at least two, and one more if the second could not tell it was last.
    assert re.search(r"^pruned 2 jobs and 0 audit entries in [23] batches$", out, re.M)
    assert trio.run(left, postgres_dsn, postgres_schema) == [
        ("mail", "ready"),
        ("sms", "succeeded"),
    ]

    # sms is on the default (7 days): only the older prune, by age alone, takes it.
    assert main([*db, "prune", "--older-than", "2d"]) == 0
    assert capsys.readouterr().out == "pruned 1 job finished more than 2d ago, in 1 batch\n"
    assert trio.run(left, postgres_dsn, postgres_schema) == [("mail", "ready")]

    assert main([*db, "retention", "clear", "mail"]) == 0
    assert "queue mail" not in capsys.readouterr().out
