"""Charts as SVG rendered on the server (docs/dashboard.rst, "Queue page").

A chart is a function of a list of time buckets: no script draws it, so it works under the
dashboard's Content-Security-Policy (no inline styles or scripts: the colours are classes of
``dashboard.css``), shows with JavaScript off, and a test reads it as text. Each chart is
an ``<svg role="img">`` whose ``<title>`` sums it up for a screen reader, with its y axis
(zero and a round top), three labels on its x axis (the first bucket's start, the middle
one's, and ``now``: the buckets end at the read), and a ``<title>`` per bucket that a
pointer shows on hover.

Every text a chart writes goes through :func:`~trioqueue.web.visible.visible` and is
HTML-escaped: a series label or a title may quote a queue name.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from trioqueue.web.visible import Html, verbatim, visible

__all__ = ["Series", "bar_chart", "count_text", "line_chart", "nice_top", "seconds_text"]

WIDTH, HEIGHT = 600, 160
#: Room for the y axis's labels on the left and the time labels below.
LEFT, BOTTOM, TOP = 52, 20, 8
PLOT_WIDTH, PLOT_HEIGHT = WIDTH - LEFT, HEIGHT - BOTTOM - TOP

Format = Callable[[float], str]


@dataclass(frozen=True, slots=True)
class Series:
    """One bar stack's layer or one line: its label, its CSS class (its colour) and one
    value per bucket (None: no value in that bucket, a gap in a line)."""

    label: str
    css: str
    values: Sequence[float | None]


def count_text(value: float) -> str:
    return f"{value:,.0f}"


def seconds_text(value: float) -> str:
    """A duration for an axis or a tooltip: ``250ms``, ``1.5s``, ``42s``, ``3m 20s``."""
    if value < 1:
        return f"{value * 1000:.0f}ms"
    if value < 10:
        return f"{value:.1f}s".replace(".0s", "s")
    if value < 60:
        return f"{value:.0f}s"
    whole = round(value)
    return (
        f"{whole // 60}m {whole % 60}s"
        if whole < 3600
        else f"{whole // 3600}h {whole % 3600 // 60}m"
    )


#: The lowest top an axis gets: a nanosecond (below it, powers of ten underflow to 0).
MIN_TOP = 1e-9


def nice_top(peak: float) -> float:
    """The y axis's top: the least of 1, 2 or 5 times a power of ten at or above ``peak``
    (1 for an empty chart, :data:`MIN_TOP` at least), so its label reads round."""
    if peak <= 0 or not math.isfinite(peak):
        return 1.0
    peak = max(peak, MIN_TOP)
    power = 10 ** math.floor(math.log10(peak))
    for step in (1, 2, 5, 10):
        if peak <= step * power * (1 + 1e-9):
            return float(step * power)
    return float(10 * power)  # not reached: 10 × power is above peak


def bar_chart(
    *,
    chart_id: str,
    title: str,
    times: Sequence[datetime],
    series: Sequence[Series],
    fmt: Format = count_text,
) -> Html:
    """Stacked bars, one per bucket: each series on top of the one before."""
    _check(times, series)
    totals = [sum(s.values[i] or 0 for s in series) for i in range(len(times))]
    top = nice_top(max(totals, default=0))
    step = PLOT_WIDTH / max(len(times), 1)
    parts = []
    for i, start in enumerate(times):
        base = 0.0
        rects = []
        for s in series:
            value = s.values[i] or 0
            if value > 0:
                y0, y1 = _y(base, top), _y(base + value, top)
                rects.append(
                    f'<rect class="{s.css}" x="{_n(LEFT + i * step + 1)}" y="{_n(y1)}" '
                    f'width="{_n(max(step - 2, 1))}" height="{_n(y0 - y1)}"/>'
                )
            base += value
        parts.append(_bucket(start, series, i, fmt, "".join(rects)))
    return _svg(chart_id, title, times, series, top, fmt, "".join(parts))


def line_chart(
    *,
    chart_id: str,
    title: str,
    times: Sequence[datetime],
    series: Sequence[Series],
    fmt: Format = seconds_text,
) -> Html:
    """One line per series through the buckets' middles, broken where a bucket has no
    value; a value with no neighbour shows as a dot."""
    _check(times, series)
    values = [v for s in series for v in s.values if v is not None]
    top = nice_top(max(values, default=0))
    step = PLOT_WIDTH / max(len(times), 1)
    lines = []
    for s in series:
        points = [
            None if v is None else (LEFT + (i + 0.5) * step, _y(v, top))
            for i, v in enumerate(s.values)
        ]
        lines.append(_line(s.css, points))
    hover = [_bucket(start, series, i, fmt, _hover_rect(i, step)) for i, start in enumerate(times)]
    return _svg(chart_id, title, times, series, top, fmt, "".join(lines + hover))


def _check(times: Sequence[datetime], series: Sequence[Series]) -> None:
    for s in series:
        if len(s.values) != len(times):
            raise ValueError(
                f"series {s.label!r} has {len(s.values)} values for {len(times)} buckets"
            )


def _y(value: float, top: float) -> float:
    return TOP + PLOT_HEIGHT * (1 - min(value, top) / top)


def _n(value: float) -> str:
    """A coordinate, short: two decimals at most."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _text(value: str) -> str:
    return verbatim(visible(value)).text


def _clock(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%H:%M")


def _line(css: str, points: Sequence[tuple[float, float] | None]) -> str:
    """A path through the points, lifting the pen at each None; lone points as dots."""
    runs: list[list[tuple[float, float]]] = [[]]
    for point in points:
        if point is None:
            runs.append([])
        else:
            runs[-1].append(point)
    path = " ".join(
        "M" + " L".join(f"{_n(x)},{_n(y)}" for x, y in run) for run in runs if len(run) > 1
    )
    dots = "".join(
        f'<circle class="{css}" cx="{_n(run[0][0])}" cy="{_n(run[0][1])}" r="3"/>'
        for run in runs
        if len(run) == 1
    )
    line = f'<path class="line {css}" d="{path}"/>' if path else ""
    return line + dots


def _hover_rect(i: int, step: float) -> str:
    """The bucket's whole column, transparent: where the pointer finds its tooltip."""
    x = _n(LEFT + i * step)
    return f'<rect class="hover" x="{x}" y="{TOP}" width="{_n(step)}" height="{PLOT_HEIGHT}"/>'


def _bucket(start: datetime, series: Sequence[Series], i: int, fmt: Format, body: str) -> str:
    said = ", ".join(
        f"{s.label} {'–' if s.values[i] is None else fmt(s.values[i] or 0)}" for s in series
    )
    return (
        f'<g data-testid="chart-bucket" data-start="{start.isoformat()}">'
        f"<title>{_text(f'{_clock(start)} UTC: {said}')}</title>{body}</g>"
    )


def _svg(
    chart_id: str,
    title: str,
    times: Sequence[datetime],
    series: Sequence[Series],
    top: float,
    fmt: Format,
    body: str,
) -> Html:
    title_id = f"{chart_id}-title"
    axes = _axes(times, top, fmt)
    legend = "".join(
        f'<tspan class="key {s.css}" dx="8">■</tspan><tspan dx="3">{_text(s.label)}</tspan>'
        for s in series
    )
    return Html(
        f'<svg id="{chart_id}" data-testid="{chart_id}" class="chart" role="img" '
        f'aria-labelledby="{title_id}" viewBox="0 0 {WIDTH} {HEIGHT + 14}" '
        f'xmlns="http://www.w3.org/2000/svg">'
        f'<title id="{title_id}">{_text(title)}</title>'
        f'<text class="legend" x="{LEFT - 8}" y="{HEIGHT + 12}">{legend}</text>'
        f"{axes}{body}</svg>"
    )


def _axes(times: Sequence[datetime], top: float, fmt: Format) -> str:
    bottom = TOP + PLOT_HEIGHT
    return "".join(
        [
            f'<line class="axis" x1="{LEFT}" y1="{bottom}" x2="{WIDTH}" y2="{bottom}"/>',
            f'<line class="grid" x1="{LEFT}" y1="{TOP}" x2="{WIDTH}" y2="{TOP}"/>',
            f'<text class="tick" data-testid="chart-y-top" x="{LEFT - 4}" y="{TOP + 4}" '
            f'text-anchor="end">{_text(fmt(top))}</text>',
            f'<text class="tick" x="{LEFT - 4}" y="{bottom}" text-anchor="end">0</text>',
            *_x_labels(times),
        ]
    )


def _x_labels(times: Sequence[datetime]) -> list[str]:
    """The first bucket's start at the left edge, the middle bucket's under it, and
    ``now`` at the right edge: the last bucket ends at the read."""
    if not times:
        return []
    last = len(times) - 1
    step = PLOT_WIDTH / len(times)
    out = []
    for i in sorted({0, len(times) // 2, last}):
        x, anchor, text = LEFT + (i + 0.5) * step, "middle", _clock(times[i])
        if i == 0:
            x, anchor = LEFT, "start"
        elif i == last:
            x, anchor, text = WIDTH, "end", "now"
        out.append(
            f'<text class="tick" data-testid="chart-x-label" x="{_n(x)}" y="{HEIGHT - 4}" '
            f'text-anchor="{anchor}">{text}</text>'
        )
    return out
