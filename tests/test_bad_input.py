"""Bad input is refused up front with a clear message, and nothing is written (issue 7).

Pools run on the memory backend under trio's MockClock; the command line runs in a
subprocess where the bytes of its arguments matter.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from trioqueue import JobContext

ROOT = Path(__file__).resolve().parents[1]


async def noop_handler(payload: Any, ctx: JobContext) -> None:
    pass


# -- the command line's bytes (item 6) ---------------------------------------------------


def test_cli_worker_refuses_a_queue_of_argv_bytes_that_are_not_utf8() -> None:
    """``--queue $'\\xff'``: Python passes the byte on as U+DCFF (surrogateescape), which no
    backend can store. Refused before connecting (the DSN here would refuse, exit 1)."""
    argv: list[str | bytes] = [sys.executable, "-m", "trioqueue", "worker"]
    argv += [
        "tests.test_bad_input:noop_handler",
        "--queue",
        b"\xff",
        "--dsn",
        "postgresql://127.0.0.1:1/x",
    ]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert "queue must not contain bytes that are not valid UTF-8" in done.stderr
