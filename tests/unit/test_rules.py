"""The protocol's rule tables (``trioqueue._core.rules``): complete, as specified, and
rendered into the docs as they are (docs/protocol.rst, "The rules of §2 to §5 as tables")."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._modules import load_file
from trioqueue._core.outcome import decide
from trioqueue._core.rules import (
    STOP_OUTCOMES,
    VERDICT_RULES,
    OutcomeKind,
    StopReason,
    VerdictRule,
)
from trioqueue._core.wire import Verdict

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_verdict_and_every_stop_has_a_rule() -> None:
    assert set(VERDICT_RULES) == set(Verdict)
    assert set(STOP_OUTCOMES) == set(StopReason)


def test_verdict_rules_are_the_protocols() -> None:
    """§2: only extended and cancel_requested renew; reclaimed and gone end the attempt,
    gone believed only when seen twice; cancel_requested carries the directive (§5)."""
    assert dict(VERDICT_RULES) == {
        Verdict.EXTENDED: VerdictRule(renews=True),
        Verdict.CANCEL_REQUESTED: VerdictRule(renews=True, cancels=True),
        Verdict.RECLAIMED: VerdictRule(renews=False, stops=StopReason.RECLAIMED),
        Verdict.GONE: VerdictRule(renews=False, stops=StopReason.GONE, believed_after=2),
        Verdict.UNCHANGED: VerdictRule(renews=False),
    }


def test_stop_outcomes_are_the_protocols() -> None:
    """§3 a lost lease writes nothing; §4 shutdown releases uncharged, duration is a charged
    failure; §5 a cancelled job ends failed and is not retried."""
    assert dict(STOP_OUTCOMES) == {
        StopReason.CANCELLED: OutcomeKind.FAILED,
        StopReason.LEASE_EXPIRED: OutcomeKind.UNAVAILABLE,
        StopReason.RECLAIMED: OutcomeKind.UNAVAILABLE,
        StopReason.GONE: OutcomeKind.UNAVAILABLE,
        StopReason.SHUTDOWN: OutcomeKind.RELEASE,
        StopReason.DURATION: OutcomeKind.RETRY,
    }


@pytest.mark.parametrize("stop", list(StopReason))
@pytest.mark.parametrize("last_attempt", [False, True])
def test_decide_follows_the_stop_table(stop: StopReason, last_attempt: bool) -> None:
    """The outcome of a stopped attempt is its row of the table; a charged failure on the
    last attempt is final."""
    outcome = decide(
        job_stop=None,
        batch_stop=stop,
        error="boom",
        attempt=3 if last_attempt else 1,
        max_attempts=3,
        max_job_duration=5.0,
    )
    expected = STOP_OUTCOMES[stop]
    if expected is OutcomeKind.RETRY and last_attempt:
        expected = OutcomeKind.FAILED
    assert outcome.kind is expected


def test_the_docs_render_both_tables_from_the_code() -> None:
    text: str = load_file(DOCS / "render_rules.py").render()
    for verdict in Verdict:
        assert f"``{verdict.value}``" in text
    for stop, kind in STOP_OUTCOMES.items():
        assert f"   * - ``{stop.name}``\n     - ``{kind.value}``" in text
    assert ".. include:: generated/rules.rst" in (DOCS / "protocol.rst").read_text()
