"""Schedules: when a cron expression in a time zone comes due next (sans-IO).

Theory of operation
-------------------
A schedule is a standard five-field cron expression read in an IANA time zone. Its *ticks*
are instants (UTC datetimes): each local wall-clock time the expression matches is a tick,
once. Daylight saving time changes make two kinds of local times special, and they are
handled as cron users expect (docs/scheduling.rst, "Time zones and DST"):

- a local time skipped by a change (02:30 on a spring-forward night in Europe/Berlin) does
  not exist; its tick falls on the first instant after the gap (03:00 local). Several skipped
  times (``*/15 2 * * *``) collapse into that one tick, and so does a regular tick at the gap's
  end: the schedule runs once there.
- a local time repeated by a change (02:30 on a fall-back night) runs once, at its first
  occurrence (``fold=0``); the repeated hour's second pass has no ticks.

To get this, the cron expression is evaluated on *naive* local times (cronsim iterates wall
clock times, knowing nothing of DST), and each naive match is mapped to an instant: the
unique one where the time exists, the first where it is repeated, the gap's end where it is
skipped. That mapping never goes backwards as the naive time advances, so the first match
whose instant is after ``now`` is the next tick.

No trio, no database: :func:`next_tick` takes ``after`` and both backends call it (the memory
model with its clock mapped to datetimes, the PostgreSQL backend with the database's now()).
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

from cronsim import CronSim, CronSimError

__all__ = [
    "CRON_FIELDS",
    "Advance",
    "Due",
    "check_cron",
    "check_timezone",
    "next_tick",
    "plan_advances",
    "zone",
]

#: How many fields a cron expression has: minute, hour, day of month, month, day of week.
CRON_FIELDS = 5

#: Longest cron text and time-zone name accepted (both are stored as text).
MAX_CRON_LENGTH = 200
MAX_TIMEZONE_LENGTH = 64

#: Files of the time-zone database that are not zones every host reads alike.
HOST_DEPENDENT = frozenset({"localtime", "posixrules"})


def check_cron(cron: object) -> str:
    """A valid five-field cron expression, its fields separated by single spaces.

    Raises:
        TypeError: ``cron`` is not a str.
        ValueError: it does not have five fields, or a field is invalid (the message
            names what cronsim refused), or it never matches a date.
    """
    if not isinstance(cron, str):
        raise TypeError(f"cron must be a str, not {type(cron).__name__}")
    fields = cron.split()
    if len(cron) > MAX_CRON_LENGTH:
        raise ValueError(f"cron must be at most {MAX_CRON_LENGTH} characters, not {len(cron)}")
    if len(fields) != CRON_FIELDS:
        raise ValueError(
            f"cron must have 5 fields (minute hour day-of-month month day-of-week), "
            f"not {len(fields)}: {cron!r}"
        )
    text = " ".join(fields)
    try:
        matches = CronSim(text, datetime(2000, 1, 1))
        next(matches)
    except CronSimError as exc:
        raise ValueError(f"cron {cron!r} is not valid: {exc}") from None
    except StopIteration:
        raise ValueError(f"cron {cron!r} never matches a date") from None
    return text


def check_timezone(timezone: object) -> str:
    """An IANA time-zone name the system's time-zone database knows (``"Europe/Berlin"``).

    Raises:
        TypeError: ``timezone`` is not a str.
        ValueError: no such time zone.
    """
    if not isinstance(timezone, str):
        raise TypeError(f"timezone must be a str, not {type(timezone).__name__}")
    if not timezone or len(timezone) > MAX_TIMEZONE_LENGTH or "\x00" in timezone:
        raise ValueError(f"timezone must be an IANA time-zone name, not {timezone!r}")
    if timezone in HOST_DEPENDENT or timezone.startswith("right/"):
        # localtime is whatever the host is set to; right/ zones count leap seconds.
        raise ValueError(
            f"timezone {timezone!r} is not a portable IANA name: use one such as 'Europe/Berlin'"
        )
    try:
        zone(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError, UnicodeError):
        raise ValueError(
            f"unknown timezone {timezone!r}: use an IANA name such as 'UTC' or 'Europe/Berlin'"
        ) from None
    return timezone


def zone(name: str) -> tzinfo:
    """The time zone called ``name`` (cached by zoneinfo)."""
    return zoneinfo.ZoneInfo(name)


def next_tick(cron: str, timezone: str, after: datetime) -> datetime:
    """The schedule's first tick strictly after ``after``, as an aware UTC datetime.

    Args:
        cron: a checked expression (:func:`check_cron`).
        timezone: a checked time-zone name (:func:`check_timezone`).
        after: an aware datetime.

    Raises:
        ValueError: the expression matches no date after ``after`` (cronsim looks some
            years ahead), or ``after`` is naive.
    """
    if after.tzinfo is None:
        raise ValueError("after must be an aware datetime")
    tz = zone(timezone)
    after = after.astimezone(UTC)
    # Every naive match up to the local reading of ``after`` maps to an instant at or
    # before ``after`` (the mapping never goes backwards), so the search starts there; in
    # a repeated hour's second pass it skips the matches that ran in the first pass.
    local = after.astimezone(tz).replace(tzinfo=None)
    try:
        for match in CronSim(cron, local):
            instant = to_instant(match, tz)
            if instant > after:
                return instant
    except OverflowError:  # the next match would lie past the year 9999
        pass
    # Also reached when cronsim ends its search (it looks 50 years ahead): the loop ends.
    raise ValueError(f"cron {cron!r} matches no date after {after.isoformat()}")


def to_instant(local: datetime, tz: tzinfo) -> datetime:
    """The UTC instant of the naive local time ``local`` in ``tz``: the unique one where it
    exists, the first of two where a change repeats it, and the end of the gap where a
    change skips it."""
    first = local.replace(tzinfo=tz, fold=0)
    instant = first.astimezone(UTC)
    if instant.astimezone(tz).replace(tzinfo=None) == local:
        return instant  # exists (fold=0 is the first of two readings when repeated)
    return _gap_end(local, tz)


def _gap_end(local: datetime, tz: tzinfo) -> datetime:
    """The first instant after the gap holding the skipped local time ``local``.

    With the offsets before (fold=0) and after (fold=1) the change, ``local`` maps to an
    instant at or after the change and one before it; the change lies between, and is found
    to the second by bisection (time-zone changes fall on whole seconds).
    """
    late = local.replace(tzinfo=tz, fold=0).astimezone(UTC)
    early = local.replace(tzinfo=tz, fold=1).astimezone(UTC)
    low, high = min(early, late), max(early, late)
    offset_after = high.astimezone(tz).utcoffset()
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        middle = middle.replace(microsecond=0)
        if middle <= low:
            break
        if middle.astimezone(tz).utcoffset() == offset_after:
            high = middle
        else:
            low = middle
    return high


@dataclass(frozen=True, slots=True)
class Due:
    """A schedule whose next tick has come (a row of ``due_schedules``)."""

    name: str
    cron: str
    timezone: str
    next_run_at: datetime  # the tick that is due


@dataclass(frozen=True, slots=True)
class Advance:
    """Enqueue the tick ``expected`` of schedule ``name`` and move its next run to ``next``,
    provided its next run is still ``expected`` (a compare-and-set: ``advance_schedules``)."""

    name: str
    expected: datetime
    next: datetime


def plan_advances(due: Iterable[Due], now: datetime) -> tuple[list[Advance], list[str]]:
    """What a scheduling pass does with the schedules due at ``now``: one job each, for the
    tick that is due, and the next run moved to the first tick after ``now``.

    Ticks missed in between (no pool ran) are skipped: a run of missed ticks enqueues one
    job, not one per tick (docs/scheduling.rst, "Missed ticks").

    Returns:
        The advances, and a message for each schedule left out because its next tick
        cannot be computed here (a time zone this host's database does not know): the
        others go on, and the pass logs the messages.
    """
    advances: list[Advance] = []
    problems: list[str] = []
    for d in due:
        try:
            advances.append(Advance(d.name, d.next_run_at, next_tick(d.cron, d.timezone, now)))
        except (ValueError, KeyError, OSError) as exc:  # ZoneInfoNotFoundError is a KeyError
            problems.append(f"schedule {d.name!r} skipped: {exc!r}")
    return advances, problems
