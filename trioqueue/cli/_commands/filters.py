"""The job filters that ``jobs``, ``retry --all-matching`` and ``delete --all-matching``
share, as ``list_jobs`` reads them (docs/api.rst): a queue, a state, a search text, and
cancellations kept, left out, or alone."""

from __future__ import annotations

import argparse
from typing import Any

from trioqueue.cli._commands.common import JOB_STATUSES


def add_cancelled(parser: argparse._ActionsContainer) -> None:
    """``--no-cancelled`` / ``--cancelled-only``: ``cancelled=False`` / ``True``. A cancelled
    job is ``failed`` (docs/guarantees.rst); these tell the two kinds of failure apart."""
    kinds = parser.add_mutually_exclusive_group()
    kinds.add_argument(
        "--no-cancelled",
        dest="cancelled",
        action="store_const",
        const=False,
        help="leave out cancelled jobs (failed because a cancel was asked)",
    )
    kinds.add_argument(
        "--cancelled-only",
        dest="cancelled",
        action="store_const",
        const=True,
        help="only cancelled jobs",
    )


def add_filters(
    parser: argparse._ActionsContainer, *, status: bool = True, cancelled: bool = True
) -> None:
    """``--queue``, ``--status`` (unless ``status`` is False), ``--search`` and the
    cancellation options (unless ``cancelled`` is False)."""
    parser.add_argument("--queue", help="only this queue")
    if status:
        parser.add_argument("--status", choices=JOB_STATUSES, help="only jobs in this state")
    parser.add_argument(
        "--search",
        metavar="TEXT",
        help="only jobs whose payload (as JSON) or last error holds TEXT (any case)",
    )
    if cancelled:
        add_cancelled(parser)


def filters_of(args: argparse.Namespace) -> dict[str, Any]:
    """The filters given, as ``list_jobs``' keyword arguments."""
    names = ("queue", "status", "search", "cancelled")
    return {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}


def filters_text(filters: dict[str, Any]) -> str:
    """The filters as the options that gave them, for a message: ``--queue q --no-cancelled``
    (``every job`` for none)."""
    words = []
    for name, value in filters.items():
        if name == "cancelled":
            words.append("--cancelled-only" if value else "--no-cancelled")
        else:
            words.append(f"--{name} {value}")
    return " ".join(words) or "every job"
