"""Instructions per job of the worker runtime, counted by valgrind (numbers, never asserts).

    python bench/bench_instructions.py                       # this checkout, batch 50 x 2
    python bench/bench_instructions.py --batch 10 --concurrency 10
    python bench/bench_instructions.py ../before .           # two checkouts side by side

The CPU time per job that ``bench_memory.py throughput`` prints moves by 10 to 30% from
run to run on a shared machine, more than most single changes to the runtime are worth.
The number of instructions a run executes barely moves, so this bench counts them
(valgrind's callgrind, with a fixed hash seed) for the same drain as ``throughput``:
no-op jobs through one pool on the memory backend. The count of a run includes starting
Python and enqueueing the jobs, so the bench runs ``--jobs`` and three times as many, each
once draining and once only enqueueing, and prints the difference of the differences per
job: the pool's claims, batches, handlers' tasks, acks and hooks, the memory backend's
claim and ack included. Fewer instructions is not always less time (memory and caches
count too), but a change that saves time saves instructions, and the count tells
before from after in one run of a few minutes where timings need many.

Needs valgrind (Debian: ``apt-get install valgrind``). The runs of each checkout go in
parallel, one per CPU; a run takes 30 to 90 s.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

#: What each run executes: a drain (``bench_memory.throughput``) or only the enqueueing.
_RUN = """
import sys
import trio
sys.path.insert(0, "bench")
import bench_memory
import trioqueue

mode, jobs, batch, concurrency = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

async def enqueue_only() -> None:
    async with trioqueue.open_memory(connections=concurrency + 4) as backend:
        await bench_memory._enqueue(backend, jobs)

if mode == "drain":
    trio.run(bench_memory.throughput, jobs, batch, concurrency)
else:
    trio.run(enqueue_only)
"""


def instructions(checkout: Path, mode: str, jobs: int, batch: int, concurrency: int) -> int:
    """The instructions one run of ``mode`` executes in ``checkout``."""
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        "-c",
        _RUN,
        mode,
        str(jobs),
        str(batch),
        str(concurrency),
    ]
    environment = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(checkout)}
    done = subprocess.run(
        command, cwd=checkout, env=environment, capture_output=True, text=True, check=False
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"the {mode} run in {checkout} failed:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def per_job(checkout: Path, jobs: int, batch: int, concurrency: int) -> float:
    """Instructions per drained job in ``checkout``, startup and enqueueing left out."""
    runs = [(mode, n) for mode in ("drain", "enqueue") for n in (jobs, 3 * jobs)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        counts = dict(
            zip(
                runs,
                pool.map(
                    lambda run: instructions(checkout, run[0], run[1], batch, concurrency), runs
                ),
                strict=True,
            )
        )
    drained = counts["drain", 3 * jobs] - counts["drain", jobs]
    enqueued = counts["enqueue", 3 * jobs] - counts["enqueue", jobs]
    return (drained - enqueued) / (2 * jobs)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("checkouts", nargs="*", type=Path, help="default: this checkout")
    parser.add_argument("--jobs", type=int, default=4000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("bench_instructions.py needs valgrind (Debian: apt-get install valgrind)")
    checkouts = args.checkouts or [Path(__file__).resolve().parent.parent]
    print(
        f"instructions per no-op job, batch {args.batch} x concurrency {args.concurrency} "
        f"(runs of {args.jobs:,} and {3 * args.jobs:,} jobs)"
    )
    for checkout in checkouts:
        count = per_job(checkout.resolve(), args.jobs, args.batch, args.concurrency)
        print(f"  {count:>10,.0f}  {checkout}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
