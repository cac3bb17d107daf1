"""Browser tests: Debian's chromium driven by Playwright against a live dashboard.

Playwright's own browser download cannot run everywhere (no network in CI), so the tests
launch the system's chromium (``/usr/bin/chromium``, ``apt-get install chromium``; .ci/run
installs it) through ``executable_path``. Without it the tests skip, except under CI (the
``CI`` variable set), where a missing browser is an error: the browser tests must not
vanish from a green CI run.

Every test keeps a full-page screenshot of each page it visits in the artifacts folder:
``$TRIOQUEUE_ARTIFACTS/browser`` if that variable is set, else ``tests/browser/artifacts``
(ignored by git). Screenshot names are unique across the session; a failing test also
leaves ``FAILED-<test>.png`` of the page as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ._server import DashboardServer

CHROMIUM = Path("/usr/bin/chromium")
#: Headless, and nothing that reaches out to the network on its own (there is none here,
#: and a browser waiting for it makes tests slow and flaky).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: How long ``expect`` waits for the page to show something, in milliseconds: long enough
#: for a few heartbeats and a server-sent event on a loaded machine.
EXPECT_TIMEOUT_MS = 10_000
VIEWPORT = {"width": 1280, "height": 800}

ARTIFACTS = (
    Path(os.environ["TRIOQUEUE_ARTIFACTS"]) / "browser"
    if os.environ.get("TRIOQUEUE_ARTIFACTS")
    else Path(__file__).parent / "artifacts"
)


def _unavailable(reason: str) -> None:
    """Skip, or under CI fail: CI must run the browser tests, not skip them quietly."""
    if os.environ.get("CI"):
        pytest.fail(f"browser tests cannot run under CI: {reason}", pytrace=False)
    pytest.skip(reason)


@contextlib.contextmanager
def _plain_asyncio_loops() -> Iterator[None]:
    """Let Playwright make a plain asyncio loop on this thread.

    Importing trio_asyncio (the PostgreSQL backend does) installs its own event loop policy,
    whose new loops Playwright's dispatcher cannot run. trio_asyncio honours a policy set
    on a thread outside trio, so this thread gets asyncio's own until the block ends.
    """
    asyncio.set_event_loop_policy(asyncio.DefaultEventLoopPolicy())
    try:
        yield
    finally:
        asyncio.set_event_loop_policy(None)


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    """One headless chromium for the browser tests (package scope: it is gone before
    the other tests run, so its asyncio loop never meets their trio runs)."""
    if not CHROMIUM.exists():
        _unavailable(f"{CHROMIUM} not found (apt-get install chromium)")
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError as exc:
        _unavailable(f"playwright is not installed (the dev extra has it): {exc}")
    expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    with _plain_asyncio_loops(), sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """The screenshot folder, emptied of last session's screenshots."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("*.png"):
        old.unlink()
    return ARTIFACTS


_taken: set[str] = set()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    # Remember each phase's report on the item, so the page fixture knows a test failed.
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture
def page(
    browser: Any,
    artifacts: Path,
    request: pytest.FixtureRequest,
    serve_dashboard: Callable[..., DashboardServer],
) -> Iterator[Any]:
    """A fresh page (own cookies) that fails the test on a JavaScript error.

    It asks for ``serve_dashboard`` only to be closed before the servers stop: an open
    event stream would hold up their graceful shutdown.
    """
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(EXPECT_TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    call_report = getattr(request.node, "report_call", None)
    if call_report is not None and call_report.failed:
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
        page.screenshot(path=str(artifacts / f"FAILED-{name}.png"), full_page=True)
    # Leave the dashboard first: once (in about 1 run of 20) context.close() hung for good
    # while the page still had its event stream open and a reload under way.
    _leave(page)
    context.close()
    assert errors == [], f"JavaScript errors on the page: {errors}"


def _leave(page: Any) -> None:
    """Go to about:blank. A reload the page started on its own (an event said the job
    changed) can interrupt that navigation: then go again, once it is done."""
    for attempt in range(3):
        try:
            page.goto("about:blank")
            return
        except Exception as exc:  # playwright's Error; its module loads only with a browser
            if "interrupted by another navigation" not in str(exc) or attempt == 2:
                raise


@pytest.fixture
def screenshot(page: Any, artifacts: Path) -> Callable[[str], Path]:
    """``screenshot("overview")`` saves the page, full length, as ``overview.png``."""

    def take(name: str) -> Path:
        assert name not in _taken, f"screenshot {name!r} was already taken in this session"
        _taken.add(name)
        path = artifacts / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


@pytest.fixture
def serve_dashboard(
    postgres_dsn: str, postgres_schema: str
) -> Iterator[Callable[..., DashboardServer]]:
    """Start dashboards on the test's schema: ``serve_dashboard(pool=True, token="t")``.

    Keyword arguments other than ``pool``, ``concurrency`` and ``database`` (serve
    ``create_multi_app`` with the schema as that database) go to the app. Every
    server started is stopped when the test ends.
    """
    servers: list[DashboardServer] = []

    def start(
        *,
        pool: bool = False,
        concurrency: int = 2,
        database: str | None = None,
        **app_options: Any,
    ) -> DashboardServer:
        server = DashboardServer(
            postgres_dsn,
            postgres_schema,
            pool=pool,
            concurrency=concurrency,
            app_options=app_options,
            database=database,
        )
        server.__enter__()
        servers.append(server)
        return server

    yield start
    for server in reversed(servers):
        server.stop()


@pytest.fixture
def dashboard(serve_dashboard: Callable[..., DashboardServer]) -> DashboardServer:
    """The dashboard with a worker pool on ``WORK_QUEUE``, no token, not read-only."""
    return serve_dashboard(pool=True)
