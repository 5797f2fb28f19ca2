-- Market metadata → catalogue source records (stg_market_records / stg_series_records).
-- Input: _meta_objs(ord, obj JSON), one row per top-level JSON object of the file (read_json_objects).
-- Macros pm_ts, pm_cat, pm_tag_cat, pm_str_list, pm_num_list, pm_bool: see ingest/catalog.ts.

-- name: expand
-- CLOB /markets pages may come enveloped as {data, next_cursor, limit, count}, Gamma's keyset pages as
-- {markets: [...], next_cursor} or {events: [...], next_cursor}: the records are in the array. (A Gamma event
-- holds markets[] too, but always with its own id.)
CREATE OR REPLACE TEMP TABLE _meta_items AS
WITH o AS (
  SELECT ord, obj,
         CASE WHEN json_type(obj, '$.data') = 'ARRAY' THEN 'data'
              WHEN (obj->>'id') IS NULL AND json_type(obj, '$.markets') = 'ARRAY' THEN 'markets'
              WHEN (obj->>'id') IS NULL AND json_type(obj, '$.events') = 'ARRAY' THEN 'events' END AS envelope
  FROM _meta_objs
)
SELECT ord, obj FROM o WHERE envelope IS NULL
UNION ALL
SELECT ord, unnest(json_extract(obj, '$.data[*]')) AS obj FROM o WHERE envelope = 'data'
UNION ALL
SELECT ord, unnest(json_extract(obj, '$.markets[*]')) AS obj FROM o WHERE envelope = 'markets'
UNION ALL
SELECT ord, unnest(json_extract(obj, '$.events[*]')) AS obj FROM o WHERE envelope = 'events';

-- name: classify
-- m = a Gamma market, e = its event (the parent record of /events, else the market's own events[0]),
-- dump = the JSONL dump line when the market came from one (its `raw` field is the Gamma market).
CREATE OR REPLACE TEMP TABLE _meta_gamma AS
SELECT ord, unnest(json_extract(obj, '$.markets[*]')) AS m, obj AS e, NULL::JSON AS dump
FROM _meta_items WHERE json_type(obj, '$.markets') = 'ARRAY'
UNION ALL
SELECT ord, obj, json_extract(obj, '$.events[0]'), NULL
FROM _meta_items
WHERE json_type(obj, '$.markets') IS DISTINCT FROM 'ARRAY' AND json_type(obj, '$.raw') IS DISTINCT FROM 'OBJECT'
  AND (obj->>'conditionId' IS NOT NULL OR (obj->>'clobTokenIds') IS NOT NULL)
UNION ALL
SELECT ord, json_extract(obj, '$.raw'), json_extract(obj, '$.raw.events[0]'), obj
FROM _meta_items WHERE json_type(obj, '$.raw') = 'OBJECT';

-- name: classify_clob
CREATE OR REPLACE TEMP TABLE _meta_clob AS
SELECT ord, obj AS m FROM _meta_items
WHERE (obj->>'condition_id') IS NOT NULL AND json_type(obj, '$.tokens') = 'ARRAY' AND json_type(obj, '$.raw') IS DISTINCT FROM 'OBJECT';

-- name: unrecognized
SELECT ord FROM _meta_items i
WHERE NOT EXISTS (SELECT 1 FROM _meta_gamma g WHERE g.ord = i.ord)
  AND NOT EXISTS (SELECT 1 FROM _meta_clob c WHERE c.ord = i.ord)
ORDER BY ord LIMIT 20;

-- name: refuse
-- Records naming an identifier or text the ingest refuses (identifiers.sql; lake/README.md, "What the ingest
-- accepts"), with the first reason: a Gamma market (or dump line) by its row of _meta_gamma — one market of an event
-- is refused alone, unless the event's own fields are what is refused — and a CLOB market. Nothing is staged from them:
-- the catalogue, its records and the point-in-time definitions (catalogue_polls.sql) read what is left.
CREATE OR REPLACE TEMP TABLE _meta_refused AS
WITH g AS (
  SELECT rowid AS r, ord, m, e, dump,
         coalesce(pm_str_list(m->>'clobTokenIds'), pm_str_list(dump->>'token_ids')) AS toks,
         pm_str_list(m->>'outcomes') AS outs,
         pm_num_list(coalesce(dump->>'outcome_prices', (m->>'outcomePrices'))) AS prices
  FROM _meta_gamma WHERE json_type(m) = 'OBJECT'
), c AS (
  SELECT rowid AS r, ord, m,
         json_extract_string(m, '$.tokens[*].token_id') AS toks,
         json_extract_string(m, '$.tokens[*].outcome') AS outs
  FROM _meta_clob
), why AS (
  SELECT 'gamma' AS t, r, ord, CASE
    WHEN pm_bad_condition(coalesce(nullif(m->>'conditionId', ''), nullif(dump->>'condition_id', ''))) THEN 'a condition id that is not 0x and 64 hex digits'
    WHEN pm_bad_market_id(nullif(m->>'id', '')) THEN 'a market id that is not a decimal of 1 to 17 digits'
    WHEN pm_bad_tokens(toks) THEN 'a token id that is not a uint256 in decimal, or over 64 of them'
    WHEN pm_long_question(m->>'question') THEN 'a question over 4096 bytes'
    WHEN pm_long_text(m->>'description') THEN 'a description over 65536 bytes'
    WHEN pm_bad_names(outs) OR pm_long_list(prices) THEN 'an outcome over 256 bytes, or over 64 outcomes or prices'
    WHEN pm_long_name(m->>'slug') OR pm_long_name(m->>'questionID') OR pm_long_name(m->>'category') OR pm_long_name(e->>'id')
      OR pm_long_name(e->>'category') OR pm_long_name(e->>'seriesSlug') OR pm_long_name(json_extract_string(e, '$.series[0].slug'))
      OR pm_long_name(dump->>'asset') THEN 'a slug, category or id (question, event, series) over 256 bytes'
  END AS why, coalesce(nullif(m->>'conditionId', ''), nullif(dump->>'condition_id', ''), m->>'id') AS key
  FROM g
  UNION ALL
  SELECT 'clob', r, ord, CASE
    WHEN pm_bad_condition(nullif(m->>'condition_id', '')) THEN 'a condition id that is not 0x and 64 hex digits'
    WHEN pm_bad_tokens(toks) THEN 'a token id that is not a uint256 in decimal, or over 64 of them'
    WHEN pm_long_question(m->>'question') THEN 'a question over 4096 bytes'
    WHEN pm_long_text(m->>'description') THEN 'a description over 65536 bytes'
    WHEN pm_bad_names(outs) THEN 'an outcome over 256 bytes, or over 64 outcomes'
    WHEN pm_long_name(m->>'market_slug') OR pm_long_name(m->>'question_id') THEN 'a slug or question id over 256 bytes'
  END, m->>'condition_id'
  FROM c
)
SELECT t, r, ord, why, left(key, $chars) AS head, strlen(key) AS bytes FROM why WHERE why IS NOT NULL;

-- name: refused
-- The refused records for the report: the first $named by record, and how many there are.
SELECT t, ord, why, head, bytes, count(*) OVER () AS total FROM _meta_refused ORDER BY ord, t, r LIMIT $named;

-- name: drop_refused_gamma
DELETE FROM _meta_gamma WHERE rowid IN (SELECT r FROM _meta_refused WHERE t = 'gamma');

-- name: drop_refused_clob
DELETE FROM _meta_clob WHERE rowid IN (SELECT r FROM _meta_refused WHERE t = 'clob');

-- name: refused_series
-- Series of Gamma events whose text is over its bound: not staged (gamma_series), counted here with the first record.
SELECT count(*) AS n, min(ord) AS ord FROM (
  SELECT DISTINCT ord, e, unnest(json_extract(e, '$.series[*]')) AS s FROM _meta_gamma WHERE json_type(e, '$.series') = 'ARRAY')
WHERE pm_bad_series(s);

-- name: gamma_records
-- Resolution rule (Gamma has no winner flag): a market is resolved when the dump says so, when UMA's
-- status is resolved/settled, or when it is closed and one outcome price has reached >= 0.99 (the venue
-- settles the winning outcome at 1; pre-2022 AMM markets settle at 0.99999…). The winning outcome is the
-- 0-based index of that price. A closed market at 0.5/0.5 (a 50-50 split) is closed but not resolved.
INSERT INTO stg_market_records BY NAME
WITH g AS (
  SELECT m, e, dump,
         pm_num_list(coalesce(dump->>'outcome_prices', (m->>'outcomePrices'))) AS prices,
         pm_bool(m->>'closed') AS is_closed,
         (m->>'umaResolutionStatus') AS uma
  FROM _meta_gamma WHERE json_type(m) = 'OBJECT'
), r AS (
  SELECT *,
         coalesce(pm_bool(dump->>'resolved'), false)
           OR coalesce(uma IN ('resolved', 'settled'), false)
           OR coalesce(is_closed AND list_max(prices) >= 0.99, false) AS is_resolved
  FROM g
)
SELECT
  CASE WHEN dump IS NULL THEN 'gamma' ELSE 'gamma_dump' END AS source,
  CASE WHEN dump IS NULL THEN $gamma ELSE $dump END AS priority,
  coalesce(lower(nullif(m->>'conditionId', '')), lower(nullif(dump->>'condition_id', ''))) AS condition_id,
  nullif(m->>'id', '') AS id,
  coalesce(condition_id, 'id:' || id) AS record_key,
  pm_ts(m->>'updatedAt') AS record_ts,
  nullif(m->>'questionID', '') AS question_id,
  nullif(e->>'id', '') AS event_id,
  nullif(m->>'slug', '') AS slug,
  nullif(m->>'question', '') AS question,
  nullif(m->>'description', '') AS description,
  coalesce(pm_cat(m->>'category'), pm_cat(e->>'category'), pm_tag_cat(json_extract_string(e, '$.tags[*].label'))) AS category,
  pm_str_list(m->>'outcomes') AS outcomes,
  prices AS outcome_prices,
  coalesce(pm_str_list(m->>'clobTokenIds'), pm_str_list(dump->>'token_ids')) AS outcome_token_ids,
  pm_bool(m->>'active') AS active,
  is_closed AS closed,
  is_resolved AS resolved,
  coalesce(pm_bool(m->>'negRisk'), pm_bool(e->>'negRisk'), pm_bool(e->>'enableNegRisk')) AS neg_risk,
  CASE WHEN is_resolved AND list_max(prices) >= 0.99 THEN list_position(prices, list_max(prices)) - 1 END AS winning_outcome,
  CASE WHEN is_resolved THEN coalesce(pm_ts(m->>'umaEndDate'), pm_ts(m->>'closedTime'), pm_ts(m->>'endDate')) END AS resolution_date,
  coalesce(TRY_CAST(m->>'volumeNum' AS DOUBLE), TRY_CAST(m->>'volume' AS DOUBLE)) AS volume,
  TRY_CAST(m->>'volume24hr' AS DOUBLE) AS volume_24h,
  coalesce(TRY_CAST(m->>'liquidityNum' AS DOUBLE), TRY_CAST(m->>'liquidity' AS DOUBLE)) AS liquidity,
  pm_ts(m->>'startDate') AS start_date,
  pm_ts(m->>'endDate') AS end_date,
  pm_ts(m->>'createdAt') AS created_at,
  -- Series membership lives on the event (seriesSlug / series[]); dumps of recurring crypto markets carry
  -- only {asset, interval_sec}, named like the venue's series slugs: btc + 300 s → btc-up-or-down-5m.
  coalesce(nullif(e->>'seriesSlug', ''), nullif(json_extract_string(e, '$.series[0].slug'), ''),
           CASE WHEN (dump->>'asset') IS NOT NULL AND TRY_CAST(dump->>'interval_sec' AS BIGINT) > 0 THEN
             lower(dump->>'asset') || '-up-or-down-' || (
               CASE WHEN TRY_CAST(dump->>'interval_sec' AS BIGINT) % 86400 = 0 THEN (TRY_CAST(dump->>'interval_sec' AS BIGINT) // 86400)::VARCHAR || 'd'
                    WHEN TRY_CAST(dump->>'interval_sec' AS BIGINT) % 3600 = 0 THEN (TRY_CAST(dump->>'interval_sec' AS BIGINT) // 3600)::VARCHAR || 'h'
                    ELSE (TRY_CAST(dump->>'interval_sec' AS BIGINT) // 60)::VARCHAR || 'm' END)
           END) AS series_id,
  TRY_CAST(m->>'orderPriceMinTickSize' AS DECIMAL(10,6)) AS tick_size
FROM r
WHERE coalesce(nullif(m->>'conditionId', ''), nullif(dump->>'condition_id', ''), nullif(m->>'id', '')) IS NOT NULL;

-- name: gamma_series
INSERT INTO stg_series_records BY NAME
SELECT 'gamma' AS source, $gamma AS priority, pm_ts(s->>'updatedAt') AS record_ts,
       coalesce(nullif(s->>'slug', ''), nullif(s->>'ticker', ''), (s->>'id')) AS series_id,
       nullif(s->>'slug', '') AS slug,
       nullif(s->>'title', '') AS name,
       nullif(s->>'description', '') AS description,
       -- No category here: events of one series disagree (Sports / NBA Playoffs); the catalogue takes the
       -- most common category of the series' markets instead.
       nullif((s->>'recurrence'), '') AS recurrence
FROM (SELECT DISTINCT e, unnest(json_extract(e, '$.series[*]')) AS s
      FROM _meta_gamma WHERE json_type(e, '$.series') = 'ARRAY')
WHERE coalesce(nullif(s->>'slug', ''), nullif(s->>'ticker', ''), (s->>'id')) IS NOT NULL AND NOT pm_bad_series(s);

-- name: clob_records
-- CLOB records have no numeric id; tokens[] gives outcomes, token ids and prices in one order, and the
-- winner flag names the winning outcome once the market is resolved.
INSERT INTO stg_market_records BY NAME
WITH c AS (
  SELECT m,
         json_extract_string(m, '$.tokens[*].token_id') AS toks,
         json_extract_string(m, '$.tokens[*].outcome') AS outs,
         json_extract_string(m, '$.tokens[*].winner') AS winners,
         TRY_CAST(json_extract_string(m, '$.tokens[*].price') AS DOUBLE[]) AS prices
  FROM _meta_clob
)
SELECT 'clob' AS source, $clob AS priority,
  lower(m->>'condition_id') AS condition_id,
  condition_id AS record_key,
  NULL::TIMESTAMP AS record_ts,
  nullif(m->>'question_id', '') AS question_id,
  nullif(m->>'market_slug', '') AS slug,
  nullif(m->>'question', '') AS question,
  nullif(m->>'description', '') AS description,
  pm_tag_cat(json_extract_string(m, '$.tags[*]')) AS category,
  CASE WHEN len(outs) > 0 THEN outs END AS outcomes,
  CASE WHEN len(prices) > 0 THEN prices END AS outcome_prices,
  -- Old AMM-only markets list tokens with empty ids: no tradable tokens.
  CASE WHEN len(toks) > 0 AND NOT list_contains(toks, '') THEN toks END AS outcome_token_ids,
  pm_bool(m->>'active') AS active,
  pm_bool(m->>'closed') AS closed,
  list_contains(winners, 'true') AS resolved,
  CASE WHEN list_contains(winners, 'true') THEN list_position(winners, 'true') - 1 END AS winning_outcome,
  pm_bool(m->>'neg_risk') AS neg_risk,
  pm_ts(m->>'end_date_iso') AS end_date,
  TRY_CAST(m->>'minimum_tick_size' AS DECIMAL(10,6)) AS tick_size
FROM c WHERE nullif(m->>'condition_id', '') IS NOT NULL;

-- name: refused_csv
-- Catalogue CSV rows naming a market id or text the ingest refuses (identifiers.sql): the first $named lines, and how
-- many there are; drop_refused_csv removes them before csv_records.
SELECT line, count(*) OVER () AS total FROM _meta_csv
WHERE pm_bad_csv_row(market_id, question, category, outcomes, outcome_prices) ORDER BY line LIMIT $named;

-- name: drop_refused_csv
DELETE FROM _meta_csv WHERE pm_bad_csv_row(market_id, question, category, outcomes, outcome_prices);

-- name: csv_records
-- The catalogue CSV knows markets by Gamma id only (no condition id, no tokens); outcomes and prices are
-- JSON arrays in text fields; active is 0/1.
INSERT INTO stg_market_records BY NAME
SELECT 'csv' AS source, $csv AS priority, 'id:' || market_id AS record_key, NULL::TIMESTAMP AS record_ts,
  market_id AS id,
  nullif(question, '') AS question,
  pm_cat(category) AS category,
  TRY_CAST(volume AS DOUBLE) AS volume,
  TRY_CAST(volume_24h AS DOUBLE) AS volume_24h,
  TRY_CAST(liquidity AS DOUBLE) AS liquidity,
  pm_ts(end_date) AS end_date,
  pm_ts(created_date) AS created_at,
  pm_str_list(outcomes) AS outcomes,
  pm_num_list(outcome_prices) AS outcome_prices,
  CASE trim(active) WHEN '1' THEN true WHEN '0' THEN false ELSE pm_bool(active) END AS active
FROM _meta_csv
WHERE nullif(trim(market_id), '') IS NOT NULL;
