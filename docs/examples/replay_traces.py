"""Replay the conformance traces against trioqueue's own core (docs/porting.rst).

``replay`` does it all; the loop below shows, step by step, what a port does in its own
language: feed each input to its core, then compare every decision with the trace's.
"""

from pathlib import Path

from trioqueue.testing import traces

TRACES = Path(__file__).resolve().parents[2] / "proofs" / "traces"


def replay_by_hand(trace: dict) -> int:
    """Feed the inputs one by one; return how many steps matched."""
    recorder = traces.Recorder(
        traces.timing_of(trace), wall_offset=trace["wall_offset"]
    )
    for index, step in enumerate(trace["steps"]):
        (ours,) = recorder.feed(step["input"])
        for name, expected in step["decisions"].items():
            got = ours["decisions"][name]
            assert got == expected, f"step {index}: {name}: {got!r} != {expected!r}"
    return len(trace["steps"])


async def main() -> None:
    checked = 0
    for path in traces.traces_in(TRACES):
        trace = traces.load(path)
        mismatches = traces.replay(trace)  # [] when the core decides the same
        assert not mismatches, "\n".join(map(str, mismatches))
        checked += replay_by_hand(trace)
    print(f"{checked} steps replayed identically")


if __name__ == "__main__":
    import trio

    trio.run(main)
