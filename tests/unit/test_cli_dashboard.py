"""``trioqueue dashboard`` and the demo's dashboard (docs/cli.rst)."""

from __future__ import annotations

import io
import signal

import httpx
import pytest
import trio

import trioqueue
from trioqueue.cli import _dashboard, _demo
from trioqueue.cli._commands import build_parser, main


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.1", "::"])
def test_public_bind_without_token_exits_2_before_connecting(
    host: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(_dashboard.TOKEN_ENV, raising=False)
    # The DSN names no server: the refusal must come before any connection attempt.
    code = main(["--dsn", "postgresql://nobody@192.0.2.1:1/x", "dashboard", "--host", host])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert err.startswith("trioqueue dashboard: error: refusing to serve the dashboard on")
    assert "TRIOQUEUE_DASHBOARD_TOKEN" in err


@pytest.mark.parametrize("port", ["-1", "65536", "http"])
def test_bad_port_is_a_usage_error(port: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["dashboard", "--port", port])
    assert exit_.value.code == 2


def test_demo_dashboard_options() -> None:
    default = build_parser().parse_args(["demo"])
    assert (default.dashboard, default.dashboard_port) == (True, 8080)
    off = build_parser().parse_args(["demo", "--no-dashboard", "--dashboard-port", "9000"])
    assert default.keep_dashboard is False
    assert build_parser().parse_args(["demo", "--keep-dashboard"]).keep_dashboard is True
    assert (off.dashboard, off.dashboard_port) == (False, 9000)


async def test_start_serves_and_says_where(backend: trioqueue.MemoryBackend) -> None:
    await backend.enqueue("mail", 1)
    async with trio.open_nursery() as nursery:
        address = await _dashboard.start(nursery, backend, host="127.0.0.1", port=0)
        async with httpx.AsyncClient() as c:
            r = await c.get(f"{address}/api/queues")
        nursery.cancel_scope.cancel()
    assert address.startswith("http://127.0.0.1:")
    assert r.json()[0]["queue"] == "mail"


async def test_a_taken_port_is_refused_or_replaced(backend: trioqueue.MemoryBackend) -> None:
    [taken] = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = taken.socket.getsockname()[1]
    async with taken, trio.open_nursery() as nursery:
        with pytest.raises(ValueError, match="in use"):
            await _dashboard.start(nursery, backend, host="127.0.0.1", port=port)
        address = await _dashboard.start(
            nursery, backend, host="127.0.0.1", port=port, fallback=True
        )
        nursery.cancel_scope.cancel()
    assert address.startswith("http://127.0.0.1:")
    assert not address.endswith(f":{port}")


async def test_demo_prints_the_dashboard_address() -> None:
    out = io.StringIO()
    options = _demo.DemoOptions(backend="memory", speed=20, live=False, dashboard_port=0)
    code = await _demo.run_demo(options, out)
    first = out.getvalue().splitlines()[0]
    assert code == 0
    assert first.startswith("dashboard: http://127.0.0.1:")


class Lines(io.StringIO):
    """Output that tells when a line containing ``wanted`` was written."""

    def __init__(self, wanted: str) -> None:
        super().__init__()
        self.wanted = wanted
        self.seen = trio.Event()

    def write(self, text: str) -> int:
        if self.wanted in text:
            self.seen.set()
        return super().write(text)


async def test_demo_keeps_the_dashboard_up_until_ctrl_c() -> None:
    out = Lines("stays up")
    options = _demo.DemoOptions(
        backend="memory", speed=20, live=False, dashboard_port=0, keep_dashboard=True
    )
    codes: list[int] = []

    async def demo() -> None:
        codes.append(await _demo.run_demo(options, out))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(demo)
        await out.seen.wait()  # the summary is out, and the demo did not return
        address = out.getvalue().splitlines()[0].split()[1]
        async with httpx.AsyncClient() as c:
            jobs = (await c.get(f"{address}/api/jobs")).json()
        assert codes == []
        signal.raise_signal(signal.SIGINT)  # Ctrl-C
    assert codes == [0]
    assert jobs["total"] == 8
    assert all(j["status"] in ("succeeded", "failed") for j in jobs["jobs"])
    assert "demo OK" in out.getvalue()
