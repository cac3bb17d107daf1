"""Checkpoints: what an attempt has told the database it reached (docs/protocol.rst §16, I18).

A handler's ``ctx.checkpoint(value)`` leaves the value's JSON text here; the guard's next
renewal carries it, fenced by ``claim_seq`` like progress, and the attempt's final write
(ack, fail, release) carries it too. Unlike progress, a checkpoint can be large (up to
``MAX_CHECKPOINT_BYTES``), so a value the database already holds is not sent again with
every beat: a slot remembers what it **stored** (a renewal that carried it came back with a
verdict that renewed the row) and what the current renewal **carried**. A renewal that
failed or was abandoned may or may not have written its checkpoint, so the slot then knows
nothing stored, and the next renewal sends the latest value again.

Only one renewal is current at a time (the guard's slot, §2), so one ``carried`` field per
job suffices. The slot is created by the first checkpoint of an attempt: a job that never
checkpoints costs one empty field of its lease, nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class CheckpointSlot:
    """One attempt's checkpoint, as the guard and the final write see it."""

    #: The JSON text of the latest ``ctx.checkpoint`` (written by the handler, perhaps from
    #: a worker thread: one attribute store, so a reader sees the old text or the new one).
    latest: str
    #: The text the database is known to hold from this attempt; None: not known.
    stored: str | None = None
    #: The text the current renewal carries for this job; None: it carries none.
    carried: str | None = None

    def outgoing(self) -> str | None:
        """The text a renewal built now carries (remembered as carried), or None when the
        database holds the latest already."""
        latest = self.latest
        self.carried = None if latest == self.stored else latest
        return self.carried

    def renewed(self) -> None:
        """The renewal that carried the job renewed its row: it stored what it carried."""
        if self.carried is not None:
            self.stored, self.carried = self.carried, None

    def unsure(self) -> None:
        """The renewal failed, was abandoned, or skipped the row: what it carried may or may
        not be stored (a skipped row, surely not), so the next renewal sends the latest."""
        if self.carried is not None:
            self.stored = self.carried = None


def latest_checkpoint(slot: CheckpointSlot | None) -> str | None:
    """What an attempt's final write carries: its latest checkpoint, stored or not (a
    renewal that stored it may have been overtaken, so the last word is repeated), or None
    when the attempt set none."""
    return None if slot is None else slot.latest
