"""The guard core on the edges of its bookkeeping (trioqueue/_core/guard_rules.py).

The runtime reports a handler's exit (``work_ended``, ``job_done``) by batch and job id,
and may do so after the batch is gone (unregistered once its scope ended) or for a job the
batch does not hold: the core ignores such a report rather than fail the runtime's task.
A job looked up by the wrong id is a KeyError naming that id, in a batch of one as in a
larger one. Only GuardCore's public methods are used here.
"""

from __future__ import annotations

import pytest

from trioqueue._core.guard_rules import GuardCore
from trioqueue._core.timing import Timing

V, H = 30.0, 10.0


def _core_with(batch_id: int, job_ids: list[int]) -> GuardCore:
    core = GuardCore(Timing(visibility_timeout=V, heartbeat_interval=H))
    accepted = core.register(
        batch_id,
        [(job_id, 1) for job_id in job_ids],
        claim_sent=0.0,
        now=0.0,
        wall_now=0.0,
        row_deadlines=[V] * len(job_ids),
    )
    assert accepted
    return core


@pytest.mark.parametrize("job_ids", [[7], [7, 8]], ids=["batch of one", "batch of two"])
def test_a_report_for_a_batch_that_is_gone_or_a_job_it_lacks_is_ignored(
    job_ids: list[int],
) -> None:
    core = _core_with(1, job_ids)
    core.work_ended(1, 99)
    core.job_done(1, 99)
    core.work_ended(2, 7)
    core.job_done(2, 7)
    core.unregister(1)
    core.work_ended(1, 7)
    core.job_done(1, 7)
    assert core.batch_ids() == []


@pytest.mark.parametrize("job_ids", [[7], [7, 8]], ids=["batch of one", "batch of two"])
def test_a_job_looked_up_by_another_id_is_a_key_error_naming_it(job_ids: list[int]) -> None:
    core = _core_with(1, job_ids)
    assert core.job(1, 7).job_id == 7
    with pytest.raises(KeyError) as raised:
        core.job(1, 99)
    assert raised.value.args == (99,)
