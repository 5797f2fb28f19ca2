-- Coverage per token per UTC day (lake/README.md "coverage"), for every token this batch touched, over the days from
-- the token's open stretch before the batch (its last stored `book` checkpoint, else its first message) to its last
-- message: every day the batch touches or re-decides. Run by ingest/integrity/coverage.ts after the replay staged
-- its checkpoints and incidents. Inputs: _bk_touch(tok, asset_id, condition_id), stg_checkpoints, stg_incidents, stg_l2,
-- and what the lake holds: _cov_ck_stored (book checkpoints of the touched tokens), _cov_inc_stored (their
-- top_mismatch/crossed/capture_disconnect incidents) and _cov_l2_stored (asset_id, seq, recv_ts of their l2 rows on
-- the range's days).
-- Output: rows appended to stg_coverage (onConflict replace: recomputed rows win).

CREATE OR REPLACE TEMP TABLE _cov_ck AS
SELECT DISTINCT ON (asset_id, seq) asset_id, seq, ts, since_ts, ok FROM (
  SELECT asset_id, seq, ts, since_ts, ok FROM stg_checkpoints WHERE kind = 'book'
  UNION ALL
  SELECT asset_id, seq, ts, since_ts, ok FROM _cov_ck_stored
) ORDER BY asset_id, seq;

-- A duplicated frame's copy is not a message (the lake's l2 keeps its rows once, under the first copy's seq).
-- Tokens by their number in _bk_touch (tok), not their 77-digit id: the distinct runs over every l2 row of the
-- batch and of the stored days, and a hash table of fixed-width keys stays small beside the staged batch in the
-- memory limit (a 3.8M-row archive hour, quiet: 5.4 s with the text keys, 3.1 s with these).
CREATE OR REPLACE TEMP TABLE _cov_msg AS
SELECT DISTINCT tok, seq, recv_ts FROM (
  SELECT t.tok, l.seq, l.recv_ts FROM stg_l2 l JOIN _bk_touch t USING (asset_id)
  WHERE NOT EXISTS (SELECT 1 FROM stg_incidents d WHERE d.kind = 'duplicate' AND d.asset_id = l.asset_id AND d.seq = l.seq)
  UNION ALL
  SELECT t.tok, s.seq, s.recv_ts FROM _cov_l2_stored s JOIN _bk_touch t USING (asset_id)
);

-- The range of each token: from the stretch open before the batch to its last message.
CREATE OR REPLACE TEMP TABLE _cov_tok AS
WITH batch AS (
  SELECT asset_id, min(recv_ts) AS lo, max(recv_ts) AS hi FROM stg_l2 WHERE asset_id IS NOT NULL GROUP BY asset_id
), before AS (
  SELECT b.asset_id, max(c.ts) AS last_ck FROM batch b JOIN _cov_ck c ON c.asset_id = b.asset_id AND c.ts < b.lo GROUP BY b.asset_id
), span AS (
  SELECT t.asset_id, min(m.recv_ts) AS first_ts, max(m.recv_ts) AS last_ts FROM _cov_msg m JOIN _bk_touch t USING (tok) GROUP BY t.asset_id
)
SELECT t.asset_id, t.condition_id, s.first_ts, s.last_ts,
       CAST(coalesce(bf.last_ck, s.first_ts) AS DATE) AS lo_day, CAST(s.last_ts AS DATE) AS hi_day,
       -- The open tail (unverified): after the token's last book checkpoint, else from its first message.
       coalesce((SELECT max(c.ts) FROM _cov_ck c WHERE c.asset_id = t.asset_id), s.first_ts) AS tail_from
FROM _bk_touch t JOIN batch b USING (asset_id) JOIN span s USING (asset_id) LEFT JOIN before bf USING (asset_id);

-- Stretches: (since_ts, ts] of each book checkpoint — verified, or degraded when it failed or holds a top_mismatch /
-- crossed incident, or unverified when it overlaps a capture outage (capture_disconnect: nothing was recorded then,
-- so a passing checkpoint proves only what the capture holds, not that nothing was missed) — and the open tail.
CREATE OR REPLACE TEMP TABLE _cov_stretch AS
WITH inc AS (
  SELECT asset_id, kind, from_ts, to_ts FROM stg_incidents WHERE kind IN ('top_mismatch', 'crossed', 'capture_disconnect')
  UNION ALL
  SELECT asset_id, kind, from_ts, to_ts FROM _cov_inc_stored
)
SELECT c.asset_id, c.since_ts AS a, c.ts AS b,
       CASE WHEN NOT c.ok OR EXISTS (SELECT 1 FROM inc i WHERE i.asset_id = c.asset_id AND i.kind <> 'capture_disconnect'
                                       AND i.from_ts > c.since_ts AND i.from_ts <= c.ts) THEN 'degraded'
            WHEN EXISTS (SELECT 1 FROM inc i WHERE i.asset_id = c.asset_id AND i.kind = 'capture_disconnect'
                           AND i.from_ts < c.ts AND i.to_ts > c.since_ts) THEN 'unverified'
            ELSE 'verified' END AS status
FROM _cov_ck c JOIN _cov_tok t USING (asset_id)
WHERE c.ts >= CAST(t.lo_day AS TIMESTAMP)
UNION ALL
SELECT asset_id, tail_from, last_ts, 'unverified' FROM _cov_tok WHERE last_ts > tail_from;

INSERT INTO stg_coverage
WITH days AS (
  SELECT asset_id, condition_id, CAST(unnest(generate_series(CAST(lo_day AS TIMESTAMP), CAST(hi_day AS TIMESTAMP), INTERVAL 1 DAY)) AS DATE) AS date
  FROM _cov_tok
), overlap AS (
  SELECT d.asset_id, d.date, s.status,
         greatest(0, epoch_ms(least(s.b, CAST(d.date + 1 AS TIMESTAMP))) - epoch_ms(greatest(s.a, CAST(d.date AS TIMESTAMP)))) AS ms
  FROM days d JOIN _cov_stretch s ON s.asset_id = d.asset_id AND s.a < CAST(d.date + 1 AS TIMESTAMP) AND s.b > CAST(d.date AS TIMESTAMP)
), secs AS (
  SELECT asset_id, date, sum(ms) FILTER (WHERE status = 'verified') / 1000.0 AS v, sum(ms) FILTER (WHERE status = 'degraded') / 1000.0 AS g,
         sum(ms) FILTER (WHERE status = 'unverified') / 1000.0 AS u
  FROM overlap GROUP BY ALL
), cks AS (
  SELECT asset_id, CAST(ts AS DATE) AS date, count(*) FILTER (WHERE ok)::INTEGER AS passed, count(*) FILTER (WHERE NOT ok)::INTEGER AS failed
  FROM _cov_ck GROUP BY ALL
), msgs AS (
  SELECT t.asset_id, m.date, m.n, m.first_ts, m.last_ts FROM (
    SELECT tok, CAST(recv_ts AS DATE) AS date, count(*) AS n, min(recv_ts) AS first_ts, max(recv_ts) AS last_ts FROM _cov_msg GROUP BY ALL
  ) m JOIN _bk_touch t USING (tok)
)
SELECT d.date, d.condition_id, d.asset_id,
       CASE WHEN coalesce(m.n, 0) = 0 THEN 'missing'
            WHEN coalesce(s.g, 0) > 0 OR coalesce(c.failed, 0) > 0 THEN 'degraded'
            WHEN coalesce(s.u, 0) > 0 OR coalesce(s.v, 0) = 0 THEN 'unverified'
            ELSE 'verified' END AS status,
       coalesce(s.v, 0)::DOUBLE, coalesce(s.g, 0)::DOUBLE, coalesce(s.u, 0)::DOUBLE,
       coalesce(c.passed, 0), coalesce(c.failed, 0), coalesce(m.n, 0)::BIGINT, m.first_ts, m.last_ts
FROM days d LEFT JOIN secs s USING (asset_id, date) LEFT JOIN cks c USING (asset_id, date) LEFT JOIN msgs m USING (asset_id, date);
