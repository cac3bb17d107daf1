"""Serve Prometheus metrics from your own program (docs/metrics.rst)."""

import socket
import sys
import urllib.request

# [start serve]
import trio

import trioqueue
from trioqueue.metrics import serve_metrics


async def work(dsn: str, schema: str = "trioqueue", port: int = 9108) -> None:
    async with (
        trioqueue.open_postgres(dsn, schema=schema) as backend,
        serve_metrics(backend, port=port) as served,
    ):
        await trioqueue.run_worker_pool(backend, config, observer=served.observer)
        # [end serve]


async def make_report(payload, ctx: trioqueue.JobContext) -> None:
    pass


config = trioqueue.WorkerConfig(
    handler=make_report, queue="reports", max_job_duration=60
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def scrape(port: int) -> str:
    with urllib.request.urlopen(
        f"http://127.0.0.1:{port}/metrics", timeout=10
    ) as answer:
        return str(answer.read().decode())


async def main(dsn: str, schema: str = "trioqueue") -> None:
    async with trioqueue.open_postgres(dsn, schema=schema) as backend:
        await backend.migrate()
        job_id = await backend.enqueue("reports", {"month": "2026-11"})
        port = free_port()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(work, dsn, schema, port)
            assert (await backend.wait_for(job_id, timeout=30)).status == "succeeded"
            with trio.fail_after(30):
                while True:  # the outcome is counted once the worker has written it
                    try:
                        page = await trio.to_thread.run_sync(scrape, port)
                    except OSError:  # not serving yet
                        page = ""
                    if 'outcome="succeeded",queue="reports"} 1.0' in page:
                        break
                    await trio.sleep(0.1)
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(work, sys.argv[1])
