-- Checkpoints (docs/protocol.rst §16): the latest JSON value an attempt stored with
-- ctx.checkpoint, written by the fenced renewal and by the attempt's outcome write, and
-- delivered by the next claim; and when it was stored. A claim keeps both (unlike progress,
-- a checkpoint is for the next attempt). Neither column is indexed, so a renewal that
-- writes them is still a HOT update (migration 0006); a renewal that carries no checkpoint
-- writes the row's own value back, and a large one stays in its TOAST pointer.
--
-- {schema} is replaced by the quoted, validated schema name before this file runs.

ALTER TABLE {schema}.jobs
    ADD COLUMN checkpoint jsonb,
    ADD COLUMN checkpointed_at timestamptz;
