-- Counts of finished jobs on a big table (docs/dashboard.rst, "Big tables"): past a
-- threshold, queue_stats estimates each queue's succeeded and failed jobs instead of
-- counting millions of rows. The estimate is the planner's statistics: the table's size and
-- the joint frequency of each (queue, status) pair in ANALYZE's sample, which these
-- extended statistics keep (a most-common-values list over both columns: per-column
-- statistics would have to assume a queue's failure rate is every queue's).
-- Statistics cost nothing on the claim, renewal or ack path: ANALYZE (autovacuum's, at its
-- defaults) computes them from its sample; no index entry and no trigger is added.
CREATE STATISTICS {schema}.jobs_queue_status_stats (mcv) ON queue, status FROM {schema}.jobs;
