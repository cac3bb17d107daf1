-- Storage settings of the hot table (docs/performance.rst, "Vacuum and bloat"): autovacuum
-- and autoanalyze of `jobs` triggered by how much churned, not by how much history the
-- table keeps.
--
-- {schema} is replaced by the quoted, validated schema name before this file runs.
--
-- Autovacuum vacuums a table once its dead rows pass threshold + scale_factor * rows (the
-- server's defaults: 50 + 0.2 * rows). Every job leaves dead row versions behind (its
-- claim's and its ack's updates move `status`, so neither is HOT), at a rate set by the
-- traffic alone; but a jobs table that keeps its finished rows counts them in `rows`, so
-- with the default the wait grows with the history: 2M dead rows before a vacuum with
-- 10M finished jobs kept. Meanwhile the claim path's partial indexes (migrations 0001,
-- 0006) fill with entries of rows already claimed, which every claim walks past.
-- Measured (bench/bench_bloat.py, 300,000 finished jobs kept, steady load side by side,
-- autovacuum otherwise at its defaults, 20 minutes at about 50 jobs/s each): with the
-- defaults one autovacuum ran, after 12 minutes, dead rows peaked at 75,418 (26,369 on
-- average over the second half) and the claim path's two indexes grew to 3.0 MB; with
-- the first two scale factors below, 19 autovacuums, 8,760 at most (2,920 on average), 1.6 MB.
ALTER TABLE {schema}.jobs SET (
    -- A vacuum once 1% of the rows are dead (3,050 here, 100,050 with 10M kept): at 1,000
    -- jobs/s about one a minute, which is autovacuum's naptime anyway. A vacuum of a big
    -- table is cheap: it skips the pages the visibility map marks all-visible (history
    -- that nobody changes), and leaves its indexes alone while few pages have dead rows.
    autovacuum_vacuum_scale_factor = 0.01,
    -- Likewise for inserts (PostgreSQL 13+): every enqueue is one, and the vacuum they
    -- trigger marks new pages all-visible and freezes their rows in small steps instead
    -- of in one anti-wraparound pass over the whole history.
    autovacuum_vacuum_insert_scale_factor = 0.01,
    -- And the planner's statistics: ANALYZE by default waits for 10% of the rows changed
    -- (1M with 10M finished jobs kept). Measured (bench/bench_history.py, 1M kept, after
    -- churn, statistics from before any job ran): the ack of 2 jobs chose the claim path's
    -- index of running rows, estimated to hold 1 row, and walked all 20,200 leases in
    -- flight: 347 ms and 10,291 buffers. After ANALYZE it looks the 2 ids up by primary
    -- key: 0.34 ms, 12 buffers. 1% keeps the estimates within a minute or so of a busy
    -- queue's changes; an ANALYZE reads a sample (30,000 rows), whatever the table's size.
    autovacuum_analyze_scale_factor = 0.01
);
-- Not set, by the same measurement: autovacuum_vacuum_cost_delay (0 instead of the
-- default 2 ms changed nothing: 19 autovacuums, 8,960 dead rows at most, 2,703 on
-- average; the vacuums of this table are short); an absolute threshold instead (scale
-- factor 0, 20,000 dead or 100,000 inserted rows: 5 autovacuums, 24,567 at most, 10,029
-- on average; and a constant cannot suit both a small queue and a busy one). fillfactor
-- stays at migration 0006's 60, which renewals need.
