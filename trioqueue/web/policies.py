"""Retention as the dashboard shows and takes it (docs/dashboard.rst, "Retention";
docs/protocol.rst §15): the JSON of ``GET /api/retention``, the checks of the bodies and
form fields that set it, and keep-times for people (``7d``, ``1d 12h``, ``forever``).

Kept apart from the routes (:mod:`trioqueue.web.retention`) so that the queue page
(:mod:`trioqueue.web.pages`) shows a queue's policy in the same words without importing
the page module that imports it.

Every check collects its problems and raises one ValueError naming them all, so that a
400 lists every mistake of a request at once. What a backend stores (at most a century)
it checks itself, with the queue name, in its own one error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import trioqueue

__all__ = [
    "KINDS",
    "UNITS",
    "check_keep",
    "form_keep",
    "keep_text",
    "parse_audit_body",
    "parse_policy_body",
    "policy_json",
    "prefill",
    "retention_json",
]

#: The kinds of finished job a policy keeps, as the API's keys and the forms' fields.
KINDS = ("succeeded", "failed")
#: The forms' units, largest first: seconds in each.
UNITS: dict[str, int] = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}
UNIT_NAMES = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}
_NUMBER = re.compile(r"\d{1,15}(?:\.\d{1,9})?")


def _iso(value: Any) -> str | None:
    return None if value is None else value.isoformat()


def policy_json(policy: trioqueue.RetentionPolicy) -> dict[str, Any]:
    """``{"succeeded": seconds or null, "failed": ...}``, and ``queue`` for a queue's own."""
    out: dict[str, Any] = {} if policy.queue is None else {"queue": policy.queue}
    return out | {"succeeded": policy.succeeded, "failed": policy.failed}


def maintainer_json(info: trioqueue.MaintainerInfo | None) -> dict[str, Any] | None:
    if info is None:
        return None
    return {
        "holder": info.holder,
        "seq": info.seq,
        "acquired_at": _iso(info.acquired_at),
        "expires_at": _iso(info.expires_at),
    }


def retention_json(
    retention: trioqueue.Retention, maintainer: trioqueue.MaintainerInfo | None
) -> dict[str, Any]:
    """``GET /api/retention``: every policy, the audit log's keep-time and the lease."""
    return {
        "default": policy_json(retention.default),
        "queues": [policy_json(p) for p in retention.queues],
        "audit": retention.audit,
        "maintainer": maintainer_json(maintainer),
    }


def check_keep(name: str, value: object, problems: list[str]) -> float | None:
    """A keep-time from a JSON body: null (for ever) or a finite number of seconds > 0;
    a problem added to ``problems`` otherwise (and None returned)."""
    if value is None:
        return None
    if type(value) not in (int, float):  # bool is an int to Python, not to JSON
        problems.append(f"{name} must be a number of seconds or null (for ever), not {value!r}")
        return None
    seconds = float(value)  # type: ignore[arg-type]
    if not (math.isfinite(seconds) and seconds > 0):
        problems.append(f"{name} must be more than 0 seconds, or null (for ever), not {value!r}")
        return None
    return seconds


def _raise(problems: list[str]) -> None:
    if problems:
        raise ValueError("; ".join(problems))


def _object(body: Any, keys: tuple[str, ...], shape: str, problems: list[str]) -> dict[str, Any]:
    """``body`` when it is an object of exactly ``keys``; else the problems it has."""
    if not isinstance(body, dict):
        problems.append(f"the body must be {shape}")
        return {}
    missing = [k for k in keys if k not in body]
    unknown = sorted(str(k) for k in body if k not in keys)
    if missing:
        problems.append(f"the body lacks {', '.join(missing)} (it must be {shape})")
    if unknown:
        problems.append(f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}")
    return body


def parse_policy_body(body: Any, *, queue_problem: str | None = None) -> dict[str, float | None]:
    """``{"succeeded": seconds or null, "failed": seconds or null}`` (both keys), as
    ``set_retention``'s keywords; ``queue_problem`` (the path's queue name was bad) is
    listed with the body's own.

    Raises:
        ValueError: every problem, in one line.
    """
    shape = '{"succeeded": seconds or null, "failed": seconds or null}'
    problems = [] if queue_problem is None else [queue_problem]
    fields = _object(body, KINDS, shape, problems)
    keeps = {kind: check_keep(kind, fields.get(kind), problems) for kind in KINDS}
    _raise(problems)
    return keeps


def parse_audit_body(body: Any) -> float | None:
    """``{"seconds": n or null}``: how long audit entries are kept."""
    problems: list[str] = []
    fields = _object(body, ("seconds",), '{"seconds": n or null}', problems)
    seconds = check_keep("seconds", fields.get("seconds"), problems)
    _raise(problems)
    return seconds


def form_keep(form: Mapping[str, str], name: str, problems: list[str]) -> float | None:
    """A keep-time from a form: the number in field ``name`` times the unit in
    ``name_unit`` (``d``, ``h``, ``m``, ``s``); an empty number keeps for ever."""
    raw = (form.get(name) or "").strip()
    unit = form.get(f"{name}_unit") or "s"
    if not raw:
        return None
    if unit not in UNITS:
        problems.append(f"{name}: the unit must be one of {', '.join(UNITS)}, not {unit[:10]!r}")
        return None
    if not _NUMBER.fullmatch(raw):
        problems.append(f"{name} must be a number (empty: for ever), not {raw[:40]!r}")
        return None
    seconds = float(raw) * UNITS[unit]
    if seconds <= 0:
        problems.append(f"{name} must be more than 0 (empty: for ever)")
        return None
    return seconds


def prefill(seconds: float | None) -> tuple[str, str]:
    """A keep-time as a form's number and unit: the largest unit it is a whole number of
    (``7`` ``d``; ``90`` ``m`` for an hour and a half); empty for for ever."""
    if seconds is None:
        return "", "d"
    for unit, size in UNITS.items():
        if seconds >= size and float(seconds / size).is_integer():
            return str(int(seconds // size)), unit
    return f"{seconds:g}", "s"


def keep_text(seconds: float | None) -> str:
    """A keep-time for people: ``7d``, ``1d 12h``, ``1m 30s``, ``forever``."""
    if seconds is None:
        return "forever"
    whole, parts = int(seconds), []
    for unit, size in list(UNITS.items())[:-1]:
        if whole >= size:
            parts.append(f"{whole // size}{unit}")
            whole %= size
    rest = whole + (seconds - int(seconds))
    if rest or not parts:
        parts.append(f"{rest:g}s")
    return " ".join(parts)
