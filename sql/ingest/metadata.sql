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
WHERE coalesce(nullif(s->>'slug', ''), nullif(s->>'ticker', ''), (s->>'id')) IS NOT NULL;

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
