-- The identifiers and bounded text of a chunk's messages (_ws_m, ws_json_messages.sql), checked by the macros of
-- identifiers.sql (lake/README.md, "What the ingest accepts"). Output: _ws_refused(kind, id, el, n): every distinct
-- token id, condition id or event type refused (kind 'token', 'condition', 'event_type'), and one row of kind 'text'
-- (id NULL) for the messages and price_change entries whose hash, side or transaction hash is over its bound; el is
-- the first element naming it, n how many messages and entries do. ws_stage.sql derives nothing from them (the frame
-- itself stays in raw: it is what was recorded) and ingest/ws/common.ts reports them.
-- Each distinct value is checked once, not each message: a chunk names few tokens in many messages. The values are
-- gathered into a table first, so the patterns cannot be pushed below the grouping onto every message.
CREATE OR REPLACE TEMP TABLE _ws_ids AS
SELECT asset_id AS token, market, event_type, min(el) AS el, count(*) AS n,
       count(*) FILTER (WHERE pm_long_name(hash) OR pm_long_name(side) OR pm_long_name(transaction_hash)) AS long_n,
       min(el) FILTER (WHERE pm_long_name(hash) OR pm_long_name(side) OR pm_long_name(transaction_hash)) AS long_el
FROM _ws_m GROUP BY ALL
UNION ALL
SELECT token, NULL, NULL, min(el), count(*), count(*) FILTER (WHERE pm_long_name(h)), min(el) FILTER (WHERE pm_long_name(h))
FROM (SELECT el, unnest(price_changes).asset_id AS token, unnest(price_changes).hash AS h FROM _ws_m WHERE len(price_changes) > 0)
GROUP BY token;

CREATE OR REPLACE TEMP TABLE _ws_refused AS
WITH ids AS (
  SELECT 'token' AS kind, token AS id, el, n FROM _ws_ids WHERE pm_bad_token(token)
  UNION ALL
  SELECT 'condition', market, el, n FROM _ws_ids WHERE pm_bad_condition(market)
  UNION ALL
  SELECT 'event_type', event_type, el, n FROM _ws_ids WHERE pm_long_name(event_type)
)
SELECT kind, id, min(el) AS el, sum(n)::BIGINT AS n FROM ids GROUP BY kind, id
UNION ALL
SELECT 'text', NULL, min(long_el), sum(long_n)::BIGINT FROM _ws_ids WHERE long_n > 0 HAVING count(*) > 0;

DROP TABLE _ws_ids;
