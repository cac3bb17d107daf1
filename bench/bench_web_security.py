"""The dashboard's HTTP defences, measured (issue 22; docs/dashboard.rst, "Safety rules").

    python bench/bench_web_security.py bodies    # server RSS under 4 parallel 100 MB posts
    python bench/bench_web_security.py slow      # 100 drip-fed POST /login: open after 15 s?
    python bench/bench_web_security.py logins    # wrong tokens per second, and until a 429

Each run starts the dashboard (memory backend, a token, hypercorn via trioqueue.web.serve)
in a child process of its own and talks to it over TCP. Put another checkout first on
PYTHONPATH to measure it the same way (the numbers before a change and after).
"""

from __future__ import annotations

import argparse
import http.client
import os
import resource
import socket
import subprocess
import sys
import threading
import time
from collections import Counter

TOKEN = "k9Vf2L0sQe7XbT4wZpR1mA8nY3cD6hJ"
MB = 1 << 20


def serve(port: int) -> None:
    import trio

    import trioqueue
    from trioqueue.web import create_app, serve

    async def run() -> None:
        async with trioqueue.open_memory() as backend:
            await serve(create_app(backend, token=TOKEN), host="127.0.0.1", port=port)

    trio.run(run)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server() -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    child = subprocess.Popen([sys.executable, __file__, "serve", "--port", str(port)])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return child, port
        except OSError:
            time.sleep(0.1)
    child.kill()
    raise SystemExit("the dashboard did not start")


def stop(child: subprocess.Popen[bytes]) -> None:
    child.kill()
    child.wait()


def rss_mb(pid: int) -> float:
    """The process's resident memory, from Linux's /proc (as bench_memory.py reads it)."""
    with open(f"/proc/{pid}/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / MB


# -- bodies ---------------------------------------------------------------------------------


def big_post(port: int, size: int, chunked: bool, results: list[str]) -> None:
    """POST /login with ``size`` bytes, sent 1 MiB at a time; the status it got."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.putrequest("POST", "/login")
        conn.putheader("Origin", f"http://127.0.0.1:{port}")
        conn.putheader("Content-Type", "application/x-www-form-urlencoded")
        if chunked:
            conn.putheader("Transfer-Encoding", "chunked")
        else:
            conn.putheader("Content-Length", str(size))
        conn.endheaders()
        block = b"token=" + b"x" * (MB - 6)
        for _ in range(size // MB):
            conn.send(b"%x\r\n%s\r\n" % (len(block), block) if chunked else block)
        if chunked:
            conn.send(b"0\r\n\r\n")
    except OSError:
        pass  # the server stopped reading: its answer may be waiting all the same
    try:
        results.append(str(conn.getresponse().status))
    except (OSError, http.client.HTTPException) as exc:
        results.append(type(exc).__name__)
    finally:
        conn.close()


def bodies(args: argparse.Namespace) -> None:
    for chunked in (False, True):
        child, port = start_server()
        try:
            base = peak = rss_mb(child.pid)
            results: list[str] = []
            threads = [
                threading.Thread(target=big_post, args=(port, 100 * MB, chunked, results))
                for _ in range(4)
            ]
            for t in threads:
                t.start()
            while any(t.is_alive() for t in threads):
                peak = max(peak, rss_mb(child.pid))
                time.sleep(0.05)
            peak = max(peak, rss_mb(child.pid))
        finally:
            stop(child)
        kind = "chunked" if chunked else "Content-Length"
        print(
            f"4 x 100 MB POST /login ({kind}): server RSS {base:.0f} MB -> peak {peak:.0f} MB;"
            f" answers {sorted(results)}"
        )


# -- slow bodies ------------------------------------------------------------------------------


def slow(args: argparse.Namespace) -> None:
    child, port = start_server()
    try:
        socks = []
        for _ in range(100):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(
                f"POST /login HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Origin: http://127.0.0.1:{port}\r\n"
                "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000"
                "\r\n\r\nt".encode()
            )
            s.setblocking(False)
            socks.append(s)
        answered: dict[int, str] = {}
        start = time.monotonic()
        while time.monotonic() - start < args.seconds:
            for n, s in enumerate(socks):
                if n not in answered:
                    answered.update(_drip(n, s))
            time.sleep(1.0)
    finally:
        stop(child)
    print(
        f"100 drip-fed POST /login (a byte a second): after {args.seconds:.0f} s,"
        f" {100 - len(answered)} still open; answers {Counter(answered.values()).most_common()}"
    )


def _drip(n: int, s: socket.socket) -> dict[int, str]:
    """One more byte, unless the server answered (its status line) or hung up."""
    try:
        data = s.recv(200)
    except BlockingIOError:
        s.send(b"o")
        return {}
    except OSError as exc:
        return {n: type(exc).__name__}
    return {n: data.split(b"\r\n", 1)[0].decode() if data else "closed"}


# -- logins -----------------------------------------------------------------------------------


def logins(args: argparse.Namespace) -> None:
    for how in ("bearer", "form"):
        child, port = start_server()  # a fresh throttle for each
        try:
            statuses, n, elapsed, first_429 = _guess(how, port, args.seconds)
        finally:
            stop(child)
        compared = statuses[401]
        print(
            f"wrong tokens by {how} for {elapsed:.1f} s: {n / elapsed:.0f} requests/s,"
            f" {compared} tokens compared ({compared / elapsed:.1f}/s), first 429 at"
            f" attempt {first_429}; {dict(statuses)}"
        )


def _guess(how: str, port: int, seconds: float) -> tuple[Counter[int], int, float, int | None]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    statuses: Counter[int] = Counter()
    first_429 = None
    start = time.monotonic()
    n = 0
    while time.monotonic() - start < seconds:
        n += 1
        try:
            status = _try_once(conn, how, port, n)
        except (OSError, http.client.HTTPException):
            conn.close()  # a refused body is not read: the server closes the connection
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            status = _try_once(conn, how, port, n)
        statuses[status] += 1
        if status == 429 and first_429 is None:
            first_429 = n
    conn.close()
    return statuses, n, time.monotonic() - start, first_429


def _try_once(conn: http.client.HTTPConnection, how: str, port: int, n: int) -> int:
    if how == "bearer":
        conn.request("GET", "/api/queues", headers={"Authorization": f"Bearer g{n}"})
    else:
        conn.request(
            "POST",
            "/login",
            body=f"token=g{n}",
            headers={
                "Origin": f"http://127.0.0.1:{port}",
                "Content-Type": "application/x-www-form-urlencoded",
            },
        )
    response = conn.getresponse()
    response.read()
    return response.status


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("serve").add_argument("--port", type=int, required=True)
    commands.add_parser("bodies")
    commands.add_parser("slow").add_argument("--seconds", type=float, default=15.0)
    commands.add_parser("logins").add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    if args.command == "serve":
        serve(args.port)
        return
    import trioqueue

    print(f"trioqueue from {os.path.dirname(trioqueue.__file__)}")
    {"bodies": bodies, "slow": slow, "logins": logins}[args.command](args)


if __name__ == "__main__":
    main()
