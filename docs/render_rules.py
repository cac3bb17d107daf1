"""Render the protocol's rule tables (``trioqueue._core.rules``) as reStructuredText.

Run by ``docs/conf.py`` at every docs build, so the tables in docs/protocol.rst are the
ones the code reads: the specification and the implementation cannot drift apart.
``python docs/render_rules.py`` prints them.
"""

from __future__ import annotations

from collections.abc import Sequence

from trioqueue._core.rules import STOP_OUTCOMES, VERDICT_RULES, OutcomeKind

#: What each outcome writes to the job's row, in the words of docs/protocol.rst.
_WRITES = {
    OutcomeKind.SUCCEEDED: "fenced ack: ``succeeded``",
    OutcomeKind.RETRY: "fenced failure, charged: retried while attempts remain, else ``failed``",
    OutcomeKind.FAILED: "fenced failure, final: ``failed``",
    OutcomeKind.RELEASE: "fenced release: back to ``ready``, the attempt not charged",
    OutcomeKind.UNAVAILABLE: "nothing: the row is no longer this attempt's",
}


def render() -> str:
    """Both tables, each under a caption, as reStructuredText."""
    verdicts = [
        (
            f"``{verdict.value}``",
            "yes" if rule.renews else "no",
            f"``{rule.stops.name}``" if rule.stops is not None else "no",
            "yes" if rule.cancels else "no",
            "twice in a row" if rule.believed_after == 2 else "at once",
        )
        for verdict, rule in VERDICT_RULES.items()
    ]
    stops = [
        (f"``{stop.name}``", f"``{kind.value}``", _WRITES[kind])
        for stop, kind in STOP_OUTCOMES.items()
    ]
    return "\n".join(
        [
            list_table(
                "What a renewal's verdict does (``VERDICT_RULES``)",
                ("verdict", "renews the lease", "ends the attempt as", "cancel", "believed"),
                verdicts,
            ),
            list_table(
                "What a stop comes to (``STOP_OUTCOMES``)",
                ("stop", "outcome", "written to the row"),
                stops,
            ),
        ]
    )


def list_table(caption: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = [f".. list-table:: {caption}", "   :header-rows: 1", ""]
    for row in [header, *rows]:
        lines.append(f"   * - {row[0]}")
        lines.extend(f"     - {cell}" for cell in row[1:])
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render())
