"""Testing your own handler with ``trioqueue.testing.run_handler``.

The handler under test sends a newsletter through the mailer it gets as
``ctx.resources``, one recipient at a time. It skips the recipients an earlier
attempt already reached, so a job whose lease was lost can run again without
sending anything twice; these tests prove it, and what a cancel and
``max_job_duration`` do to it. Every test runs under pytest-trio's
``autojump_clock``: the minutes of leases take no real time.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from trioqueue.testing import cancel_job, lose_lease, run_handler

RECIPIENTS = [f"user{n}@example.com" for n in range(6)]


class FakeMailer:
    """Stands in for the mail client: each mail takes 12 s, and is remembered."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def send(self, to: str) -> None:
        await trio.sleep(12)
        self.sent.append(to)


async def send_newsletter(payload: dict[str, Any], ctx: Any) -> int:
    """The handler under test."""
    mailer: FakeMailer = ctx.resources
    recipients = payload["to"]
    for done, to in enumerate(recipients, start=1):
        if to not in mailer.sent:  # an earlier attempt reached this one
            await mailer.send(to)
        ctx.report_progress(done / len(recipients))
    return len(recipients)


async def test_it_sends_every_mail(autojump_clock: object) -> None:
    mailer = FakeMailer()
    run = await run_handler(send_newsletter, {"to": RECIPIENTS}, resources=mailer)
    assert run.job.status == "succeeded"
    assert run.job.result == 6
    assert mailer.sent == RECIPIENTS
    assert run.progress[-1] == (72.0, 1.0)  # (seconds since the start, value)


async def test_a_lost_lease_sends_no_mail_twice(autojump_clock: object) -> None:
    mailer = FakeMailer()
    run = await run_handler(
        send_newsletter,
        {"to": RECIPIENTS},
        resources=mailer,
        max_attempts=2,
        faults=[lose_lease(at=15)],  # no renewal gets through after 15 s
    )
    first, second = run.attempts
    # The last renewal went through at 10 s: the lease (30 s) ends at 40 s, and
    # the worker stops the handler then, writing nothing.
    assert first.outcome == "unavailable"
    assert first.cancelled_at == 40.0
    assert second.outcome == "succeeded"
    assert sorted(mailer.sent) == sorted(RECIPIENTS)  # each one exactly once


async def test_a_cancel_stops_it_for_good(autojump_clock: object) -> None:
    mailer = FakeMailer()
    run = await run_handler(
        send_newsletter,
        {"to": RECIPIENTS},
        resources=mailer,
        max_attempts=3,
        faults=[cancel_job(at=30)],
    )
    assert run.cancelled_at == 30.0
    assert mailer.sent == RECIPIENTS[:2]  # the third mail was under way
    assert run.job.status == "failed"
    assert len(run.attempts) == 1
    assert run.job.last_error is not None
    assert run.job.last_error.startswith("cancelled")


async def test_a_slow_run_fails_at_max_job_duration(autojump_clock: object) -> None:
    mailer = FakeMailer()
    run = await run_handler(
        send_newsletter, {"to": RECIPIENTS}, resources=mailer, max_job_duration=50
    )
    assert run.outcome == "failed"
    assert run.cancelled_at == 50.0
    assert run.job.last_error is not None
    assert "max_job_duration" in run.job.last_error
    assert len(mailer.sent) == 4


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
