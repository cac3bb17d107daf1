"""Mount the dashboard in your own trio program (docs/dashboard.rst)."""

# [start embed]
import functools

import trio

import trioqueue
from trioqueue.web import create_app, serve


async def dashboard(dsn: str, schema: str = "trioqueue", port: int = 8080) -> None:
    async with trioqueue.open_postgres(dsn, schema=schema) as backend:
        app = create_app(backend, read_only=True)
        async with trio.open_nursery() as nursery:
            [address] = await nursery.start(functools.partial(serve, app, port=port))
            print("dashboard on", address)
            # your own tasks, workers, servers
            # [end embed]


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get_json(url: str) -> object:
    import json
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


async def main(dsn: str, schema: str = "trioqueue") -> None:
    async with trioqueue.open_postgres(dsn, schema=schema) as backend:
        await backend.migrate()
        job_id = await backend.enqueue("reports", {"month": "2026-11"})
    port = free_port()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(dashboard, dsn, schema, port)
        url = f"http://127.0.0.1:{port}/api/jobs/{job_id}"
        with trio.fail_after(30):
            while True:
                try:
                    job = await trio.to_thread.run_sync(get_json, url)
                    break
                except OSError:  # not serving yet
                    await trio.sleep(0.1)
        assert isinstance(job, dict)
        assert job["payload"] == {"month": "2026-11"}, job
        nursery.cancel_scope.cancel()


# [start run]
if __name__ == "__main__":
    trio.run(dashboard, "postgresql:///jobs")
# [end run]
