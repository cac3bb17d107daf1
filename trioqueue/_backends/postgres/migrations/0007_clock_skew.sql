-- Clock skew in the worker registry (docs/protocol.rst §8): each pool's beat reports how
-- far its clock is ahead of the database's (seconds, negative when behind), as its last
-- claim or clock probe measured it, and the verdict it drew: 'in_sync', 'ahead' (warned),
-- or 'stopped' (not claiming: ahead by more than V - H). NULL until a pool measured it.
-- (The beat's values are validated before they are sent: trioqueue/_backends/validation.py.)
--
-- {schema} is replaced by the quoted, validated schema name before this file runs.

ALTER TABLE {schema}.workers ADD COLUMN clock_skew float8;
ALTER TABLE {schema}.workers ADD COLUMN clock_verdict text;
