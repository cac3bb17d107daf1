"""The conformance traces of proofs/traces/: they replay, match their schema, and cannot drift.

Each checked-in trace is fed input by input to the current guard core through
``trioqueue.testing.traces.replay``, which must find every decision identical; the
generator must write every file byte for byte as checked in; every trace must validate
against ``proofs/traces/schema.json``. A replay must also be able to fail: a trace with one
decision altered is refused, naming the step and the field. Any script hypothesis draws
records to a trace that replays to itself. And the recorder is checked against the real
trio ``Guard``: played through it, every named trace leaves the runtime's core and cancel
scopes where the recorder leaves its own (docs/porting.rst).
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, cast
from xml.etree import ElementTree

import jsonschema
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings

from tests._modules import load_file
from trioqueue._backends.interface import Backend
from trioqueue._core.checkpoint import CheckpointSlot
from trioqueue._core.guard_rules import GuardCore, JobLease
from trioqueue._core.progress import valid_progress
from trioqueue._core.rules import OutcomeKind, StopReason
from trioqueue._core.wire import RenewItem, Verdict
from trioqueue._runtime.guard import Guard
from trioqueue._types import Claimed, Job
from trioqueue.testing.traces import (
    FORMAT,
    INPUT_KINDS,
    Recorder,
    decode_value,
    dumps,
    load,
    record,
    replay,
    script_of,
    timing_of,
    traces_in,
)

TRACES = Path(__file__).resolve().parents[2] / "proofs" / "traces"
SCHEMA = json.loads((TRACES / "schema.json").read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
PATHS = list(traces_in(TRACES))


GENERATOR = load_file(TRACES / "generate.py", "trace_generator")


def schema_errors(trace: Any) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in VALIDATOR.iter_errors(trace)]


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_trace_replays_identically(path: Path) -> None:
    mismatches = replay(load(path))
    assert not mismatches, "\n".join(map(str, mismatches))


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_trace_matches_the_schema(path: Path) -> None:
    trace = load(path)
    assert schema_errors(trace) == []
    assert trace["format"] == FORMAT
    assert trace["name"] == path.stem
    assert trace["description"].strip(), "every trace says what it shows"


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize(
    ("where", "change"),
    [
        ("an unknown input kind", lambda s: s["input"].update(kind="teleport")),
        ("a decision missing", lambda s: s["decisions"].pop("next_wake")),
        ("an unknown verdict", lambda s: s["input"].update(verdicts=[[1, "maybe"]])),
        ("a third connection", lambda s: s["decisions"].update(connections_held=3)),
    ],
)
def test_schema_refuses_a_malformed_trace(where: str, change: Any) -> None:
    trace = load(TRACES / "healthy-renewals.json")
    answers = [s for s in trace["steps"] if s["input"]["kind"] == "answer"]
    change(answers[0])
    assert schema_errors(trace), f"the schema let {where} through"


def test_generator_reproduces_every_file_byte_for_byte() -> None:
    expected = GENERATOR.expected_files()
    assert sorted(p.name for p in expected) == sorted(p.name for p in PATHS), (
        "a trace file the generator does not write, or one it writes that is not checked in"
    )
    stale = [p.name for p, text in expected.items() if p.read_text(encoding="utf-8") != text]
    assert not stale, f"regenerate with `python proofs/traces/generate.py`: {stale}"


def test_the_scenarios_cover_every_input_verdict_stop_and_outcome() -> None:
    """The named scenarios, together, exercise every kind of input, every verdict, every
    stop and every outcome: a port that replays them has met each rule at least once."""
    steps = [
        step for path in PATHS if not path.name.startswith("drawn-") for step in load(path)["steps"]
    ]
    kinds = {step["input"]["kind"] for step in steps}
    verdicts = {v for step in steps for _, v in step["input"].get("verdicts", [])}
    results = [step["decisions"]["result"] or {} for step in steps]
    outcomes = [r["outcome"] for r in results if "outcome" in r]
    outcomes += [o for r in results for o in r.get("outcomes", [])]
    assert kinds == set(INPUT_KINDS)
    assert verdicts == {v.value for v in Verdict}
    assert {o["kind"] for o in outcomes} == {k.value for k in OutcomeKind}
    assert {o["stop"] for o in outcomes} - {None} == {s.name for s in StopReason}
    assert any(step["decisions"]["abandoned"] is not None for step in steps)
    assert max(step["decisions"]["connections_held"] for step in steps) == 2


@pytest.mark.parametrize("name", list(GENERATOR.SCENARIOS))
def test_cancels_and_stops_come_in_batch_then_job_order(name: str) -> None:
    """docs/protocol.rst §10, refinement 13: in one step, cancels and stops are delivered
    by batch id, then job id, never in the order a set of batch ids iterates."""
    for step in GENERATOR.scenario_trace(name)["steps"]:
        cancels, stops = step["decisions"]["cancels"], step["decisions"]["stops"]
        assert cancels == sorted(cancels)
        assert stops == sorted(stops, key=lambda stop: (stop[0], stop[1]))


def test_one_answer_orders_the_cancels_and_stops_of_two_batches() -> None:
    """Batches 1 and 8 in one renewal (a frozenset iterates them 8, then 1), batch 8's
    jobs claimed as 11, 10, 9: the answer's cancels and stops still go by batch, then job."""
    trace = GENERATOR.scenario_trace("cancels-across-batches")
    answers = [s["decisions"] for s in trace["steps"] if s["decisions"]["cancels"]]
    assert [(d["cancels"], d["stops"]) for d in answers] == [
        (
            [[1, 1], [8, 10]],
            [[1, 2, "RECLAIMED"], [8, 9, "RECLAIMED"], [8, 11, "RECLAIMED"]],
        )
    ]


def test_messages_of_a_handler_error_and_of_max_job_duration() -> None:
    """Refinements 14 and 15: a cancelled handler that raised says so in brackets; a plain
    error is the message as it is; D is written as printf's %g."""
    exits = [
        step["decisions"]["result"]["outcome"]
        for name in ("handler-errors", "max-job-duration-message")
        for step in load(TRACES / f"{name}.json")["steps"]
        if step["input"]["kind"] == "handler_exit"
    ]
    assert [(o["job_id"], o["kind"], o["message"]) for o in exits] == [
        (1, "failed", "cancelled: cancel requested (ValueError: boom)"),
        (2, "retry", "KeyError: 'row'"),
        (3, "failed", "RuntimeError: still broken"),
        (1, "retry", "claim hooks and handler ran past max_job_duration of 2s"),
    ]


def renewals_of(name: str) -> list[dict[str, Any]]:
    trace = load(TRACES / f"{name}.json")
    return [s["decisions"]["renewal"] for s in trace["steps"] if s["decisions"]["renewal"]]


def test_a_checkpoint_is_sent_once_and_again_after_a_failed_renewal() -> None:
    """docs/protocol.rst §16: a renewal carries the latest checkpoint only while the
    database is not known to hold it; a failed renewal leaves that unknown; the final
    write carries the latest, stored or not."""
    carried = [
        (r["token"], [item.get("checkpoint") for item in r["items"]])
        for r in renewals_of("checkpoint-sent-once")
    ]
    page1, page2 = '{"page": 1}', '{"page": 2}'
    assert carried == [(1, [None]), (2, [page1]), (3, [None]), (4, [page2]), (5, [page2]),
                       (6, [None])]  # fmt: skip
    steps = load(TRACES / "checkpoint-sent-once.json")["steps"]
    [exit_step] = [s for s in steps if s["input"]["kind"] == "handler_exit"]
    assert exit_step["decisions"]["result"]["outcome"]["checkpoint"] == page2


def test_a_batch_handler_call_gives_each_job_one_outcome() -> None:
    """docs/protocol.rst §20, I22: one outcome per job, its own stop first, then what the
    answer says of it; the call's scope fires only once every job of it is stopped."""
    steps = load(TRACES / "batch-handler-outcomes.json")["steps"]
    exits = [s["decisions"] for s in steps if s["input"]["kind"] == "batch_exit"]
    said = [
        [(o["job_id"], o["kind"], o["stop"], o.get("delay")) for o in d["result"]["outcomes"]]
        for d in exits
    ]
    assert said == [
        [(1, "succeeded", None, None), (2, "failed", "CANCELLED", None),
         (3, "retry", None, 7.5), (4, "retry", None, None)],
        [(5, "retry", None, None), (6, "retry", None, None)],
        [(7, "failed", "CANCELLED", None), (8, "failed", "CANCELLED", None)],
        [(9, "failed", None, None), (10, "failed", None, None)],
    ]  # fmt: skip
    messages = [o["message"] for d in exits for o in d["result"]["outcomes"]]
    assert messages[3] == "the batch handler returned no outcome for job 4"
    assert messages[4] == messages[5] and "unusable: 1 outcome(s) for 2 job(s)" in messages[4]
    assert messages[8:] == ["ValueError: upstream down"] * 2
    [cancelled] = [s["decisions"] for s in steps if s["decisions"]["cancels"]]
    assert cancelled["cancels"] == [[1, 2], [3, 7], [3, 8]]
    assert cancelled["scopes_fired"] == [3]  # not batch 1: its call goes on for 1, 3, 4
    claims = [s["decisions"]["hooks"] for s in steps if s["input"]["kind"] == "claim"]
    assert claims[1] == [[5, "on_job_claimed"], [6, "on_job_claimed"], [5, "batch_handler"]]


# -- replay can fail ------------------------------------------------------------------------


def altered(name: str, kind: str, field: str, change: Any) -> tuple[dict[str, Any], int]:
    """The trace ``name`` with ``change`` applied to the decisions of its first ``kind``
    step where ``field`` is set; and that step's index."""
    trace = load(TRACES / f"{name}.json")
    for index, step in enumerate(trace["steps"]):
        decisions = step["decisions"]
        if step["input"]["kind"] == kind and decisions[field] not in (None, []):
            change(decisions)
            return trace, index
    raise AssertionError(f"{name} has no {kind} step to alter")


@pytest.mark.parametrize(
    ("name", "kind", "field", "change"),
    [
        (
            "healthy-renewals",
            "wake",
            "renewal",
            lambda d: d["renewal"].update(give_up_at=d["renewal"]["give_up_at"] + 0.125),
        ),
        ("healthy-renewals", "wake", "next_wake", lambda d: d.update(next_wake=20.125)),
        ("wedged-renewal-abandoned", "wake", "abandoned", lambda d: d.update(abandoned=None)),
        ("reclaimed", "answer", "stops", lambda d: d.update(stops=[])),
        (
            "cancel-directive",
            "handler_exit",
            "result",
            lambda d: d["result"]["outcome"].update(kind="retry"),
        ),
        (
            "shutdown-release",
            "handler_exit",
            "hooks",
            lambda d: d["hooks"].reverse() or d["hooks"].append([1, "on_job_failed"]),
        ),
        (
            "first-renewal-at-once",
            "claim",
            "connections_held",
            lambda d: d.update(connections_held=2),
        ),
        (
            "checkpoint-sent-once",
            "wake",
            "renewal",
            lambda d: (
                d["renewal"]["items"][0].pop("checkpoint", None)
                or d["renewal"]["items"][0].update(checkpoint="{}")
            ),
        ),
        (
            "batch-handler-outcomes",
            "batch_exit",
            "result",
            lambda d: d["result"]["outcomes"][1].update(kind="succeeded", stop=None),
        ),
        (
            "batch-handler-outcomes",
            "answer",
            "scopes_fired",
            lambda d: d.update(scopes_fired=[1, 3]),
        ),
    ],
)
def test_replay_refuses_a_trace_with_one_decision_altered(
    name: str, kind: str, field: str, change: Any
) -> None:
    trace, index = altered(name, kind, field, change)
    mismatches = replay(trace)
    assert [(m.step, m.field) for m in mismatches] == [(index, field)]
    assert f"step {index} ({kind}): {field} differs" in str(mismatches[0])


def test_replay_refuses_an_input_the_runtime_cannot_see() -> None:
    trace = load(TRACES / "healthy-renewals.json")
    trace["steps"][3]["input"]["at"] = -1.0  # time going back
    mismatches = replay(trace)
    assert [(m.step, m.field) for m in mismatches] == [(3, "input")]


def test_replay_refuses_another_format() -> None:
    trace = load(TRACES / "healthy-renewals.json")
    trace["format"] = "trioqueue-trace/0"
    assert [m.field for m in replay(trace)] == ["format"]


# -- drawn scripts --------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(GENERATOR.scripts())
def test_any_drawn_script_records_a_trace_that_replays_to_itself(script: dict[str, Any]) -> None:
    trace = json.loads(dumps(record(script)))  # through JSON, as a port reads it
    assert schema_errors(trace) == []
    assert replay(trace) == []
    assert record(script_of(trace)) == trace  # the trace holds its whole script


def test_a_changed_copy_is_not_the_same_trace() -> None:
    """The replay compares values, not identities: a deep copy replays, a changed one not."""
    trace = load(TRACES / "late-answer-ignored.json")
    assert replay(copy.deepcopy(trace)) == []
    trace["steps"][-1]["decisions"]["unregistered"] = []
    assert replay(trace)


# -- the timing diagrams of docs/protocol.rst -------------------------------------------------


def load_renderer() -> ModuleType:
    return load_file(TRACES.parents[1] / "docs" / "render_timing.py")


def test_timing_diagrams_are_drawn_from_checked_in_traces(tmp_path: Path) -> None:
    """Each diagram is well-formed SVG, drawn from its trace (one lane per batch, one bar
    per renewal), and the same trace always gives the same bytes."""
    renderer = load_renderer()
    written = renderer.render_all(tmp_path)
    assert [p.name for p in written] == [f"timing-{n}.svg" for n in renderer.DIAGRAMS]
    for name, path in zip(renderer.DIAGRAMS, written, strict=True):
        trace = load(TRACES / f"{name}.json")
        svg = ElementTree.fromstring(path.read_text(encoding="utf-8"))
        assert svg.tag == "{http://www.w3.org/2000/svg}svg"
        labels = [t.text or "" for t in svg.iter("{http://www.w3.org/2000/svg}text")]
        batches = [s for s in trace["steps"] if (s["decisions"]["result"] or {}).get("accepted")]
        assert sum(label.startswith("batch ") for label in labels) == len(batches)
        renewals = [s for s in trace["steps"] if s["decisions"]["renewal"] is not None]
        assert renewals and f"#{renewals[0]['decisions']['renewal']['token']}" in labels
        assert renderer.render(trace) == path.read_text(encoding="utf-8")
    assert ".. figure:: /generated/timing-healthy-renewals.svg" in renderer.figures()


def test_replay_tells_a_boolean_from_a_number() -> None:
    """``true`` where the core decided ``1`` (or the reverse) is a mismatch, though Python
    says ``True == 1``; ``30`` for ``30.0`` is not."""
    trace = load(TRACES / "healthy-renewals.json")
    trace["steps"][0]["decisions"]["connections_held"] = True
    assert [m.field for m in replay(trace)] == ["connections_held"]
    trace = load(TRACES / "healthy-renewals.json")
    trace["steps"][0]["decisions"]["renewal"]["give_up_at"] = 30
    assert replay(trace) == []


# -- the recorder drives the core as the trio runtime does ----------------------------------


class ScriptedBackend:
    """Just what the guard calls: the wall clock, and renewals that return (or raise) only
    when the trace says so. The n-th call is the renewal with token n (no pool, no beats).
    Each call waits shielded, so only the trace ends it, as a wedged driver call would."""

    def __init__(self, wall_offset: float) -> None:
        self.wall_offset = wall_offset
        self.calls: list[tuple[trio.Event, list[Any]]] = []

    def wall_time(self) -> float:
        return trio.current_time() + self.wall_offset

    async def renew(
        self, items: Sequence[RenewItem], *, visibility_timeout: float, beat: object = None
    ) -> Mapping[int, Verdict]:
        done = trio.Event()
        answer: list[Any] = []  # the trace's verdicts, or the exception to raise
        self.calls.append((done, answer))
        with trio.CancelScope(shield=True):
            await done.wait()
        if isinstance(answer[0], Exception):
            raise answer[0]
        verdicts: Mapping[int, Verdict] = answer[0]
        return verdicts

    def settle(self, token: int, answer: Mapping[int, Verdict] | Exception) -> None:
        done, slot = self.calls[token - 1]
        slot.append(answer)
        done.set()


def core_state(core: GuardCore, now: float) -> dict[str, Any]:
    """What a guard core decided so far, beyond what a trace step records."""
    current = core.current
    return {
        "current": None
        if current is None
        else (current.token, current.sent_at, current.give_up_at, current.items),
        "abandoned": None if core.abandoned is None else core.abandoned.token,
        "next_wake": core.next_wake(now),
        "batches": {
            b: (
                core.batch(b).lease_deadline,
                core.batch(b).stop,
                core.batch(b).lost,
                [
                    (j.job_id, j.stop, j.pending, j.renewed, j.progress, j.checkpoint)
                    for j in core.batch(b).jobs.values()
                ],
            )
            for b in core.batch_ids()
        },
    }


NAMED = [p for p in PATHS if not p.name.startswith("drawn-")]


def batch_of(handles: Mapping[int, Any], job_id: int) -> int:
    return next(b for b, h in handles.items() if any(j.id == job_id for j in h.jobs))


def lease_of(handles: Mapping[int, Any], job_id: int) -> JobLease:
    lease: JobLease = handles[batch_of(handles, job_id)].leases[job_id]
    return lease


@pytest.mark.parametrize("path", NAMED, ids=lambda p: p.stem)
async def test_the_trio_runtime_makes_the_recorded_calls(
    path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Played through the real ``Guard`` (its loop, its scopes, its renewal tasks) on a
    clock that moves only to each input's time, a named trace leaves that guard's core
    and cancel scopes exactly where the recorder leaves its own, after every step: the
    recorder calls the core in the runtime's order. (The drawn traces are left out: they
    may wake the guard when its own nap has not run out, or answer a settled token.)"""
    autojump_clock.autojump_threshold = math.inf  # time moves only as the trace says
    trace = load(path)
    timing = timing_of(trace)
    backend = ScriptedBackend(trace["wall_offset"])
    guard = Guard(GuardCore(timing), cast(Backend, backend))
    recorder = Recorder(timing, wall_offset=trace["wall_offset"])
    handles: dict[int, Any] = {}
    async with trio.open_nursery() as nursery:
        await nursery.start(guard.run)
        try:
            for index, step in enumerate(trace["steps"]):
                given = step["input"]
                autojump_clock.jump(given["at"] - trio.current_time())
                await trio.testing.wait_all_tasks_blocked()
                # Read now, so that a deadline that passed stays passed (trio's scopes are
                # cancelled when their deadline passes, whatever moves it later).
                fired = {b: h.scope.cancel_called for b, h in handles.items()}
                kind = given["kind"]
                if kind == "claim":
                    claimed = [
                        Claimed(
                            Job(
                                j["job_id"],
                                "q",
                                None,
                                j["attempt"],
                                j["max_attempts"],
                                j["claim_seq"],
                            ),
                            j["lease_until"],
                            j["locked_after"],
                        )
                        for j in given["jobs"]
                    ]
                    one_call = given.get("batch_handler", False)
                    handle = guard.register(claimed, given["claim_sent"], one_call=one_call)
                    if handle is not None:
                        handles[handle.batch_id] = handle
                elif kind == "answer":
                    backend.settle(given["token"], {j: Verdict(v) for j, v in given["verdicts"]})
                elif kind == "fail":
                    backend.settle(given["token"], RuntimeError("scripted"))
                elif kind == "cancel_notice":
                    guard.cancel_notice(given["job_id"])
                elif kind == "progress":
                    value = valid_progress(decode_value(given["value"]))
                    if value is not None:  # JobContext.report_progress
                        lease_of(handles, given["job_id"]).progress = value
                elif kind == "checkpoint":
                    lease = lease_of(handles, given["job_id"])
                    if lease.checkpoint is None:  # JobContext.checkpoint
                        lease.checkpoint = CheckpointSlot(given["value"])
                    else:
                        lease.checkpoint.latest = given["value"]
                elif kind in ("handler_exit", "batch_exit"):
                    batch_id = given.get("batch_id") or batch_of(handles, given["job_id"])
                    leases = handles[batch_id].leases
                    for job_id in [given["job_id"]] if kind == "handler_exit" else list(leases):
                        guard.settle(leases[job_id])
                    if all(not lease.pending for lease in leases.values()):
                        guard.unregister(batch_id)
                        del handles[batch_id]
                elif kind == "shutdown":
                    guard.begin_shutdown(given["grace"])
                await trio.testing.wait_all_tasks_blocked()
                recorder.feed(given)
                where = f"step {index} ({kind})"
                now = recorder.now
                assert core_state(guard.core, now) == core_state(recorder.core, now), where
                scopes = {
                    b: (h.scope.deadline, fired.get(b, False) or h.scope.cancel_called)
                    for b, h in handles.items()
                }
                mirrored = {b: (s.deadline, s.cancel_called) for b, s in recorder._scopes.items()}
                assert scopes == mirrored, where
            nursery.cancel_scope.cancel()
        finally:
            for done, slot in backend.calls:  # let wedged calls go, even after a failure
                if not done.is_set():
                    slot.append(RuntimeError("test over"))
                    done.set()
