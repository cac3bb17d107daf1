"""Schedules on their edges (trioqueue/_core/schedule.py; docs/scheduling.rst).

The length limits are inclusive, each refusal says what was wrong in its own words, a tick
exactly at ``after`` is not "after" it, and the tick that ends a DST gap is the gap's first
instant, to the second, as a UTC datetime like every other tick.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from trioqueue._core.schedule import (
    MAX_CRON_LENGTH,
    MAX_TIMEZONE_LENGTH,
    Due,
    check_cron,
    check_timezone,
    next_tick,
    plan_advances,
    to_instant,
)

BERLIN = ZoneInfo("Europe/Berlin")
KOLKATA_TIME = timezone(timedelta(hours=5, minutes=30))
#: Europe/Berlin skips 02:00 to 03:00 local on 2026-03-29: the clocks jump at 01:00 UTC.
SPRING_FORWARD = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)


def _padded_cron(length: int) -> str:
    # Fields may be separated by any run of spaces; the limit counts the text as given.
    return "0 * * *" + " " * (length - len("0 * * * *") + 1) + "*"


def test_a_cron_text_of_exactly_the_longest_length_is_accepted() -> None:
    assert len(_padded_cron(MAX_CRON_LENGTH)) == MAX_CRON_LENGTH
    assert check_cron(_padded_cron(MAX_CRON_LENGTH)) == "0 * * * *"


def test_a_longer_cron_text_is_refused_with_both_lengths() -> None:
    with pytest.raises(ValueError, match=r"^cron must be at most 200 characters, not 201$"):
        check_cron(_padded_cron(MAX_CRON_LENGTH + 1))


def test_a_cron_of_another_type_is_refused_by_its_type_name() -> None:
    with pytest.raises(TypeError, match=r"^cron must be a str, not int$"):
        check_cron(5)


def test_a_timezone_of_another_type_is_refused_by_its_type_name() -> None:
    with pytest.raises(TypeError, match=r"^timezone must be a str, not bytes$"):
        check_timezone(b"UTC")


@pytest.mark.parametrize("name", ["", "x" * (MAX_TIMEZONE_LENGTH + 1), "Europe/\x00Berlin"])
def test_what_cannot_be_a_zone_name_is_refused_before_any_lookup(name: str) -> None:
    with pytest.raises(ValueError, match=r"^timezone must be an IANA time-zone name, not "):
        check_timezone(name)


def test_a_zone_name_of_exactly_the_longest_length_is_looked_up() -> None:
    with pytest.raises(ValueError, match=r"^unknown timezone 'x{64}'"):
        check_timezone("x" * MAX_TIMEZONE_LENGTH)


def test_a_naive_after_is_refused_in_words() -> None:
    with pytest.raises(ValueError, match=r"^after must be an aware datetime$"):
        next_tick("* * * * *", "UTC", datetime(2026, 1, 1))


def test_a_tick_exactly_at_after_is_not_after_it() -> None:
    on_the_hour = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
    assert next_tick("0 * * * *", "UTC", on_the_hour) == on_the_hour + timedelta(hours=1)


@pytest.mark.parametrize("minute", range(60))
def test_every_skipped_time_ticks_at_the_first_instant_after_the_gap(minute: int) -> None:
    tick = to_instant(datetime(2026, 3, 29, 2, minute), BERLIN)
    assert tick == SPRING_FORWARD
    assert tick.tzinfo is UTC


def test_a_schedule_whose_zone_is_unknown_here_is_skipped_by_name() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    due = [
        Due("nightly", "0 3 * * *", "Mars/Olympus_Mons", now),
        Due("hourly", "0 * * * *", "UTC", now),
    ]
    advances, problems = plan_advances(due, now)
    assert [a.name for a in advances] == ["hourly"]
    assert len(problems) == 1
    assert problems[0].startswith("schedule 'nightly' skipped: ")


def test_no_tick_before_the_end_of_the_calendar_is_a_value_error() -> None:
    # The next 29 February after 9999-03-01 would be in the year 10000: datetime ends first.
    after = datetime(9999, 3, 1, tzinfo=UTC)
    with pytest.raises(ValueError, match=r"^cron '0 0 29 2 \*' matches no date after 9999-03-01"):
        next_tick("0 0 29 2 *", "UTC", after)
    advances, problems = plan_advances([Due("leap", "0 0 29 2 *", "UTC", after)], after)
    assert advances == []
    assert problems[0].startswith("schedule 'leap' skipped: ValueError(")


@pytest.fixture
def host_in_kolkata(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local zone set to Asia/Kolkata (+05:30), then put back."""
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("host_in_kolkata")
def test_ticks_and_messages_are_in_utc_whatever_the_hosts_zone() -> None:
    assert datetime(2026, 1, 1, tzinfo=UTC).astimezone().utcoffset() == timedelta(hours=5.5)
    after = datetime(2026, 3, 29, 1, 30, tzinfo=KOLKATA_TIME)
    tick = next_tick("30 2 * * *", "Europe/Berlin", after)
    assert tick == SPRING_FORWARD and tick.tzinfo is UTC
    late = datetime(9999, 3, 1, 5, 30, tzinfo=KOLKATA_TIME)
    with pytest.raises(ValueError, match=r"after 9999-03-01T00:00:00\+00:00$"):
        next_tick("0 0 29 2 *", "UTC", late)
