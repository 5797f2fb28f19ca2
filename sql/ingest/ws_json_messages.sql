-- Websocket / REST captures in any JSON layout → flat messages (_ws_m) and element bookkeeping (_ws_fr).
-- Input: _ws_el(el, j JSON, obj BOOLEAN: j is an object), one row per top-level element in file order (a JSONL line, an element of a
-- top-level array, or the single object of a one-object file).
-- An element is a frame: a JSON array of messages, a bare message object, a capture wrapper
-- {timestamp, asset_id, message} (timestamp = the capturing program's receive time), or a REST envelope
-- holding a CLOB /book response under GET_book.
-- Speed: JSON values are text and every json_* call parses again, so an object element is parsed exactly
-- once, by one json_transform that also picks up the wrapper/envelope keys, straight into _ws_m; only
-- wrapped, enveloped and array elements (rare, small captures) pay a second parse.
-- Level prices and sizes are parsed to decimals here, in the one parse: json_transform (not _strict) gives
-- NULL for a value that is not a number, exactly as TRY_CAST would, so ws_stage.sql still flags it as bad.
CREATE OR REPLACE TEMP MACRO _ws_msg(x) AS json_transform(x, '{"event_type":"VARCHAR","asset_id":"VARCHAR","market":"VARCHAR","timestamp":"VARCHAR","hash":"VARCHAR",
  "bids":[{"price":"DECIMAL(10,6)","size":"DECIMAL(18,6)"}],"asks":[{"price":"DECIMAL(10,6)","size":"DECIMAL(18,6)"}],
  "changes":[{"price":"DECIMAL(10,6)","side":"VARCHAR","size":"DECIMAL(18,6)"}],
  "price_changes":[{"asset_id":"VARCHAR","price":"DECIMAL(10,6)","size":"DECIMAL(18,6)","side":"VARCHAR","hash":"VARCHAR","best_bid":"DECIMAL(10,6)","best_ask":"DECIMAL(10,6)"}],
  "price":"VARCHAR","size":"VARCHAR","side":"VARCHAR","fee_rate_bps":"VARCHAR","transaction_hash":"VARCHAR","message":"JSON","GET_book":"JSON",
  "tick_size":"DECIMAL(10,6)","new_tick_size":"DECIMAL(10,6)"}');

CREATE OR REPLACE TEMP MACRO _ws_flat(el, mi, wrap_ms, multi, jt, s) AS STRUCT_PACK(
  el := el, mi := mi::INTEGER, wrap_ms := wrap_ms::BIGINT, multi := multi, jt := jt,
  -- A REST /book response carries no event_type: a message with bids or asks and no type is a book.
  event_type := coalesce(s.event_type, CASE WHEN s.bids IS NOT NULL OR s.asks IS NOT NULL THEN 'book' END),
  asset_id := s.asset_id, market := s.market, ts_ms := TRY_CAST(s.timestamp AS BIGINT), hash := s.hash,
  bids := s.bids, asks := s.asks, changes := s.changes, price_changes := s.price_changes,
  price := s.price, size := s.size, side := s.side, fee_rate_bps := s.fee_rate_bps, transaction_hash := s.transaction_hash,
  message := CASE WHEN s.message IS NOT NULL AND s.timestamp IS NOT NULL THEN s.message END,
  rest_book := s.GET_book,
  -- The token's tick: a new-shape book's tick_size, a tick_size_change's new_tick_size (integrity checks, ingest/integrity/).
  tick := coalesce(s.new_tick_size, s.tick_size));

-- The parse is a column of a subquery, not the macro's argument: _ws_flat names its `s` twenty times, and each
-- would be bound (and planned) as a json_transform of its own.
CREATE OR REPLACE TEMP TABLE _ws_m AS
SELECT unnest(_ws_flat(el, 0, NULL, false, 'OBJECT', s))
FROM (SELECT el, _ws_msg(j) AS s FROM _ws_el WHERE obj);

-- Frames whose stored text is not the element itself: a wrapped message, a REST book. Array elements are
-- listed too (they may hold several messages, or none).
CREATE OR REPLACE TEMP TABLE _ws_fr AS
SELECT el, CASE WHEN message IS NOT NULL THEN 'wrap' ELSE 'rest' END AS kind,
       CASE WHEN message IS NOT NULL THEN TRY_CAST(ts_ms AS BIGINT) END AS wrap_ms,
       coalesce(message, rest_book) AS frame
FROM _ws_m WHERE message IS NOT NULL OR rest_book IS NOT NULL
UNION ALL
SELECT el, 'frame', NULL, NULL FROM _ws_el WHERE NOT obj;

DELETE FROM _ws_m WHERE message IS NOT NULL OR rest_book IS NOT NULL;

INSERT INTO _ws_m
WITH nested AS (
  SELECT el, wrap_ms, frame AS m, 0 AS mi, false AS multi FROM _ws_fr WHERE kind IN ('wrap', 'rest')
  UNION ALL
  SELECT el, NULL, unnest(l), unnest(range(len(l))), true FROM (
    SELECT el, CASE WHEN json_type(j) = 'ARRAY' THEN CAST(j AS JSON[]) ELSE [j] END AS l
    FROM _ws_el WHERE NOT obj)
)
SELECT unnest(_ws_flat(el, mi, wrap_ms, multi, jt, s))
FROM (SELECT el, mi, wrap_ms, multi, jt, CASE WHEN jt = 'OBJECT' THEN _ws_msg(m) END AS s FROM (SELECT *, json_type(m) AS jt FROM nested));
