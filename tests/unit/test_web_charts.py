"""The queue page's charts (trioqueue/web/charts.py): SVG text from lists of buckets."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trioqueue.web.charts import (
    HEIGHT,
    LEFT,
    MIN_TOP,
    PLOT_HEIGHT,
    TOP,
    Series,
    bar_chart,
    line_chart,
    nice_top,
    seconds_text,
)

SVG = "{http://www.w3.org/2000/svg}"
START = datetime(2026, 12, 1, 22, 0, tzinfo=UTC)


def minutes(n: int) -> list[datetime]:
    return [START + timedelta(minutes=i) for i in range(n)]


def parse(svg: object) -> ET.Element:
    """The chart as XML: it must be well formed, whatever its labels hold."""
    return ET.fromstring(str(getattr(svg, "text", svg)))


def test_a_bar_chart_stacks_each_bucket_and_says_what_it_shows() -> None:
    svg = bar_chart(
        chart_id="throughput",
        title="Attempts per minute",
        times=minutes(3),
        series=[Series("succeeded", "succeeded", [1, 0, 4]), Series("failed", "failed", [1, 0, 1])],
    )
    root = parse(svg)
    assert root.get("role") == "img"
    assert root.get("aria-labelledby") == "throughput-title"
    assert root.find(f"{SVG}title").text == "Attempts per minute"  # type: ignore[union-attr]
    buckets = root.findall(f"{SVG}g")
    assert [b.find(f"{SVG}title").text for b in buckets] == [  # type: ignore[union-attr]
        "22:00 UTC: succeeded 1, failed 1",
        "22:01 UTC: succeeded 0, failed 0",
        "22:02 UTC: succeeded 4, failed 1",
    ]
    # An empty bucket draws nothing; the busiest (5) is scaled to the axis's top (5).
    assert [len(b.findall(f"{SVG}rect")) for b in buckets] == [2, 0, 2]
    ok, bad = buckets[2].findall(f"{SVG}rect")
    assert float(bad.get("y") or 0) == pytest.approx(TOP)
    assert float(ok.get("height") or 0) == pytest.approx(PLOT_HEIGHT * 4 / 5)
    assert float(ok.get("y") or 0) + float(ok.get("height") or 0) == pytest.approx(
        TOP + PLOT_HEIGHT
    )
    ticks = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "tick"]
    assert ticks == ["5", "0", "22:00", "22:01", "now"]


def test_a_line_chart_breaks_at_buckets_without_a_value() -> None:
    svg = line_chart(
        chart_id="run-time",
        title="Run time",
        times=minutes(6),
        series=[Series("p50", "p50", [0.5, 1.0, None, 2.0, None, None])],
    )
    root = parse(svg)
    [path] = root.iter(f"{SVG}path")
    d = path.get("d") or ""
    assert d.count("M") == 1 and d.count("L") == 1  # 0.5 to 1.0; then a gap
    [dot] = root.iter(f"{SVG}circle")  # 2.0 has no neighbour
    assert float(dot.get("cy") or 0) == pytest.approx(TOP)  # the peak is the axis's top (2s)
    titles = [g.find(f"{SVG}title").text for g in root.findall(f"{SVG}g")]  # type: ignore[union-attr]
    assert titles[1:3] == ["22:01 UTC: p50 1s", "22:02 UTC: p50 –"]
    assert root.find(f".//{SVG}text[@data-testid='chart-y-top']").text == "2s"  # type: ignore[union-attr]


def test_an_empty_chart_has_its_axes_and_no_marks() -> None:
    root = parse(
        line_chart(
            chart_id="wait",
            title="Wait",
            times=minutes(4),
            series=[Series("p95", "p95", [None] * 4)],
        )
    )
    assert list(root.iter(f"{SVG}path")) == [] and list(root.iter(f"{SVG}circle")) == []
    assert len(root.findall(f"{SVG}g")) == 4


def test_hostile_labels_are_escaped_and_shown_visible() -> None:
    svg = bar_chart(
        chart_id="c",
        title='queue <script>alert(1)</script> "\u202eliam"',
        times=minutes(1),
        series=[Series("a</title><b>\x1b", "succeeded", [1])],
    )
    text = str(svg.text)
    assert "<script>" not in text and "<b>" not in text
    assert "\u202e" not in text and "\x1b" not in text
    root = parse(svg)
    assert root.find(f"{SVG}title").text == 'queue <script>alert(1)</script> "\\u202eliam"'  # type: ignore[union-attr]


def test_each_series_needs_a_value_per_bucket() -> None:
    with pytest.raises(ValueError, match="2 values for 3 buckets"):
        bar_chart(chart_id="c", title="t", times=minutes(3), series=[Series("a", "a", [1, 2])])


@pytest.mark.parametrize(
    ("peak", "top"),
    [(0, 1), (1, 1), (3, 5), (5, 5), (7, 10), (0.03, 0.05), (120, 200), (1000, 1000)],
)
def test_the_axis_top_is_round(peak: float, top: float) -> None:
    assert nice_top(peak) == pytest.approx(top)


@given(st.floats(min_value=1e-9, max_value=1e12))
def test_the_axis_top_holds_the_peak_within_a_factor_of_five(peak: float) -> None:
    top = nice_top(peak)
    assert peak <= top * (1 + 1e-9) and top < peak * 5 * (1 + 1e-9)


def test_a_tiny_peak_gets_the_lowest_top() -> None:
    assert nice_top(5e-324) == MIN_TOP


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.25, "250ms"), (1.5, "1.5s"), (2.0, "2s"), (42.4, "42s"), (200, "3m 20s"), (7500, "2h 5m")],
)
def test_durations_read_short(seconds: float, text: str) -> None:
    assert seconds_text(seconds) == text


@given(
    st.lists(
        st.tuples(st.integers(0, 10**6), st.none() | st.floats(0, 1e6)), min_size=1, max_size=90
    )
)
def test_every_mark_stays_inside_the_plot(rows: list[tuple[int, float | None]]) -> None:
    times = minutes(len(rows))
    bars = parse(
        bar_chart(
            chart_id="b", title="t", times=times, series=[Series("n", "n", [r[0] for r in rows])]
        )
    )
    lines = parse(
        line_chart(
            chart_id="l", title="t", times=times, series=[Series("v", "v", [r[1] for r in rows])]
        )
    )
    for rect in bars.iter(f"{SVG}rect"):
        y, h = float(rect.get("y") or 0), float(rect.get("height") or 0)
        assert y >= TOP - 0.01 and y + h <= TOP + PLOT_HEIGHT + 0.01
        assert float(rect.get("x") or 0) >= LEFT
    for path in lines.iter(f"{SVG}path"):
        for y in re.findall(r",([-\d.]+)", path.get("d") or ""):
            assert TOP - 0.01 <= float(y) <= HEIGHT
