-- Placeholder on the `deps` branch only: migration 0017 belongs to another branch (snooze,
-- docs/protocol.rst §17), which the migrations need to stay contiguous. Take that branch's
-- file when merging.
SELECT 1;
