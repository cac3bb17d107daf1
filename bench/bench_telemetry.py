"""What tracing costs a worker (docs/telemetry.rst): no-op jobs per second through one pool
on the memory backend, and CPU per job, with OpenTelemetry absent, present without an SDK,
and present with the SDK recording every attempt (numbers, never asserts).

    python bench/bench_telemetry.py                  # every mode, default sizes
    python bench/bench_telemetry.py --jobs 20000 --modes absent sdk

Each mode runs in a process of its own, so that what one imports cannot speed or slow
another:

absent: the ``opentelemetry`` package cannot be imported (an import hook hides it), as
        without the ``otel`` extra: the pool asks once, when it starts, and spends nothing
        per job; the script checks that nothing of it was imported.
api:    the API is installed but no SDK configured (its default tracer provider): each
        attempt starts one span that does not record, and nothing more.
sdk:    the SDK's TracerProvider with a span processor that drops each span as it ends
        (the cost of recording: four spans per attempt, no exporter's).

Enqueues run inside no span, and so store no trace context; ``enqueue`` reports the cost
of ``enqueue_many`` with and without an active span in each mode.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from typing import Any

MODES = ("absent", "api", "sdk")
#: (batch size, concurrency): 100 job slots, one job per batch or ten.
RUNS = ((1, 100), (10, 10))

BLOCK = """
import sys

class _Block:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _Block())
"""


def child(mode: str, jobs: int, repeat: int) -> None:
    """Run every measurement of one mode in this process, printing a line per run: the
    best of ``repeat`` (the machine's other load only ever slows a run down)."""
    if mode == "absent":
        exec(BLOCK, {})  # the hook above, installed before anything imports
    import trio

    if mode == "sdk":
        from opentelemetry import trace
        from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

        class Drop(SpanProcessor):
            pass  # on_start and on_end do nothing: the spans are recorded, then dropped

        provider = TracerProvider()
        provider.add_span_processor(Drop())
        trace.set_tracer_provider(provider)
    for batch_size, concurrency in RUNS:
        results = [trio.run(throughput, jobs, batch_size, concurrency) for _ in range(repeat)]
        rate, cpu = max(r for r, _ in results), min(c for _, c in results)
        print(
            f"{mode:>6}  batch {batch_size:>2} x {concurrency:>3}: {rate:>8,.0f} jobs/s  "
            f"{cpu * 1e6:>6.1f} us CPU/job"
        )
    plain, in_span = trio.run(enqueue_cost, jobs, mode != "absent")
    spanned = "" if in_span is None else f", in a span {in_span * 1e6:.2f} us"
    print(f"{mode:>6}  enqueue_many: {plain * 1e6:.2f} us CPU/job{spanned}")
    if mode == "absent":
        loaded = [m for m in sys.modules if m.split(".")[0] == "opentelemetry"]
        print(f"{mode:>6}  opentelemetry modules imported: {len(loaded)}")


async def throughput(jobs: int, batch_size: int, concurrency: int) -> tuple[float, float]:
    import trio
    from _jobs import Countdown, noop

    import trioqueue

    finished = Countdown(jobs)
    async with trioqueue.open_memory(connections=concurrency + 4) as backend:
        for start in range(0, jobs, 1000):
            await backend.enqueue_many("bench", [None] * min(1000, jobs - start))
        config = trioqueue.WorkerConfig(
            handler=noop,
            queue="bench",
            concurrency=concurrency,
            batch_size=batch_size,
            on_job_succeeded=finished.on_job,
            max_job_duration=60,
        )
        async with trio.open_nursery() as nursery:
            began, cpu_began = time.perf_counter(), time.process_time()
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            await finished.done.wait()
            elapsed = time.perf_counter() - began
            cpu = time.process_time() - cpu_began
            nursery.cancel_scope.cancel()
    return jobs / elapsed, cpu / jobs


async def enqueue_cost(jobs: int, with_span: bool) -> tuple[float, float | None]:
    """CPU seconds per job of ``enqueue_many`` in batches of 100, outside any span and,
    when OpenTelemetry is there, inside one."""
    import trioqueue

    async def cost() -> float:
        async with trioqueue.open_memory() as backend:
            began = time.process_time()
            for _ in range(jobs // 100):
                await backend.enqueue_many("bench", [None] * 100)
            return (time.process_time() - began) / (jobs // 100 * 100)

    plain = await cost()
    if not with_span:
        return plain, None
    from opentelemetry import trace

    with trace.get_tracer("bench").start_as_current_span("request"):
        return plain, await cost()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, best shown")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.jobs, args.repeat)
        return
    print(f"{args.jobs:,} no-op jobs per run, one pool, memory backend, best of {args.repeat}")
    for mode in args.modes:
        command: list[Any] = [sys.executable, __file__, "--child", mode]
        command += ["--jobs", args.jobs, "--repeat", args.repeat]
        subprocess.run([str(c) for c in command], check=True)


if __name__ == "__main__":
    main()
