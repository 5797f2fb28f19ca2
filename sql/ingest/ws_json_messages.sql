-- Websocket / REST captures in any JSON layout → frames (_ws_fr) and flat messages (_ws_m).
-- Input: _ws_el(el, j JSON), one row per top-level element in file order (a JSONL line, an element of a
-- top-level array, or the single object of a one-object file).
-- An element is a frame: a JSON array of messages, a bare message object, a capture wrapper
-- {timestamp, asset_id, message} (timestamp = the capturing program's receive time), or a REST envelope
-- holding a CLOB /book response under GET_book.
CREATE OR REPLACE TEMP TABLE _ws_fr AS
SELECT el,
       CASE kind WHEN 'wrap' THEN j -> '$.message' WHEN 'rest' THEN j -> '$.GET_book' ELSE j END AS frame,
       CASE kind WHEN 'wrap' THEN TRY_CAST(j ->> '$.timestamp' AS BIGINT) END AS wrap_ms,
       kind
FROM (
  SELECT el, j,
         CASE
           WHEN json_type(j) <> 'OBJECT' THEN 'plain'
           WHEN json_exists(j, '$.message') AND json_exists(j, '$.timestamp') THEN 'wrap'
           WHEN json_exists(j, '$.GET_book') THEN 'rest'
           ELSE 'plain'
         END AS kind
  FROM _ws_el
);

CREATE OR REPLACE TEMP TABLE _ws_m AS
WITH l AS (
  SELECT el, wrap_ms,
         CASE WHEN json_type(frame) = 'ARRAY' THEN CAST(frame AS JSON[]) ELSE [frame] END AS msgs
  FROM _ws_fr
), u AS (
  SELECT el, wrap_ms, unnest(msgs) AS m, unnest(range(len(msgs))) AS mi FROM l
), t AS (
  SELECT el, mi, wrap_ms, json_type(m) AS jt,
         CASE WHEN json_type(m) = 'OBJECT' THEN json_transform(m, '{"event_type":"VARCHAR","asset_id":"VARCHAR","market":"VARCHAR","timestamp":"VARCHAR","hash":"VARCHAR",
           "bids":[{"price":"VARCHAR","size":"VARCHAR"}],"asks":[{"price":"VARCHAR","size":"VARCHAR"}],
           "changes":[{"price":"VARCHAR","side":"VARCHAR","size":"VARCHAR"}],
           "price_changes":[{"asset_id":"VARCHAR","price":"VARCHAR","size":"VARCHAR","side":"VARCHAR","hash":"VARCHAR","best_bid":"VARCHAR","best_ask":"VARCHAR"}],
           "price":"VARCHAR","size":"VARCHAR","side":"VARCHAR","fee_rate_bps":"VARCHAR","transaction_hash":"VARCHAR"}') END AS s
  FROM u
)
SELECT el, mi::INTEGER AS mi, wrap_ms, jt,
       -- A REST /book response carries no event_type: a message with bids or asks and no type is a book.
       coalesce(s.event_type, CASE WHEN s.bids IS NOT NULL OR s.asks IS NOT NULL THEN 'book' END) AS event_type,
       s.asset_id, s.market, TRY_CAST(s.timestamp AS BIGINT) AS ts_ms, s.hash,
       s.bids, s.asks, s.changes, s.price_changes,
       s.price, s.size, s.side, s.fee_rate_bps, s.transaction_hash
FROM t;
