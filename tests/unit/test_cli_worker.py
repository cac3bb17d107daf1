"""``trioqueue worker`` as a deployable app: several queues, a mapping module, the resources
hook and every WorkerConfig field as an option (docs/cli.rst, ``worker``).

Parsing and validation run through :func:`trioqueue.cli.main` where an error is the point
(one line on stderr, the exit code), and through ``worker_configs`` where the configs built
are. The pools themselves run on the memory backend with trio's MockClock.
"""

from __future__ import annotations

import functools
import io
import json
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

import trioqueue
from trioqueue.cli._commands import build_parser, main
from trioqueue.cli._commands.worker import (
    WORKER_OPTIONS,
    supervise_worker,
    worker_configs,
    worker_connections,
)
from trioqueue.cli._commands.worker_imports import ReportedResources

UNREACHABLE = "postgresql://nobody@127.0.0.1:1/none"
HERE = "tests.unit.test_cli_worker"

# -- what the command imports ------------------------------------------------------------

HANDLED: list[tuple[str, Any, object]] = []


async def send_email(payload: Any, ctx: trioqueue.JobContext) -> None:
    HANDLED.append((ctx.queue, payload, ctx.resources))


async def make_report(payload: Any, ctx: trioqueue.JobContext) -> None:
    HANDLED.append((ctx.queue, payload, ctx.resources))


async def on_failed(job: trioqueue.Job, *details: object) -> None:
    """A hook for any ``--on-job-...`` option (each passes the job, some a detail)."""


def fixed_delay(attempt: int) -> float:
    """A backoff for ``--backoff``."""
    return 7.0


HANDLERS = {"emails": send_email, "reports": make_report}
CONFIGS = {
    "emails": trioqueue.WorkerConfig(handler=send_email, concurrency=8),
    "reports": trioqueue.WorkerConfig(handler=make_report, queue="reports", batch_size=5),
}
MIXED = {"emails": send_email, "reports": trioqueue.WorkerConfig(handler=make_report)}
EMPTY: dict[str, Any] = {}
NOT_A_MAPPING = ["emails"]
BAD_VALUE = {"emails": 42}
BAD_KEY = {1: send_email}
OTHER_QUEUE = {"emails": trioqueue.WorkerConfig(handler=send_email, queue="reports")}
NOT_CALLABLE = 3

HOOK_LOG: list[str] = []


@asynccontextmanager
async def resources() -> AsyncIterator[str]:
    """The ``--resources`` hook: yields what handlers get as ``ctx.resources``."""
    HOOK_LOG.append("enter")
    try:
        yield "client"
    finally:
        HOOK_LOG.append("exit")


@asynccontextmanager
async def failing_resources() -> AsyncIterator[str]:
    await connect()
    yield "never"  # pragma: no cover


async def connect() -> None:
    raise ConnectionRefusedError("the HTTP service is down")


@asynccontextmanager
async def failing_exit() -> AsyncIterator[str]:
    try:
        yield "client"
    finally:  # closing fails however the pools stopped (a signal cancels them)
        raise RuntimeError("could not flush the client")


def configs_of(*argv: str) -> list[trioqueue.WorkerConfig]:
    return worker_configs(build_parser().parse_args(["worker", *argv]))


# -- which pools ---------------------------------------------------------------------------


def test_todays_form_is_one_pool() -> None:
    [config] = configs_of(f"{HERE}:send_email", "--queue", "emails", "--concurrency", "3")
    assert (config.handler, config.queue, config.concurrency) == (send_email, "emails", 3)


def test_repeated_queue_pairs_are_one_pool_each_with_the_options() -> None:
    made = configs_of(
        "--queue", f"emails={HERE}:send_email",
        "--queue", f"reports={HERE}:make_report",
        "--concurrency", "4", "--poll-interval", "0.5",
    )  # fmt: skip
    assert [(c.queue, c.handler, c.concurrency, c.poll_interval) for c in made] == [
        ("emails", send_email, 4, 0.5),
        ("reports", make_report, 4, 0.5),
    ]


def test_a_mapping_of_handlers_is_one_pool_per_queue_with_the_options() -> None:
    made = configs_of(f"{HERE}:HANDLERS", "--batch-size", "2")
    assert [(c.queue, c.handler, c.batch_size) for c in made] == [
        ("emails", send_email, 2),
        ("reports", make_report, 2),
    ]


def test_a_mapping_of_configs_is_used_as_it_is_under_its_keys() -> None:
    """The options apply to handlers only; a config's default queue becomes its key."""
    made = configs_of(f"{HERE}:CONFIGS", "--concurrency", "2")
    assert made == [
        trioqueue.WorkerConfig(handler=send_email, queue="emails", concurrency=8),
        trioqueue.WorkerConfig(handler=make_report, queue="reports", batch_size=5),
    ]


def test_forms_combine() -> None:
    made = configs_of(f"{HERE}:MIXED", "--queue", f"alerts={HERE}:send_email", "--concurrency", "5")
    assert [(c.queue, c.concurrency) for c in made] == [
        ("emails", 5),
        ("reports", 1),
        ("alerts", 5),
    ]


# -- what it refuses -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            [f"{HERE}:send_email", "--queue", "a", "--queue", f"a={HERE}:make_report"],
            "queue 'a' is given twice: one pool per queue",
            id="plain-and-pair",
        ),
        pytest.param(
            ["--queue", f"a={HERE}:send_email", "--queue", f"a={HERE}:send_email"],
            "queue 'a' is given twice: one pool per queue",
            id="two-pairs",
        ),
        pytest.param(
            [f"{HERE}:HANDLERS", "--queue", f"emails={HERE}:send_email"],
            "queue 'emails' is given twice: one pool per queue",
            id="mapping-and-pair",
        ),
        pytest.param(
            [f"{HERE}:NOT_A_MAPPING"],
            f"{HERE}:NOT_A_MAPPING must be a mapping of queue names to handlers or "
            "WorkerConfigs, not list",
            id="not-a-mapping",
        ),
        pytest.param(
            [f"{HERE}:send_email"],
            f"{HERE}:send_email is a handler: name its queue, {HERE}:send_email --queue Q",
            id="handler-without-queue",
        ),
        pytest.param(
            [f"{HERE}:EMPTY"], f"{HERE}:EMPTY is an empty mapping: no queue to work on", id="empty"
        ),
        pytest.param(
            [f"{HERE}:BAD_VALUE"],
            f"{HERE}:BAD_VALUE['emails'] must be a handler (callable) or a WorkerConfig, not int",
            id="bad-value",
        ),
        pytest.param(
            [f"{HERE}:BAD_KEY"],
            f"{HERE}:BAD_KEY: queue names must be strings, got 1",
            id="bad-key",
        ),
        pytest.param(
            [f"{HERE}:OTHER_QUEUE"],
            f"{HERE}:OTHER_QUEUE['emails'] is a WorkerConfig for queue 'reports': make the "
            "key and its queue agree",
            id="config-for-another-queue",
        ),
        pytest.param(
            ["--queue", "a=tests.no_such_module:handler"],
            "cannot import module 'tests.no_such_module': No module named 'tests.no_such_module'",
            id="pair-does-not-import",
        ),
        pytest.param(
            ["--queue", f"a={HERE}:missing"],
            f"module '{HERE}' has no attribute 'missing'",
            id="pair-attribute-missing",
        ),
        pytest.param(
            ["--queue", "a=nocolon"],
            "handler must look like MODULE:HANDLER, got 'nocolon'",
            id="pair-malformed",
        ),
        pytest.param(
            [f"{HERE}:send_email", "--queue", "a", "--queue", "b"],
            "--queue a and --queue b: MODULE:HANDLER works on one queue; give each other "
            "queue its handler, --queue Q=MODULE:HANDLER",
            id="two-plain-queues",
        ),
        pytest.param(
            ["--queue", "a"], "--queue a needs a handler: MODULE:HANDLER --queue a", id="no-handler"
        ),
        pytest.param(
            [],
            "nothing to work on: give MODULE:HANDLER --queue Q, --queue Q=MODULE:HANDLER "
            "(repeatable), or MODULE:MAPPING",
            id="nothing",
        ),
        pytest.param(
            [f"{HERE}:HANDLERS", "--backoff", f"{HERE}:fixed_delay", "--backoff-cap", "9"],
            "--backoff and --backoff-* exclude each other: the policy, or its numbers",
            id="two-backoffs",
        ),
        pytest.param(
            [f"{HERE}:HANDLERS", "--on-job-failed", f"{HERE}"],
            f"--on-job-failed must look like MODULE:ATTR, got '{HERE}'",
            id="hook-malformed",
        ),
        pytest.param(
            [f"{HERE}:HANDLERS", "--resources", f"{HERE}:NOT_CALLABLE"],
            f"--resources {HERE}:NOT_CALLABLE must be an async context manager or a function "
            "returning one, not int",
            id="resources-not-callable",
        ),
        pytest.param(
            [f"{HERE}:HANDLERS", "--resources", "tests.no_such_module:hook"],
            "cannot import module 'tests.no_such_module'",
            id="resources-does-not-import",
        ),
    ],
)
def test_bad_pools_are_one_line_and_exit_2_before_connecting(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--dsn", UNREACHABLE, "worker", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"trioqueue worker: error: {message}")
    assert err.count("\n") == 1


def test_config_problems_of_several_pools_name_their_queue(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--dsn", UNREACHABLE, "worker", f"{HERE}:HANDLERS", "--poll-interval", "0"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "invalid worker configuration (2 problems):" in err
    assert "  - queue 'emails': poll_interval must be" in err
    assert "  - queue 'reports': poll_interval must be" in err


# -- every WorkerConfig field as an option --------------------------------------------------


def test_every_config_field_has_its_option() -> None:
    [config] = configs_of(
        f"{HERE}:send_email", "--queue", "q",
        "--concurrency", "2", "--batch-size", "3",
        "--visibility-timeout", "40", "--heartbeat-interval", "auto",
        "--max-job-duration", "300", "--poll-interval", "0.25",
        "--shutdown-grace", "9", "--blocking-threshold", "0.2", "--transactional",
        "--backoff-initial", "2", "--backoff-base", "3", "--backoff-cap", "60",
        "--backoff-jitter", "0",
        "--on-job-claimed", f"{HERE}:on_failed", "--on-job-unavailable", f"{HERE}:on_failed",
        "--on-job-succeeded", f"{HERE}:on_failed", "--on-job-failed", f"{HERE}:on_failed",
        "--on-job-retry", f"{HERE}:on_failed", "--max-snoozes", "7",
    )  # fmt: skip
    assert config == trioqueue.WorkerConfig(
        handler=send_email, queue="q", concurrency=2, batch_size=3, visibility_timeout=40,
        heartbeat_interval="auto", max_job_duration=300, poll_interval=0.25,
        shutdown_grace=9, blocking_threshold=0.2, transactional=True,
        backoff=trioqueue.ExponentialBackoff(initial=2, base=3, cap=60, jitter=0),
        on_job_claimed=on_failed, on_job_unavailable=on_failed, on_job_succeeded=on_failed,
        on_job_failed=on_failed, on_job_retry=on_failed, max_snoozes=7,
    )  # fmt: skip
    fields = set(trioqueue.WorkerConfig.__dataclass_fields__) - {"handler", "queue"}
    options = {a.dest for a in _worker_parser()._actions}
    # Every field but the deprecated max_attempts; backoff also as --backoff MODULE:ATTR.
    assert fields - options == {"max_attempts"}


def test_batch_handler_names_batch_handlers() -> None:
    """``--batch-handler``: every handler named is a batch handler (docs/protocol.rst §20)."""
    configs = configs_of(
        "--queue", f"a={HERE}:send_email", "--queue", f"b={HERE}:make_report",
        "--batch-handler", "--batch-size", "50",
    )  # fmt: skip
    assert [(c.queue, c.handler, c.batch_handler, c.batch_size) for c in configs] == [
        ("a", None, send_email, 50),
        ("b", None, make_report, 50),
    ]


def _worker_parser() -> Any:
    subparsers: Any = next(a for a in build_parser()._actions if a.dest == "command")
    return subparsers.choices["worker"]


def sync_handler(payload: Any, ctx: trioqueue.JobContext) -> None:
    """A plain ``def`` handler: it runs in a worker thread."""


def test_defaults_are_the_configs_own_but_concurrency_10_for_an_async_handler() -> None:
    """WorkerConfig says concurrency 1; the command line runs ten batches of an async
    handler at once, and keeps one for a plain def handler (a thread each)."""
    [config] = configs_of(f"{HERE}:send_email", "--queue", "q")
    assert config == trioqueue.WorkerConfig(handler=send_email, queue="q", concurrency=10)
    [config] = configs_of(f"{HERE}:sync_handler", "--queue", "q")
    assert config == trioqueue.WorkerConfig(handler=sync_handler, queue="q")
    assert config.concurrency == 1
    [config] = configs_of(f"{HERE}:send_email", "--queue", "q", "--concurrency", "1")
    assert config.concurrency == 1
    assert [c.concurrency for c in configs_of(f"{HERE}:HANDLERS")] == [10, 10]
    assert [c.concurrency for c in configs_of(f"{HERE}:CONFIGS")] == [8, 1]  # as they are


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:g}"


def test_worker_help_shows_every_default_and_the_config_agrees(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each option of ``worker --help`` that takes a value, or switches something on, says
    its default; a pool option's is WorkerConfig's own (concurrency aside, see above)."""
    actions = {a.dest: a for a in _worker_parser()._actions}
    defaults = trioqueue.WorkerConfig.__dataclass_fields__
    for field in WORKER_OPTIONS:
        if field != "concurrency":
            expected = f"(default: {_shown(defaults[field].default)})"
            assert expected in actions[field].help, field
    assert "(default: 10 for an async handler, 1 for a plain def one" in (
        actions["concurrency"].help
    )
    undocumented = {
        dest for dest, action in actions.items() if "default" not in (action.help or "")
    }
    assert undocumented == {"help", "verbose", "handler", "queue", "resources"}
    with pytest.raises(SystemExit):
        main(["worker", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "lease length (default: 60)" in shown
    assert "--log-format {text,json} " in shown and "(default: text)" in shown


def test_backoff_names_a_policy() -> None:
    [config] = configs_of(f"{HERE}:send_email", "--queue", "q", "--backoff", f"{HERE}:fixed_delay")
    assert config.backoff is fixed_delay


def test_a_hook_must_be_async(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--dsn", UNREACHABLE, "worker", f"{HERE}:HANDLERS"]
    assert main([*argv, "--on-job-failed", f"{HERE}:fixed_delay"]) == 2
    assert "on_job_failed must be an async function" in capsys.readouterr().err


def test_the_connection_budget_covers_every_pool() -> None:
    plain = trioqueue.WorkerConfig(handler=send_email, queue="a")
    tx = trioqueue.transactional_worker_config(4, send_email, queue="b", batch_size=2)
    assert worker_connections(plain) == 6
    assert worker_connections([plain, tx]) == 6 + 6 + 4 * 2


# -- the pools, the hook and the signals ---------------------------------------------------


async def test_several_pools_share_the_hook_until_the_signal(
    autojump_clock: trio.abc.Clock,
) -> None:
    """What ``worker MAPPING --resources HOOK`` runs, on the memory backend: both queues'
    jobs see the hook's value; after SIGTERM the pools stop, then the hook exits."""
    HANDLED.clear()
    HOOK_LOG.clear()
    configs = configs_of(f"{HERE}:HANDLERS", "--resources", f"{HERE}:resources")
    hook = ReportedResources(f"{HERE}:resources")
    send, signals = trio.open_memory_channel[int](0)
    out = io.StringIO()
    async with trioqueue.open_memory() as backend:
        await backend.enqueue("emails", {"to": "a@example.com"})
        await backend.enqueue("reports", {"month": 11})

        async def serve(configs: list[trioqueue.WorkerConfig], **kwargs: Any) -> None:
            await trioqueue.run_workers(backend, configs, resources=hook, **kwargs)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                functools.partial(supervise_worker, serve, configs, signals, out, where="memory")
            )
            with trio.fail_after(60):
                while len(HANDLED) < 2:
                    await trio.sleep(0.1)
            await send.send(signal.SIGTERM)
        infos = await backend.list_jobs()
    assert sorted(HANDLED) == [
        ("emails", {"to": "a@example.com"}, "client"),
        ("reports", {"month": 11}, "client"),
    ]
    assert HOOK_LOG == ["enter", "exit"]
    assert [info.status for info in infos] == ["succeeded", "succeeded"]
    assert out.getvalue().splitlines() == [
        "worker pools on queues 'emails', 'reports' (memory); Ctrl-C to stop",
        "SIGTERM: shutting down; handlers may finish for up to 30s (signal again to stop at once)",
        "worker pools stopped",
    ]


@pytest.mark.parametrize(
    ("hook", "message"),
    [
        pytest.param(
            "failing_resources",
            "failed starting: ConnectionRefusedError: the HTTP service is down (at ",
            id="entry",
        ),
        pytest.param(
            "failing_exit",
            "failed stopping: RuntimeError: could not flush the client (at ",
            id="exit",
        ),
    ],
)
def test_a_failing_hook_is_one_line_and_exit_1(
    hook: str, message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command line's own serve_worker, but on the memory backend: a hook failing on
    entry starts no pool; one failing on exit is reported once every pool has stopped."""
    claims: list[int] = []

    async def serve_worker(
        dsn: str,
        schema: str,
        configs: Any,
        *,
        resources: Any,
        stop_now: trio.Event,
        task_status: trio.TaskStatus[None],
        **_: object,
    ) -> None:
        async with trioqueue.open_memory() as backend:
            try:
                async with trio.open_nursery() as nursery:
                    run = functools.partial(trioqueue.run_workers, resources=resources)
                    await nursery.start(run, backend, configs)
                    task_status.started()
                    nursery.cancel_scope.cancel()  # as a signal would
            finally:
                claims.append(backend.statistics()["calls"]["claim"])

    monkeypatch.setattr("trioqueue.cli._commands.worker.serve_worker", serve_worker)
    argv = ["--dsn", UNREACHABLE, "worker", f"{HERE}:HANDLERS", "--resources", f"{HERE}:{hook}"]
    assert main([*argv, "--max-job-duration", "60"]) == 1  # no warning: stderr is the error
    err = capsys.readouterr().err
    assert err.startswith(f"trioqueue worker: error: --resources {HERE}:{hook} {message}")
    assert "test_cli_worker.py, line " in err
    assert err.count("\n") == 1
    assert (claims == [0]) is (hook == "failing_resources")


# -- usage errors under --log-format json -------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--log-format", "json", "--concurrency", "x"], "argument --concurrency"),
        (["--log-format=json", "--no-such-option"], "unrecognized arguments: --no-such-option"),
        (["--concurrency", "0x", "--log-form", "json"], "argument --concurrency"),  # abbreviated
        (["--log-format", "json", "--log-format", "xml"], "argument --log-format"),
    ],
)
def test_usage_errors_under_log_format_json_are_one_json_record(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log collector reading stderr as JSON gets the usage error as a record too."""
    with pytest.raises(SystemExit) as exit:
        main(["--dsn", UNREACHABLE, "worker", f"{HERE}:send_email", "--queue", "q", *argv])
    assert exit.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    [line] = err.splitlines()
    record = json.loads(line)
    assert (record["level"], record["logger"], record["event"]) == (
        "ERROR",
        "trioqueue.cli",
        "error",
    )
    assert record["message"].startswith("trioqueue")  # the (sub)command whose usage it is
    assert says in record["message"]


def test_usage_errors_without_log_format_json_stay_argparses_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv in (["--concurrency", "x"], ["--log-format", "xml"], ["--", "--log-format", "json"]):
        with pytest.raises(SystemExit) as exit:
            main(["--dsn", UNREACHABLE, "worker", f"{HERE}:send_email", "--queue", "q", *argv])
        assert exit.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("usage: trioqueue "), argv
        assert ": error: " in err.splitlines()[-1]


def test_worker_maintenance_interval_option(capsys: pytest.CaptureFixture[str]) -> None:
    """``--maintenance-interval S|off`` (docs/howto/retention.rst): 60 s when not given."""
    [config] = configs_of(f"{HERE}:send_email", "--queue", "q")
    assert config.maintenance_interval == 60
    for value, expected in (("0.5", 0.5), ("off", None)):
        [config] = configs_of(f"{HERE}:send_email", "--queue", "q", "--maintenance-interval", value)
        assert config.maintenance_interval == expected
    argv = ["--dsn", UNREACHABLE, "worker", f"{HERE}:send_email", "--queue", "q"]
    with pytest.raises(SystemExit):
        main([*argv, "--maintenance-interval", "never"])
    assert "not a number or 'off': 'never'" in capsys.readouterr().err
    # Listed with the other problems, before connecting.
    assert main([*argv, "--maintenance-interval", "0", "--poll-interval", "0"]) == 2
    err = capsys.readouterr().err
    assert "maintenance_interval must be" in err and "poll_interval must be" in err
