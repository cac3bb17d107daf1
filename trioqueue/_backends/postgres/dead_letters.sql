-- Dead letters (docs/protocol.rst §19): the jobs that failed for good, cancellations among
-- them (cancelled = true), newest first. Read with queries.sql (sql.py).
--
-- Their filters, shared by both statements (the fragment dead_letter_rows; retry_matching's
-- $7..$10 in operator.sql are the same filters):
-- $1 a queue, $2 a pattern of last_error (escaped as list_jobs' search), $3 the error type
-- of the job's last attempt ('': none recorded, or no attempt row), $4 and $5 a range of finished_at ([since, before)), $6 the
-- cancellations kept alone (true) or left out (false). NULL: no filter.
--
-- The rows come newest first by id from jobs_dead_idx (migration dead_letters), a partial index of
-- the failed rows only: a page or a sample reads the failed rows it shows, never the
-- finished ones around them, and the index costs the claim, renewal and ack path nothing
-- (a row enters it once, when it fails for good). A job's error type is its last attempt
-- row's (the highest claim_seq), one probe of the attempts' primary key per row read.

-- fragment: dead_letter_rows
-- The rows both statements read: the failed jobs matching $1..$6, each with its error type.
FROM {schema}.jobs AS j
LEFT JOIN LATERAL (
    SELECT a.error_type FROM {schema}.attempts AS a
    WHERE a.job_id = j.id ORDER BY a.claim_seq DESC LIMIT 1
) AS t ON true
WHERE j.status = 'failed'
  AND ($1::text IS NULL OR j.queue = $1::text)
  AND ($2::text IS NULL OR j.last_error ILIKE $2::text ESCAPE '\')
  AND ($3::text IS NULL OR coalesce(t.error_type, '') = $3::text)
  AND ($4::timestamptz IS NULL OR j.finished_at >= $4::timestamptz)
  AND ($5::timestamptz IS NULL OR j.finished_at < $5::timestamptz)
  AND ($6::boolean IS NULL OR j.cancelled = $6::boolean)

-- name: list_dead_letters
-- One page: the $8 dead letters with an id below $7 (NULL: from the newest).
SELECT j.id, j.queue, j.attempts, j.max_attempts, j.priority,
       left(j.last_error, $9::integer) AS last_error, t.error_type, j.cancelled,
       j.created_at, j.finished_at
{fragment:dead_letter_rows}
  AND ($7::bigint IS NULL OR j.id < $7::bigint)
ORDER BY j.id DESC
LIMIT $8::bigint;

-- name: dead_letter_summary
-- How many match, per queue and per error type, among the newest $7 that match (NULL:
-- all of them, an exact count). One row more than the sample is read, to tell a sample
-- that holds every match from one that does not (the 'total' row counts it).
WITH picked AS (
    SELECT j.id, j.queue, t.error_type
    {fragment:dead_letter_rows}
    ORDER BY j.id DESC
    LIMIT $7::bigint + 1
),
sample AS (
    SELECT p.queue, p.error_type FROM picked AS p ORDER BY p.id DESC LIMIT $7::bigint
)
SELECT 'total' AS kind, NULL::text AS name, (SELECT count(*) FROM picked) AS n
UNION ALL
SELECT 'queue', s.queue, count(*) FROM sample AS s GROUP BY s.queue
UNION ALL
SELECT 'error_type', s.error_type, count(*) FROM sample AS s GROUP BY s.error_type;
