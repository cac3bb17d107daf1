"""Render the protocol's rule tables (``trioqueue._core.rules``) as reStructuredText and
as Markdown.

``python docs/regenerate.py --write`` writes them into docs/generated/ (``rules.rst``, which
docs/protocol.rst includes, and ``README.md``, which GitHub shows), and a unit test fails
when a committed copy is not what this module renders from the code today: the
specification and the implementation cannot drift apart. ``python docs/render_rules.py``
prints the reStructuredText.
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


#: A table: its caption, its header row, its rows (cells in reStructuredText inline markup).
Table = tuple[str, Sequence[str], Sequence[Sequence[str]]]


def tables() -> list[Table]:
    """Both tables, as data: what a verdict does, what a stop comes to."""
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
    return [
        (
            "What a renewal's verdict does (``VERDICT_RULES``)",
            ("verdict", "renews the lease", "ends the attempt as", "cancel", "believed"),
            verdicts,
        ),
        (
            "What a stop comes to (``STOP_OUTCOMES``)",
            ("stop", "outcome", "written to the row"),
            stops,
        ),
    ]


def render() -> str:
    """Both tables, each under a caption, as reStructuredText."""
    return "\n".join(list_table(*table) for table in tables())


def render_markdown() -> str:
    """Both tables, each under a heading, as GitHub-flavoured Markdown."""
    return "\n".join(markdown_table(*table) for table in tables())


def list_table(caption: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = [f".. list-table:: {caption}", "   :header-rows: 1", ""]
    for row in [header, *rows]:
        lines.append(f"   * - {row[0]}")
        lines.extend(f"     - {cell}" for cell in row[1:])
    return "\n".join(lines) + "\n"


def markdown_table(caption: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """One table under a level-3 heading; RST's double backquotes become Markdown's one."""

    def row(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cell.replace("``", "`") for cell in cells) + " |"

    lines = [f"### {caption.replace('``', '`')}", "", row(header), row(["---"] * len(header))]
    lines += [row(cells) for cells in rows]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render())
