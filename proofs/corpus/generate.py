"""Write proofs/corpus/scripts.jsonl: a few hundred scripts drawn at random, each recorded
by the reference core as a conformance trace, one trace per line (docs/porting.rst, "The
corpus of drawn scripts").

    python proofs/corpus/generate.py --write    # rewrite the corpus from the current core
    python proofs/corpus/generate.py --check    # exit 1 if the corpus would change
    python proofs/corpus/generate.py --stats    # what share of its lines shows what
    python proofs/corpus/generate.py --draw 5000 [--seed S] [--max-inputs M] > fresh.jsonl

Theory of operation. The scripts come from the strategy of the drawn traces,
``scripts()`` in proofs/traces/generate.py, but not through hypothesis's engine: how it
turns a seed into choices changes from one hypothesis release to the next (and recent
releases also draw constants they find in the source tree), so a corpus drawn by it would
follow the machine's hypothesis. Instead the strategy's own function is called with a
``draw`` of ours that answers each primitive strategy it uses (``sampled_from``,
``just``, ``integers``, ``booleans``) uniformly from ``random.Random(seed).random()``, the
one sequence Python promises to keep for a seed; a strategy it does not know is an error.
The corpus is thus a function of the seeds, the strategy and the core alone.

The corpus has two parts. First the scripts of seeds ``0 .. PLAIN - 1`` (at most 24
inputs each), as drawn: the strategy's own mix. Then, among the scripts of
``CANDIDATES`` further seeds (at most 48 inputs each), the first ones whose trace shows a
behaviour of :data:`RARE` that the plain mix seldom reaches, up to its quota each; a
script is taken once, for the first behaviour on the list it shows. Each line's ``name``
is its part and seed, and its ``description`` says why it is there.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from trioqueue.testing.traces import INPUT_KINDS, Json, record, replay

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "scripts.jsonl"
TRACES_GENERATOR = HERE.parent / "traces" / "generate.py"

#: The command that rewrites the corpus, as the checks name it.
COMMAND = "python proofs/corpus/generate.py --write"

PLAIN = 300  # scripts of the plain part
PLAIN_INPUTS = 24
CANDIDATES = 5000  # scripts searched for the rare behaviours
RARE_INPUTS = 48
RARE_SEEDS = 100_000  # the first seed searched: apart from the plain part's
FRESH_SEEDS = 1_000_000  # the first seed of --draw: apart from both


# -- drawing a script from a seed -----------------------------------------------------------


def _load_strategy() -> Callable[..., Json]:
    """The function behind ``scripts()`` of proofs/traces/generate.py (imported under its
    own name: this file is ``generate`` too)."""
    spec = importlib.util.spec_from_file_location("proofs_traces_generate", TRACES_GENERATOR)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    composite = _unwrap(module.scripts())
    return cast(Callable[..., Json], composite.definition)


def _unwrap(strategy: object) -> Any:
    # hypothesis builds most strategies lazily; the built one holds the parameters.
    return getattr(strategy, "wrapped_strategy", strategy)


def seeded_draw(rng: random.Random) -> Callable[[object], object]:
    """A ``draw`` for a composite strategy: each primitive strategy answered uniformly."""

    def pick(n: int) -> int:
        return int(rng.random() * n)

    def draw(strategy: object) -> object:
        built = _unwrap(strategy)
        kind = type(built).__name__
        if kind == "SampledFromStrategy" and not built._transformations:
            return built.elements[pick(len(built.elements))]
        if kind == "JustStrategy":  # sampled_from a single element
            return built.value
        if kind == "IntegersStrategy":
            return built.start + pick(built.end - built.start + 1)
        if kind == "BooleansStrategy":
            return pick(2) == 1
        raise TypeError(f"the corpus cannot draw from {strategy!r}")

    return draw


_STRATEGY: list[Callable[..., Json]] = []


def draw_script(seed: int, max_inputs: int) -> Json:
    """The script of ``seed``: always the same for the same strategy and core."""
    if not _STRATEGY:
        _STRATEGY.append(_load_strategy())
    try:
        return _STRATEGY[0](seeded_draw(random.Random(seed)), max_inputs)
    except Exception as exc:
        raise RuntimeError(f"drawing the script of seed {seed}: {exc}") from exc


def draw_trace(seed: int, max_inputs: int, name: str, description: str) -> Json:
    return record({**draw_script(seed, max_inputs), "name": name, "description": description})


# -- what a trace shows -----------------------------------------------------------------------


def features(trace: Json) -> set[str]:
    """The behaviours a trace shows, as the corpus's statistics count them."""
    found = {"timing: max_job_duration set"} if trace["timing"]["max_job_duration"] else set()
    for step in trace["steps"]:
        found |= _step_features(step["input"], step["decisions"])
    if "input: shutdown" not in found:
        found.add("no shutdown")
    return found


def _step_features(given: Json, made: Json) -> set[str]:
    found = {f"input: {given['kind']}"}
    if given["kind"] == "claim":
        found.add(f"claim of {len(given['jobs'])} job(s)")
    elif given["kind"] == "fail":
        found.add(f"renewal failed: {given['how']}")
    elif given["kind"] == "answer":
        found |= {f"verdict: {verdict}" for _, verdict in given["verdicts"]}
    elif given["kind"] == "handler_exit" and given["error"] is not None:
        found.add("handler raised")
    found |= {f"stop delivered: {reason}" for _, _, reason in made["stops"]}
    if made["cancels"]:
        found.add("cancel delivered")
    if len(made["stops"]) + len(made["cancels"]) > 1:
        found.add("several stops or cancels in one step")
    if made["abandoned"] is not None:
        found.add("renewal abandoned")
    if made["connections_held"] == 2:
        found.add("two connections held")
    if made["scopes_fired"]:
        found.add("scope fired")
    result = made["result"] or {}
    if result.get("accepted") is False:
        found.add("claim refused (expired on arrival)")
    outcomes = [result["outcome"]] if "outcome" in result else result.get("outcomes", [])
    for outcome in outcomes:  # a handler's, or each of a batch handler call's
        found.add(f"outcome: {outcome['kind']}")
        found.add(f"outcome decided by: {outcome['stop'] or 'the handler'}")
        if outcome["stop"] == "CANCELLED" and "(" in (outcome["message"] or ""):
            found.add("cancelled handler that raised")
    if given.get("batch_handler"):
        found.add("batch handler call")
    return found


@dataclass(frozen=True)
class Rare:
    """A behaviour the corpus holds ``quota`` scripts of, found among the candidates."""

    name: str
    quota: int
    shows: str  # the feature of :func:`features` that marks it
    why: str  # for the line's description


RARE = [
    Rare("gone", 5, "outcome decided by: GONE", "a job's row gone, believed when seen twice"),
    Rare(
        "several-stops",
        8,
        "several stops or cancels in one step",
        "several stops or cancels delivered in one step, in their defined order "
        "(docs/protocol.rst §10, refinement 13)",
    ),
    Rare(
        "cancel-raised",
        15,
        "cancelled handler that raised",
        "a cancelled handler that raised (docs/protocol.rst §10, refinement 14)",
    ),
    Rare("cancelled", 15, "outcome decided by: CANCELLED", "a job cancelled"),
    Rare("reclaimed", 15, "outcome decided by: RECLAIMED", "a job's row reclaimed"),
    Rare("duration", 10, "outcome decided by: DURATION", "max_job_duration stopping a handler"),
    Rare("fence", 10, "outcome decided by: LEASE_EXPIRED", "the fence stopping a handler"),
    Rare("two-connections", 10, "two connections held", "two renewal connections held"),
    Rare("no-shutdown", 20, "no shutdown", "a long run without shutdown"),
]
RARES = {rare.name: rare for rare in RARE}


# -- the corpus ----------------------------------------------------------------------------


def plain_trace(seed: int) -> Json:
    description = f"drawn: seed {seed}, at most {PLAIN_INPUTS} inputs (the plain mix)"
    return draw_trace(seed, PLAIN_INPUTS, f"plain-{seed}", description)


def rare_trace(rare: Rare, seed: int) -> Json:
    description = (
        f"drawn: seed {seed}, at most {RARE_INPUTS} inputs, chosen among {CANDIDATES} "
        f"for showing {rare.why}"
    )
    return draw_trace(seed, RARE_INPUTS, f"{rare.name}-{seed}", description)


def rare_seeds() -> dict[str, list[int]]:
    """For each behaviour of :data:`RARE`, the first seeds among the candidates whose
    trace shows it (up to its quota), a seed going to the first behaviour it shows."""
    chosen: dict[str, list[int]] = {rare.name: [] for rare in RARE}
    for seed in range(RARE_SEEDS, RARE_SEEDS + CANDIDATES):
        shown = features(draw_trace(seed, RARE_INPUTS, "", ""))
        wanted = (r for r in RARE if r.shows in shown and len(chosen[r.name]) < r.quota)
        rare = next(wanted, None)
        if rare is not None:
            chosen[rare.name].append(seed)
    return chosen


def expected_traces() -> Iterator[Json]:
    """The corpus as the current strategy and core give it, line by line."""
    yield from (plain_trace(seed) for seed in range(PLAIN))
    chosen = rare_seeds()
    for rare in RARE:
        yield from (rare_trace(rare, seed) for seed in chosen[rare.name])


def redraw(name: str) -> Json:
    """The line named ``name`` (``plain-<seed>`` or ``<behaviour>-<seed>``) drawn anew,
    without the search for rare behaviours."""
    part, seed = name.rsplit("-", 1)
    if part == "plain":
        return plain_trace(int(seed))
    return rare_trace(RARES[part], int(seed))


def line(trace: Json) -> str:
    """One trace as one line of compact JSON (keys in the trace's own order)."""
    return json.dumps(trace, separators=(",", ":"), allow_nan=False, ensure_ascii=False)


def expected_text() -> str:
    """The corpus file as the current strategy and core give it."""
    return "".join(line(trace) + "\n" for trace in expected_traces())


def read_corpus(path: Path = CORPUS) -> list[Json]:
    return [json.loads(text) for text in path.read_text(encoding="utf-8").splitlines()]


def replay_failures(traces: Iterable[Json], limit: int = 10) -> list[str]:
    """For each line that does not replay against the current core (up to ``limit``), its
    number (from 1), its name and its first mismatch."""
    failures = []
    for number, trace in enumerate(traces, start=1):
        mismatches = replay(trace)
        if mismatches:
            failures.append(f"line {number} ({trace.get('name')}): {mismatches[0]}")
            if len(failures) == limit:
                break
    return failures


def stats(traces: Sequence[Json]) -> list[str]:
    """What share of the lines shows each behaviour, every input kind included."""
    counts = Counter(feature for trace in traces for feature in features(trace))
    for kind in INPUT_KINDS:
        counts.setdefault(f"input: {kind}", 0)
    size = sum(len(line(trace)) + 1 for trace in traces)
    steps = sum(len(trace["steps"]) for trace in traces)
    head = [f"{len(traces)} traces, {steps} steps, {size / 1e6:.2f} MB"]
    return head + [
        f"{counts[name] / len(traces):7.1%}  {name}" for name in sorted(counts, key=str.lower)
    ]


# -- the command ----------------------------------------------------------------------------


def _arguments(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--write", action="store_true", help="rewrite the corpus")
    what.add_argument("--check", action="store_true", help="exit 1 if it would change")
    what.add_argument("--stats", action="store_true", help="what its lines show")
    what.add_argument("--draw", type=int, metavar="N", help="print N fresh traces")
    parser.add_argument("--seed", type=int, default=FRESH_SEEDS, help="first seed of --draw")
    parser.add_argument("--max-inputs", type=int, default=PLAIN_INPUTS, help="for --draw")
    return parser.parse_args(argv)


def main(argv: Sequence[str]) -> int:
    args = _arguments(argv)
    if args.draw is not None:
        for seed in range(args.seed, args.seed + args.draw):
            description = f"drawn: seed {seed}, at most {args.max_inputs} inputs"
            print(line(draw_trace(seed, args.max_inputs, f"fresh-{seed}", description)))
        return 0
    if args.stats:
        print("\n".join(stats(read_corpus())))
        return 0
    text = expected_text()
    if args.write:
        CORPUS.write_text(text, encoding="utf-8")
        print(stats([json.loads(t) for t in text.splitlines()])[0])
        return 0
    if CORPUS.exists() and CORPUS.read_text(encoding="utf-8") == text:
        return 0
    print(f"{CORPUS.name} would change: run {COMMAND}")
    if CORPUS.exists():
        print("\n".join(replay_failures(read_corpus(), limit=5)))
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
