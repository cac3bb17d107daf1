"""The queue page's four charts (docs/dashboard.rst, "Queue page"), from
``backend.attempt_history``: what each shows and how its ``<title>`` says it."""

from __future__ import annotations

from collections.abc import Sequence

import trioqueue
from trioqueue.web.charts import Series, bar_chart, line_chart
from trioqueue.web.visible import Html

__all__ = ["queue_charts"]

HOUR = "per minute over the last hour, newest on the right"


def queue_charts(name: str, history: Sequence[trioqueue.AttemptBucket]) -> list[tuple[str, Html]]:
    """The queue page's four charts of the last hour, one bucket a minute: attempts that
    succeeded, those that failed or were cancelled, and the run time and wait medians and
    95th percentiles."""
    times = [b.start for b in history]
    ok = sum(b.succeeded for b in history)
    bad = sum(b.failed for b in history)
    cancelled = sum(b.cancelled for b in history)
    return [
        (
            "Succeeded",
            bar_chart(
                chart_id="throughput-chart",
                title=f"Attempts of {name} that succeeded {HOUR}: {ok} in all",
                times=times,
                series=[Series("succeeded", "succeeded", [b.succeeded for b in history])],
            ),
        ),
        (
            "Failed and cancelled",
            bar_chart(
                chart_id="failures-chart",
                title=f"Attempts of {name} that failed or were cancelled {HOUR}: "
                f"{bad} failed, {cancelled} cancelled",
                times=times,
                series=[
                    Series("failed", "failed", [b.failed for b in history]),
                    Series("cancelled", "cancelled", [b.cancelled for b in history]),
                ],
            ),
        ),
        (
            "Run time",
            line_chart(
                chart_id="run-time-chart",
                title=f"Run time of the attempts of {name}, median and 95th percentile, {HOUR}",
                times=times,
                series=[
                    Series("p50", "p50", [b.run_p50 for b in history]),
                    Series("p95", "p95", [b.run_p95 for b in history]),
                ],
            ),
        ),
        (
            "Wait",
            line_chart(
                chart_id="wait-chart",
                title=f"Wait of the attempts of {name} from visible to claimed, median and "
                f"95th percentile, {HOUR}",
                times=times,
                series=[
                    Series("p50", "p50", [b.wait_p50 for b in history]),
                    Series("p95", "p95", [b.wait_p95 for b in history]),
                ],
            ),
        ),
    ]
