"""Draw timing diagrams of the guard from the checked-in conformance traces, as SVG.

``python docs/regenerate.py --write`` writes them into docs/generated/, which docs/protocol.rst
shows and GitHub shows too, and a unit test fails when a committed copy is not what this
module draws from the traces today: the timelines are the core's own decisions
(proofs/traces/, replayed by tests/unit/test_traces.py), not a drawing that could drift
from it. ``python docs/render_timing.py OUTDIR`` writes them into another folder.

Each diagram has lanes, top to bottom: the guard (its wakes, and abandoned renewals),
the renewal statements (a bar from ``sent_at`` to the call's exit, by how it ended), the
connections the guard's statements hold, then one lane per batch: its handler from
registration to exit, each cancel-scope deadline it was given (triangles; the last one
solid), the scope firing, the stops and cancels delivered, and the outcome. The SVG is
written by hand: no plotting library, and the same trace always gives the same bytes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

#: Seconds from the trace's start to the SVG's x coordinate.
Scale = Callable[[float], float]

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "proofs" / "traces"

#: The traces drawn, each with the caption docs/protocol.rst shows under it.
DIAGRAMS: dict[str, str] = {
    "healthy-renewals": "A healthy renewal cycle: the first renewal at once, then one per beat; "
    "each answer moves the scope deadline to sent_at + V.",
    "lease-lost-fence": "Failed renewals, retried faster as the lease runs down, until the fence "
    "stops the handler: the attempt writes nothing.",
    "wedged-renewal-abandoned": "A wedged renewal is abandoned at its give-up time plus 0.25 s; "
    "the next one wedges too and is not abandoned while the first is out: two connections "
    "at most.",
    "cancel-notice": "A cancel notice renews the job's batch at once; the answer carries the "
    "directive, and the handler is cancelled.",
}

WIDTH = 760
LEFT = 120  # the lane labels' column
RIGHT = 24
LANE = 34
TOP = 12
COLOURS = {
    "answered": "#2e7d32",
    "failed": "#ef6c00",
    "abandoned": "#c62828",
    "open": "#757575",
    "handler": "#1565c0",
    "fired": "#c62828",
    "stop": "#ef6c00",
    "deadline": "#424242",
    "grid": "#e0e0e0",
    "text": "#212121",
}


@dataclass
class _Renewal:
    token: int
    sent_at: float
    give_up_at: float
    ended_at: float | None = None
    how: str = "open"  # answered, failed, late (answered after it was abandoned)
    abandoned_at: float | None = None


@dataclass
class _Batch:
    batch_id: int
    job_ids: list[int]
    registered_at: float
    deadlines: list[float] = field(default_factory=list)
    fired_at: float | None = None
    marks: list[tuple[float, str]] = field(default_factory=list)  # stops and cancels
    exits: list[tuple[float, str]] = field(default_factory=list)  # (time, outcome)


class _Svg:
    def __init__(self, height: float) -> None:
        self.height = height
        self.parts: list[str] = []

    def add(self, element: str, **attrs: Any) -> None:
        text = attrs.pop("text", None)
        attributes = " ".join(
            f'{name.rstrip("_").replace("_", "-")}="{_fmt(value)}"' for name, value in attrs.items()
        )
        if text is None:
            self.parts.append(f"<{element} {attributes}/>")
        else:
            self.parts.append(f"<{element} {attributes}>{escape(str(text))}</{element}>")

    def document(self, title: str, desc: str) -> str:
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
            f'height="{_fmt(self.height)}" viewBox="0 0 {WIDTH} {_fmt(self.height)}" '
            'font-family="sans-serif" font-size="11">'
        )
        return "\n".join(
            [
                head,
                f"<title>{escape(title)}</title>",
                f"<desc>{escape(desc)}</desc>",
                f'<rect x="0" y="0" width="{WIDTH}" height="{_fmt(self.height)}" fill="#ffffff"/>',
                *self.parts,
                "</svg>",
                "",
            ]
        )


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return str(value)


def _read(trace: dict[str, Any]) -> tuple[list[_Renewal], list[_Batch], list[Any]]:
    """Renewals, batches and the guard's wakes, from the steps of a trace."""
    renewals: dict[int, _Renewal] = {}
    batches: dict[int, _Batch] = {}
    job_batch: dict[int, int] = {}
    wakes: list[Any] = []  # (time, abandoned token or None)
    for step in trace["steps"]:
        given, made = step["input"], step["decisions"]
        at = given["at"]
        result = made["result"] or {}
        if given["kind"] == "claim" and result.get("accepted"):
            job_ids = [job["job_id"] for job in given["jobs"]]
            batches[result["batch_id"]] = _Batch(result["batch_id"], job_ids, at)
            job_batch.update(dict.fromkeys(job_ids, result["batch_id"]))
        if given["kind"] == "wake" or made["abandoned"] is not None:
            wakes.append((at, made["abandoned"]))
        if given["kind"] in ("answer", "fail") and given["token"] in renewals:
            renewal = renewals[given["token"]]
            if renewal.ended_at is None:
                renewal.ended_at = at
                late = renewal.abandoned_at is not None
                renewal.how = (
                    "late" if late else "answered" if given["kind"] == "answer" else "failed"
                )
        if made["abandoned"] is not None:
            renewals[made["abandoned"]].abandoned_at = at
        if made["renewal"] is not None:
            r = made["renewal"]
            renewals[r["token"]] = _Renewal(r["token"], r["sent_at"], r["give_up_at"])
        for batch_id, deadline in made["scope_deadlines"]:
            batch = batches[batch_id]
            if not batch.deadlines or batch.deadlines[-1] != deadline:
                batch.deadlines.append(deadline)
        for batch_id in made["scopes_fired"]:
            batches[batch_id].fired_at = at
        for batch_id, _job in made["cancels"]:
            batches[batch_id].marks.append((at, "cancel"))
        for batch_id, _job, reason in made["stops"]:
            batches[batch_id].marks.append((at, reason.lower()))
        if "outcome" in result:
            outcome = result["outcome"]
            batches[job_batch[outcome["job_id"]]].exits.append((at, outcome["kind"]))
    return list(renewals.values()), list(batches.values()), wakes


def _connections(trace: dict[str, Any]) -> list[tuple[float, int]]:
    return [(s["input"]["at"], s["decisions"]["connections_held"]) for s in trace["steps"]]


def render(trace: dict[str, Any]) -> str:
    """One trace as an SVG timeline."""
    renewals, batches, wakes = _read(trace)
    times: list[float] = [s["input"]["at"] for s in trace["steps"]]
    times += [d for b in batches for d in b.deadlines] + [r.give_up_at for r in renewals]
    end = max(times) * 1.04 + 0.5
    scale = (WIDTH - LEFT - RIGHT) / end

    def x(t: float) -> float:
        return LEFT + t * scale

    lanes = ["guard", "renewals", "connections (0-2)", *[_batch_label(b) for b in batches]]
    height = TOP + LANE * len(lanes) + 56
    svg = _Svg(height)
    _axis(svg, end, x, TOP + LANE * len(lanes))
    for index, label in enumerate(lanes):
        y = TOP + LANE * index
        svg.add("line", x1=LEFT, y1=y + LANE, x2=WIDTH - RIGHT, y2=y + LANE, stroke=COLOURS["grid"])
        svg.add("text", x=6, y=y + LANE / 2 + 4, fill=COLOURS["text"], text=label)
    _guard_lane(svg, wakes, x, TOP)
    _renewal_lane(svg, renewals, x, TOP + LANE, end)
    _connection_lane(svg, _connections(trace), x, TOP + 2 * LANE, end)
    for index, batch in enumerate(batches):
        _batch_lane(svg, batch, x, TOP + LANE * (3 + index), end)
    _legend(svg, height - 8)
    return svg.document(f"{trace['name']}: {trace['description']}", _drawn_from(trace["name"]))


def _drawn_from(name: str) -> str:
    return (
        f"Generated: drawn by docs/render_timing.py from proofs/traces/{name}.json. "
        "Do not edit; regenerate with: python docs/regenerate.py --write"
    )


def _batch_label(batch: _Batch) -> str:
    jobs = ", ".join(map(str, batch.job_ids))
    return f"batch {batch.batch_id} (job{'s' if len(batch.job_ids) > 1 else ''} {jobs})"


def _axis(svg: _Svg, end: float, x: Scale, y: float) -> None:
    step = next(s for s in (1, 2, 5, 10, 20, 50) if end / s <= 12)
    t = 0
    while t <= end:
        svg.add("line", x1=x(t), y1=TOP, x2=x(t), y2=y, stroke=COLOURS["grid"])
        svg.add("text", x=x(t), y=y + 16, text_anchor="middle", fill=COLOURS["text"], text=f"{t}")
        t += step
    svg.add(
        "text", x=WIDTH - RIGHT, y=y + 30, text_anchor="end", fill=COLOURS["text"], text="seconds"
    )


def _guard_lane(svg: _Svg, wakes: Iterable[Any], x: Scale, y: float) -> None:
    for at, abandoned in wakes:
        svg.add("line", x1=x(at), y1=y + 10, x2=x(at), y2=y + 24, stroke=COLOURS["text"])
        if abandoned is not None:
            svg.add(
                "text",
                x=x(at) + 3,
                y=y + 10,
                fill=COLOURS["abandoned"],
                text=f"abandons #{abandoned}",
            )


def _renewal_lane(svg: _Svg, renewals: Sequence[_Renewal], x: Scale, y: float, end: float) -> None:
    rows: list[float] = []  # when each row is free again
    labelled = -1e9  # where the last token label ended: dense retries skip theirs
    for renewal in renewals:
        finish = end if renewal.ended_at is None else renewal.ended_at
        row = next((i for i, free in enumerate(rows) if free <= renewal.sent_at), len(rows))
        rows[row : row + 1] = [finish]
        top = y + 6 + row * 12
        colour = COLOURS["open" if renewal.how in ("open", "late") else renewal.how]
        width = max(2.0, x(finish) - x(renewal.sent_at))
        svg.add("rect", x=x(renewal.sent_at), y=top, width=width, height=9, fill=colour)
        if renewal.abandoned_at is not None:
            svg.add(
                "rect",
                x=x(renewal.abandoned_at),
                y=top,
                width=max(2.0, x(finish) - x(renewal.abandoned_at)),
                height=9,
                fill=COLOURS["abandoned"],
                fill_opacity=0.6,
            )
        if x(renewal.sent_at) >= labelled:
            svg.add(
                "text",
                x=x(renewal.sent_at) + 2,
                y=top - 1,
                font_size=9,
                fill=COLOURS["text"],
                text=f"#{renewal.token}",
            )
            labelled = x(renewal.sent_at) + 22
        svg.add(
            "line",
            x1=x(renewal.give_up_at),
            y1=top - 2,
            x2=x(renewal.give_up_at),
            y2=top + 11,
            stroke=COLOURS["abandoned"],
            stroke_dasharray="2,2",
        )


def _connection_lane(
    svg: _Svg, held: Sequence[tuple[float, int]], x: Scale, y: float, end: float
) -> None:
    points = []
    level = 0
    for at, count in [*held, (end, held[-1][1] if held else 0)]:
        points += [(x(at), y + LANE - 6 - 10 * level), (x(at), y + LANE - 6 - 10 * count)]
        level = count
    path = " ".join(f"{_fmt(px)},{_fmt(py)}" for px, py in points)
    svg.add(
        "polyline",
        points=f"{_fmt(float(LEFT))},{_fmt(y + LANE - 6.0)} {path}",
        fill="none",
        stroke=COLOURS["text"],
    )


def _batch_lane(svg: _Svg, batch: _Batch, x: Scale, y: float, end: float) -> None:
    finish = max((at for at, _ in batch.exits), default=end)
    svg.add(
        "rect",
        x=x(batch.registered_at),
        y=y + 14,
        width=max(2.0, x(finish) - x(batch.registered_at)),
        height=10,
        fill=COLOURS["handler"],
        fill_opacity=0.35,
    )
    for index, deadline in enumerate(batch.deadlines):
        last = index == len(batch.deadlines) - 1
        px = x(deadline)
        svg.add(
            "polygon",
            points=f"{_fmt(px - 4)},{_fmt(y + 4.0)} {_fmt(px + 4)},{_fmt(y + 4.0)} {_fmt(px)},{_fmt(y + 11.0)}",
            fill=COLOURS["deadline"] if last else "none",
            stroke=COLOURS["deadline"],
        )
    if batch.fired_at is not None:
        px = x(batch.fired_at)
        svg.add(
            "line", x1=px, y1=y + 2, x2=px, y2=y + LANE - 2, stroke=COLOURS["fired"], stroke_width=2
        )
    for at, what in batch.marks:
        svg.add("circle", cx=x(at), cy=y + 19, r=4, fill=COLOURS["stop"])
        svg.add("text", x=x(at) + 6, y=y + 12, fill=COLOURS["stop"], text=what)
    for at, outcome in batch.exits:
        svg.add("text", x=x(at) + 4, y=y + 23, fill=COLOURS["text"], text=outcome)


def _legend(svg: _Svg, y: float) -> None:
    entries = [
        ("rect", COLOURS["answered"], "renewal answered"),
        ("rect", COLOURS["failed"], "failed"),
        ("rect", COLOURS["open"], "unanswered"),
        ("rect", COLOURS["abandoned"], "abandoned"),
        ("tri", COLOURS["deadline"], "scope deadline (solid: last)"),
        ("dash", COLOURS["abandoned"], "give-up time"),
        ("line", COLOURS["fired"], "scope fired"),
        ("dot", COLOURS["stop"], "stop or cancel"),
    ]
    px = 6.0
    for shape, colour, label in entries:
        if shape == "rect":
            svg.add("rect", x=px, y=y - 8, width=12, height=8, fill=colour)
        elif shape == "tri":
            points = f"{_fmt(px)},{_fmt(y - 9)} {_fmt(px + 8)},{_fmt(y - 9)} {_fmt(px + 4)},{_fmt(y - 2)}"
            svg.add("polygon", points=points, fill=colour)
        elif shape in ("line", "dash"):
            dashes = {"stroke_dasharray": "2,2"} if shape == "dash" else {"stroke_width": 2}
            svg.add("line", x1=px + 4, y1=y - 10, x2=px + 4, y2=y, stroke=colour, **dashes)
        else:
            svg.add("circle", cx=px + 4, cy=y - 4, r=4, fill=colour)
        svg.add("text", x=px + 16, y=y, font_size=10, fill=COLOURS["text"], text=label)
        px += 20 + 5.2 * len(label)


def load_trace(name: str) -> dict[str, Any]:
    """The checked-in trace ``proofs/traces/<name>.json``."""
    trace: dict[str, Any] = json.loads((TRACES / f"{name}.json").read_text(encoding="utf-8"))
    return trace


def render_all(out_dir: Path) -> list[Path]:
    """Write every diagram of :data:`DIAGRAMS` as ``timing-<name>.svg`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name in DIAGRAMS:
        path = out_dir / f"timing-{name}.svg"
        path.write_text(render(load_trace(name)), encoding="utf-8")
        written.append(path)
    return written


def figures() -> str:
    """The figures for docs/protocol.rst, as reStructuredText (paths from docs/)."""
    blocks = [
        f".. figure:: /generated/timing-{name}.svg\n"
        f"   :alt: timeline of the trace {name}\n\n"
        f"   {caption} (``proofs/traces/{name}.json``)\n"
        for name, caption in DIAGRAMS.items()
    ]
    return "\n".join(blocks)


def markdown_figures() -> str:
    """The same figures as Markdown, for a page beside the SVG files (paths from there)."""
    blocks = [
        f"![timeline of the trace {name}](timing-{name}.svg)\n\n"
        f"{caption} (`proofs/traces/{name}.json`)\n"
        for name, caption in DIAGRAMS.items()
    ]
    return "\n".join(blocks)


if __name__ == "__main__":
    for written in render_all(Path(sys.argv[1] if len(sys.argv) > 1 else ".")):
        print(written)
