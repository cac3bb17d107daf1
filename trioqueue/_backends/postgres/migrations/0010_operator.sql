-- Operator controls (docs/dashboard.rst, "Controls", "Audit log"): the audit log of actions
-- taken through the dashboard, and schedules that can be switched off.
--
-- {schema} is replaced by the quoted, validated schema name before this file runs.

-- One row per action an operator took (a job cancelled, a queue paused, every failed job of
-- a queue retried...). Only ever appended to and read newest first, so the primary key is
-- its one index besides the action filter's.
CREATE TABLE {schema}.audit_log (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      timestamptz NOT NULL DEFAULT now(),
    action  text NOT NULL,
    target  text NOT NULL,
    session text NOT NULL,
    detail  jsonb NOT NULL
);
CREATE INDEX audit_log_action_idx ON {schema}.audit_log (action, id);

-- A disabled schedule is skipped by the scheduling pass; enabling it again moves its next
-- run to the first tick after that moment (set_schedule_enabled). A constant default, so
-- adding it rewrites no row.
ALTER TABLE {schema}.schedules ADD COLUMN enabled boolean NOT NULL DEFAULT true;
