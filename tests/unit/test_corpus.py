"""The corpus of drawn scripts, proofs/corpus/scripts.jsonl (docs/porting.rst, "The corpus
of drawn scripts"): every line replays against the current core, matches the trace
schema, and the file is what ``proofs/corpus/generate.py --write`` writes today."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from tests._modules import load_file
from trioqueue._core.rules import OutcomeKind, StopReason
from trioqueue.testing.traces import INPUT_KINDS

PROOFS = Path(__file__).resolve().parents[2] / "proofs"
CORPUS = load_file(PROOFS / "corpus" / "generate.py", "corpus_generator")
SCHEMA = json.loads((PROOFS / "traces" / "schema.json").read_text(encoding="utf-8"))
SAMPLE = 10  # every SAMPLE-th line is validated against the schema


@cache
def corpus() -> list[dict[str, Any]]:
    traces: list[dict[str, Any]] = CORPUS.read_corpus()
    return traces


def test_every_line_replays_against_the_current_core() -> None:
    failures = CORPUS.replay_failures(corpus())
    assert not failures, "\n".join([*failures, f"if the core changed on purpose: {CORPUS.COMMAND}"])


def test_every_line_is_what_its_seed_draws_and_the_core_records_today() -> None:
    """Each line, byte for byte, is the trace of the script its name's seed draws. (The
    search for the rare behaviours' seeds is the generator's ``--check``, a few seconds;
    the next test checks what it chose.)"""
    committed = CORPUS.CORPUS.read_text(encoding="utf-8").splitlines()
    stale = [
        number
        for number, (text, trace) in enumerate(zip(committed, corpus(), strict=True), 1)
        if CORPUS.line(CORPUS.redraw(trace["name"])) != text
    ]
    assert not stale, f"lines {stale[:10]} of scripts.jsonl are out of date: run {CORPUS.COMMAND}"


def test_the_corpus_is_the_plain_seeds_then_each_rare_behaviour() -> None:
    """The plain part is seeds 0 to PLAIN - 1 in order; then, behaviour by behaviour of
    RARE, at most its quota of candidate seeds, ascending, each showing that behaviour."""
    names = [trace["name"] for trace in corpus()]
    assert names[: CORPUS.PLAIN] == [f"plain-{seed}" for seed in range(CORPUS.PLAIN)]
    rare = corpus()[CORPUS.PLAIN :]
    parts = [trace["name"].rsplit("-", 1)[0] for trace in rare]
    assert parts == sorted(parts, key=list(CORPUS.RARES).index)
    candidates = range(CORPUS.RARE_SEEDS, CORPUS.RARE_SEEDS + CORPUS.CANDIDATES)
    for behaviour in CORPUS.RARE:
        chosen = [t for t, part in zip(rare, parts, strict=True) if part == behaviour.name]
        seeds = [int(t["name"].rsplit("-", 1)[1]) for t in chosen]
        assert len(seeds) <= behaviour.quota and seeds == sorted(seeds), behaviour.name
        assert all(seed in candidates for seed in seeds), behaviour.name
        assert all(behaviour.shows in CORPUS.features(t) for t in chosen), behaviour.name


def test_lines_match_the_trace_schema() -> None:
    """A sample, every SAMPLE-th line (jsonschema takes some 20 ms a line): the lines are
    written by the recorder that writes the checked-in traces, whose every file
    tests/unit/test_traces.py validates."""
    validator = jsonschema.Draft202012Validator(SCHEMA)
    sample = [(n, t) for n, t in enumerate(corpus(), 1) if n % SAMPLE == 0]
    bad = [
        f"line {n} ({trace['name']}): {list(error.absolute_path)}: {error.message}"
        for n, trace in sample
        for error in validator.iter_errors(trace)
    ]
    assert not bad, "\n".join(bad[:10])


def test_a_line_that_differs_is_named_with_its_first_mismatch() -> None:
    """The replay check can fail: one decision changed in the second line is reported by
    line number, name, step and field."""
    good, changed = copy.deepcopy(corpus()[:2])
    changed["steps"][0]["decisions"]["connections_held"] = 99
    (failure,) = CORPUS.replay_failures([good, changed])
    assert failure.startswith(f"line 2 ({changed['name']}): step 0 ")
    assert "connections_held differs: trace has 99" in failure


def test_lines_are_distinct_and_named_once() -> None:
    names = [trace["name"] for trace in corpus()]
    assert len(set(names)) == len(names)
    scripts = {json.dumps([step["input"] for step in trace["steps"]]) for trace in corpus()}
    assert len(scripts) == len(names)


def test_the_corpus_shows_every_input_kind_outcome_and_stop() -> None:
    """Each input kind, each outcome and each stop deciding an outcome is on some line;
    when a change of the core or of the strategy loses one, raise ``CANDIDATES`` (or a
    quota of ``RARE``) in proofs/corpus/generate.py."""
    shown = set().union(*(CORPUS.features(trace) for trace in corpus()))
    wanted = {f"input: {kind}" for kind in INPUT_KINDS if kind != "tick"}
    wanted |= {f"outcome: {kind.value}" for kind in OutcomeKind}
    wanted |= {f"outcome decided by: {stop.name}" for stop in StopReason}
    assert not wanted - shown, sorted(wanted - shown)
