-- Catalogue poll files (docs/catalogue-format.md) → catalogue source records and stg_market_definitions.
-- Input: _poll_lines(l, o JSON), the file's `page` lines with their line numbers (ingest/catalogue/polls.ts).
-- Macros pm_ts, pm_str_list, pm_num_list, pm_bool: see ingest/catalog.ts.

-- name: pages
CREATE OR REPLACE TEMP TABLE _poll_pages AS
SELECT l AS line, pm_ts(o->>'received_at') AS received_at, TRY_CAST(o->>'body' AS JSON) AS body, (o->>'body') IS NULL AS no_body
FROM _poll_lines;

-- name: bad_pages
SELECT line,
  CASE WHEN received_at IS NULL THEN 'page without a valid received_at; not landed'
       WHEN no_body THEN 'page without a body; not landed'
       WHEN body IS NULL THEN 'page body is not JSON; not landed'
       ELSE 'page body is neither a JSON array nor an object; not landed' END AS message
FROM _poll_pages
WHERE received_at IS NULL OR body IS NULL OR json_type(body) NOT IN ('ARRAY', 'OBJECT')
ORDER BY line;

-- name: objs
-- One row per record of a page: a bare array's items, or the records of an envelope (Gamma keyset
-- {markets|events, next_cursor}, CLOB {data, next_cursor}, opened here as the metadata `expand` would). ord keeps
-- the page's line (ord // 1000000) and the record's place in the page, so the last copy of a record is known.
CREATE OR REPLACE TEMP TABLE _meta_objs AS
WITH p AS (
  SELECT line, body,
         CASE WHEN json_type(body) = 'ARRAY' THEN '$[*]'
              WHEN json_type(body, '$.data') = 'ARRAY' THEN '$.data[*]'
              WHEN (body->>'id') IS NULL AND json_type(body, '$.markets') = 'ARRAY' THEN '$.markets[*]'
              WHEN (body->>'id') IS NULL AND json_type(body, '$.events') = 'ARRAY' THEN '$.events[*]' END AS records
  FROM _poll_pages WHERE received_at IS NOT NULL AND body IS NOT NULL
), a AS (
  SELECT line,
         CASE records WHEN '$[*]' THEN json_extract(body, '$[*]') WHEN '$.data[*]' THEN json_extract(body, '$.data[*]')
                      WHEN '$.markets[*]' THEN json_extract(body, '$.markets[*]') ELSE json_extract(body, '$.events[*]') END AS items
  FROM p WHERE records IS NOT NULL
)
SELECT line * 1000000 + generate_subscripts(items, 1) AS ord, unnest(items) AS obj FROM a
UNION ALL
SELECT line * 1000000 AS ord, body AS obj FROM p WHERE records IS NULL AND json_type(body) = 'OBJECT';

-- name: unrecognized
SELECT ord // 1000000 AS line, count(*) AS n FROM _meta_items i
WHERE NOT EXISTS (SELECT 1 FROM _meta_gamma g WHERE g.ord = i.ord)
  AND NOT EXISTS (SELECT 1 FROM _meta_clob c WHERE c.ord = i.ord)
GROUP BY 1 ORDER BY 1 LIMIT 20;

-- name: observations
-- What each source said about each market in this poll, with the rules of sql/ingest/metadata.sql for
-- resolution and winner (Gamma: UMA resolved, or closed with a price >= 0.99; CLOB: the winner flag). One
-- observation per (condition id, source): the last copy in the file (offset paging repeats rows).
CREATE OR REPLACE TEMP TABLE _poll_obs AS
WITH g AS (
  SELECT ord, m, e, pm_num_list(m->>'outcomePrices') AS prices, pm_bool(m->>'closed') AS is_closed,
         coalesce((m->>'umaResolutionStatus') IN ('resolved', 'settled'), false) AS uma_resolved
  FROM _meta_gamma WHERE dump IS NULL AND json_type(m) = 'OBJECT'
), gr AS (
  SELECT *, uma_resolved OR coalesce(is_closed AND list_max(prices) >= 0.99, false) AS is_resolved FROM g
), c AS (
  SELECT ord, m,
         json_extract_string(m, '$.tokens[*].token_id') AS toks,
         json_extract_string(m, '$.tokens[*].outcome') AS outs,
         json_extract_string(m, '$.tokens[*].winner') AS winners
  FROM _meta_clob
), obs AS (
  SELECT ord, 'gamma' AS source,
    lower(nullif(m->>'conditionId', '')) AS condition_id,
    nullif(m->>'id', '') AS market_id,
    nullif(m->>'question', '') AS question,
    nullif(m->>'slug', '') AS slug,
    pm_str_list(m->>'outcomes') AS outcomes,
    pm_str_list(m->>'clobTokenIds') AS outcome_token_ids,
    TRY_CAST(m->>'orderPriceMinTickSize' AS DECIMAL(10,6)) AS tick_size,
    TRY_CAST(m->>'orderMinSize' AS DECIMAL(18,6)) AS min_order_size,
    pm_bool(m->>'active') AS active,
    is_closed AS closed,
    pm_bool(m->>'acceptingOrders') AS accepting_orders,
    -- A market nested in an /events record may leave negRisk to its event.
    coalesce(pm_bool(m->>'negRisk'), pm_bool(e->>'negRisk'), pm_bool(e->>'enableNegRisk')) AS neg_risk,
    pm_ts(m->>'endDate') AS end_date,
    is_resolved AS resolved,
    CASE WHEN is_resolved AND list_max(prices) >= 0.99 THEN list_position(prices, list_max(prices)) - 1 END::INTEGER AS winning_outcome
  FROM gr
  UNION ALL
  SELECT ord, 'clob',
    lower(nullif(m->>'condition_id', '')),
    NULL,
    nullif(m->>'question', ''),
    nullif(m->>'market_slug', ''),
    CASE WHEN len(outs) > 0 THEN outs END,
    toks,
    TRY_CAST(m->>'minimum_tick_size' AS DECIMAL(10,6)),
    TRY_CAST(m->>'minimum_order_size' AS DECIMAL(18,6)),
    pm_bool(m->>'active'),
    pm_bool(m->>'closed'),
    pm_bool(m->>'accepting_orders'),
    pm_bool(m->>'neg_risk'),
    pm_ts(m->>'end_date_iso'),
    coalesce(list_contains(winners, 'true'), false),
    CASE WHEN list_contains(winners, 'true') THEN list_position(winners, 'true') - 1 END::INTEGER
  FROM c
), fp AS (
  SELECT obs.* REPLACE (
           -- An empty list, or old AMM-only tokens with empty ids: no tradable tokens.
           CASE WHEN len(outcome_token_ids) > 0 AND NOT list_contains(outcome_token_ids, '') THEN outcome_token_ids END AS outcome_token_ids),
         ord // 1000000 AS line
  FROM obs WHERE condition_id IS NOT NULL
)
SELECT fp.condition_id, fp.source, p.received_at AS valid_from, market_id, question, slug, outcomes, outcome_token_ids,
  tick_size, min_order_size, active, closed, accepting_orders, neg_risk, end_date, resolved, winning_outcome,
  -- The definition's fields only (not valid_from, not the poll): equal fingerprints are the same definition.
  md5(json_array(market_id, question, slug, outcomes, outcome_token_ids, tick_size, min_order_size, active, closed,
                 accepting_orders, neg_risk, end_date, resolved, winning_outcome)::VARCHAR) AS fingerprint,
  $poll AS poll, fp.line
FROM fp JOIN _poll_pages p USING (line)
QUALIFY row_number() OVER (PARTITION BY fp.condition_id, fp.source ORDER BY ord DESC, fingerprint) = 1;

-- name: tokenless
-- The first $named by line, and how many there are in all.
SELECT line, condition_id, source, count(*) OVER () AS total FROM _poll_obs WHERE outcome_token_ids IS NULL
ORDER BY line, condition_id, source LIMIT $named;

-- name: drop_tokenless
DELETE FROM _poll_obs WHERE outcome_token_ids IS NULL;

-- name: prior_staged
-- The definitions already known for this poll's markets: staged from earlier files of the batch (k = 1) and,
-- added next, stored in the lake (k = 0).
CREATE OR REPLACE TEMP TABLE _defs_prior AS
SELECT condition_id, source, valid_from, fingerprint, 1 AS k FROM stg_market_definitions
WHERE condition_id IN (SELECT condition_id FROM _poll_obs);

-- name: prior_stored
INSERT INTO _defs_prior
SELECT condition_id, source, valid_from, fingerprint, 0 FROM read_parquet($files::VARCHAR[], hive_partitioning = false)
WHERE condition_id IN (SELECT condition_id FROM _poll_obs);

-- name: sequence
-- Every definition of these markets in time order (this poll's observations k = 2): a row that equals the one
-- in force just before it changes nothing.
CREATE OR REPLACE TEMP TABLE _defs_seq AS
SELECT *, lag(fingerprint) OVER (PARTITION BY condition_id, source ORDER BY valid_from, k) AS prev_fp
FROM (SELECT * FROM _defs_prior UNION ALL SELECT condition_id, source, valid_from, fingerprint, 2 FROM _poll_obs);

-- name: insert_changes
INSERT INTO stg_market_definitions BY NAME
SELECT o.* EXCLUDE (line) FROM _poll_obs o
JOIN _defs_seq s ON s.k = 2 AND s.condition_id = o.condition_id AND s.source = o.source AND s.valid_from = o.valid_from
WHERE s.prev_fp IS DISTINCT FROM s.fingerprint;

-- name: drop_redundant
-- A row staged from a later poll of the batch that now equals the one in force before it (an earlier poll
-- staged after it): drop it. Runs last (with records_superseded, in one transaction), so a failure before it
-- leaves the earlier files' rows as they were.
DELETE FROM stg_market_definitions d USING _defs_seq s
WHERE s.k = 1 AND s.prev_fp = s.fingerprint
  AND d.condition_id = s.condition_id AND d.source = s.source AND d.valid_from = s.valid_from;

-- name: records_superseded
-- The catalogue's copy of a market: within a batch, a record this file re-sends (a later page of it, or a later
-- poll than one staged before) replaces the earlier staged copy unless that one is newer by record_ts, as a later
-- batch's copy does in finalizeCatalog. So several polls in one batch give the catalogue one poll at a time would.
DELETE FROM stg_market_records o
WHERE EXISTS (
  SELECT 1 FROM stg_market_records n
  WHERE n.rowid > $mark AND n.rowid > o.rowid AND n.source = o.source AND n.record_key = o.record_key
    AND (n.record_ts >= o.record_ts OR o.record_ts IS NULL)
);
