-- Common tail of every tape format. Input: _ws_el(el, j) the file's elements (frames), _ws_fr(el, kind,
-- wrap_ms, frame) with frame set only where the stored frame is not the element itself (JSON, or VARCHAR for a
-- captured frame that is not JSON: text compared as text, never cast to JSON), and _ws_m (flat
-- messages, see ws_json_messages.sql). Output: rows appended to stg_raw, stg_l2 and stg_last_trades.
--
-- Receive time: the wrapper's timestamp when the capture recorded one, otherwise the newest venue timestamp
-- in the frame; then a running maximum in file order, because a frame cannot arrive before one written
-- above it (the initial array of books carries timestamps out of order).
-- seq = recv_ms * 1,000,000 + k, k = arrival rank of the message among messages of the same file with the
-- same recv_ms. It depends only on the file's content, orders arrival within a token and is stable across
-- re-runs, so derived rows keyed on it de-duplicate.
-- Window functions run on narrow per-element rows only; wide message rows are joined to them by el.
-- Integrity inputs (ingest/integrity/, lake/README.md "Tape integrity"): a message's tick (JSON: ws_json_messages.sql;
-- the CSV export has none) and, on staged level updates, the new-shape entry's best_bid/best_ask and a book's tick.
-- These stg_l2 columns are not l2 columns: the merge writes the data set's columns only.
ALTER TABLE _ws_m ADD COLUMN IF NOT EXISTS tick DECIMAL(10,6);
ALTER TABLE stg_l2 ADD COLUMN IF NOT EXISTS chk_bid DECIMAL(10,6);
ALTER TABLE stg_l2 ADD COLUMN IF NOT EXISTS chk_ask DECIMAL(10,6);
ALTER TABLE stg_l2 ADD COLUMN IF NOT EXISTS chk_tick DECIMAL(10,6);
CREATE TEMP TABLE IF NOT EXISTS stg_tape_flags (kind VARCHAR, asset_id VARCHAR, condition_id VARCHAR, recv_ms BIGINT, seq BIGINT, detail VARCHAR);

-- What ws_ids.sql refused (_ws_refused): no derived row names such a token or condition id, and raw's lists of a
-- frame's event types and markets leave them out (its frame text is kept as recorded). An empty list costs each
-- lookup next to nothing.
CREATE OR REPLACE TEMP MACRO _ws_bad_token(x) AS coalesce(x IN (SELECT id FROM _ws_refused WHERE kind = 'token'), false);
CREATE OR REPLACE TEMP MACRO _ws_bad_condition(x) AS coalesce(x IN (SELECT id FROM _ws_refused WHERE kind = 'condition'), false);

CREATE OR REPLACE TEMP TABLE _ws_b AS
SELECT el, coalesce(wrap_ms, ts_ms) AS basis, 1 AS n,
       CASE WHEN pm_long_name(event_type) THEN [] ELSE [event_type] END AS event_types,
       CASE WHEN _ws_bad_condition(market) THEN [] ELSE [market] END AS condition_ids
FROM _ws_m WHERE NOT multi
UNION ALL
SELECT el, max(coalesce(wrap_ms, ts_ms)), count(*),
       coalesce(list_sort(list_distinct(list(event_type) FILTER (WHERE NOT pm_long_name(event_type)))), []),
       coalesce(list_sort(list_distinct(list(market) FILTER (WHERE NOT _ws_bad_condition(market)))), [])
FROM _ws_m WHERE multi GROUP BY el
UNION ALL
-- A frame without messages has no venue time; a capture that recorded its receive time (ingest/ws/capture.ts) sets wrap_ms.
SELECT el, wrap_ms, 0, [], [] FROM _ws_fr WHERE kind = 'frame' AND el NOT IN (SELECT el FROM _ws_m WHERE multi);

-- _ws_carry(recv_ms, next_k): where the previous chunk of the same file ended (a big JSONL file is staged in
-- chunks): receive time keeps rising across the cut and k continues within that millisecond.
CREATE OR REPLACE TEMP TABLE _ws_recv AS
WITH r AS (
  SELECT el, n, max(basis) OVER (ORDER BY el ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS run_ms FROM _ws_b
), r2 AS (
  SELECT el, n, greatest(coalesce(run_ms, (SELECT min(basis) FROM _ws_b)), (SELECT recv_ms FROM _ws_carry)) AS recv_ms FROM r
)
SELECT el, n, recv_ms,
       recv_ms * 1000000
         + CASE WHEN recv_ms = (SELECT recv_ms FROM _ws_carry) THEN (SELECT next_k FROM _ws_carry) ELSE 0 END
         + sum(n) OVER (PARTITION BY recv_ms ORDER BY el ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) - n AS seq0
FROM r2;

INSERT INTO stg_raw
SELECT make_timestamp(r.recv_ms * 1000), r.seq0, coalesce(b.event_types, []), coalesce(b.condition_ids, []),
       coalesce(CAST(f.frame AS VARCHAR), CAST(e.j AS VARCHAR))
FROM _ws_recv r JOIN _ws_b b USING (el) JOIN _ws_el e USING (el) LEFT JOIN _ws_fr f USING (el)
WHERE r.recv_ms IS NOT NULL;

-- Level updates, one INSERT per message shape, each a plain UNNEST (no per-level lambdas: they cost more
-- than the parse). level_idx: a book's bids as sent (ascending) then its asks (as sent, descending);
-- a price_change's entries in order. BUY levels are bids, SELL levels are asks. An empty book becomes one
-- marker row with side, price and size NULL so the lake still records that the book was cleared.
-- _ws_lv is the same rows as a view, with `bad` marking what is not inserted (rare; queried only for the
-- issue report when the inserted count falls short of the levels sent), and `refused` what names a token or condition
-- id ws_ids.sql refused or carries an over-long hash (reported by ingest/ws/common.ts from _ws_refused).
CREATE OR REPLACE TEMP VIEW _ws_lv AS
WITH mm AS (
  SELECT m.*, r.recv_ms, r.seq0 + m.mi AS seq FROM _ws_m m JOIN _ws_recv r USING (el)
  WHERE m.event_type IN ('book', 'price_change') AND r.recv_ms IS NOT NULL
), u AS (
  SELECT recv_ms, ts_ms, market, asset_id, hash, true AS is_snapshot, seq, el,
         'bid' AS side, unnest(bids).price AS p, unnest(bids).size AS s, unnest(generate_series(0, len(bids) - 1)) AS level_idx,
         NULL AS chk_bid, NULL AS chk_ask, tick AS chk_tick
  FROM mm WHERE event_type = 'book' AND len(bids) > 0
  UNION ALL
  SELECT recv_ms, ts_ms, market, asset_id, hash, true, seq, el,
         'ask', unnest(asks).price, unnest(asks).size, unnest(generate_series(coalesce(len(bids), 0), coalesce(len(bids), 0) + len(asks) - 1)),
         NULL, NULL, tick
  FROM mm WHERE event_type = 'book' AND len(asks) > 0
  UNION ALL
  SELECT recv_ms, ts_ms, market, asset_id, hash, true, seq, el, NULL, NULL, NULL, 0, NULL, NULL, tick
  FROM mm WHERE event_type = 'book' AND coalesce(len(bids), 0) + coalesce(len(asks), 0) = 0
  UNION ALL
  SELECT recv_ms, ts_ms, market, asset_id, hash, false, seq, el,
         unnest(changes).side, unnest(changes).price, unnest(changes).size, unnest(generate_series(0, len(changes) - 1)), NULL, NULL, NULL
  FROM mm WHERE event_type = 'price_change' AND coalesce(len(price_changes), 0) = 0 AND len(changes) > 0
  UNION ALL
  SELECT recv_ms, ts_ms, market, unnest(price_changes).asset_id, unnest(price_changes).hash, false, seq, el,
         unnest(price_changes).side, unnest(price_changes).price, unnest(price_changes).size,
         unnest(generate_series(0, len(price_changes) - 1)), unnest(price_changes).best_bid, unnest(price_changes).best_ask, NULL
  FROM mm WHERE event_type = 'price_change' AND len(price_changes) > 0
), c AS (
  -- The exact spellings first: upper() on every level update costs more than the rest of this step. p and s
  -- are decimals already for JSON input (ws_json_messages.sql); the CSV export's come as text.
  SELECT *,
         CASE WHEN is_snapshot THEN side
              WHEN side = 'BUY' THEN 'bid' WHEN side = 'SELL' THEN 'ask'
              ELSE CASE upper(side) WHEN 'BUY' THEN 'bid' WHEN 'SELL' THEN 'ask' END END AS nside,
         TRY_CAST(p AS DECIMAL(10,6)) AS price, TRY_CAST(s AS DECIMAL(18,6)) AS size
  FROM u
)
SELECT make_timestamp(recv_ms * 1000) AS recv_ts, make_timestamp(ts_ms * 1000) AS ts, market AS condition_id,
       asset_id, nside AS side, price, size, is_snapshot, hash, seq, level_idx::INTEGER AS level_idx, el,
       TRY_CAST(chk_bid AS DECIMAL(10,6)) AS chk_bid, TRY_CAST(chk_ask AS DECIMAL(10,6)) AS chk_ask, TRY_CAST(chk_tick AS DECIMAL(10,6)) AS chk_tick,
       (asset_id IS NULL
         OR (side IS NOT NULL AND (nside IS NULL OR price IS NULL OR size IS NULL))
         OR (side IS NULL AND NOT is_snapshot)) AS bad,
       _ws_bad_token(asset_id) OR _ws_bad_condition(market) OR pm_long_name(hash) AS refused
FROM c;

-- after_gap is decided by the book replay (ingest/books.ts), which sets it on the few rows after a gap.
INSERT INTO stg_l2 BY NAME
SELECT recv_ts, ts, condition_id, asset_id, side, price, size, is_snapshot, hash, seq, level_idx, false AS after_gap, chk_bid, chk_ask, chk_tick
FROM _ws_lv WHERE NOT bad AND NOT refused;

-- tick_size_change messages (no level update): their new tick, for the off-tick check of later prices.
INSERT INTO stg_tape_flags
SELECT 'tick', m.asset_id, m.market, r.recv_ms, r.seq0 + m.mi, CAST(m.tick AS VARCHAR)
FROM _ws_m m JOIN _ws_recv r USING (el)
WHERE m.event_type = 'tick_size_change' AND m.asset_id IS NOT NULL AND m.tick IS NOT NULL AND r.recv_ms IS NOT NULL
  AND NOT _ws_bad_token(m.asset_id) AND NOT _ws_bad_condition(m.market);

-- Frame-level incidents, one row per token the frame names: a frame whose text equals an earlier frame's in
-- the same file (or chunk), and a frame whose time basis lies before a frame written above it — by any amount
-- when the basis is the capture's own receive time (a wrapper), by more than 5 s when it is a venue timestamp
-- (the venue's first burst of books is routinely out of order by a second or two).
INSERT INTO stg_tape_flags
WITH txt AS (
  SELECT e.el, coalesce(CAST(f.frame AS VARCHAR), CAST(e.j AS VARCHAR)) AS t FROM _ws_el e LEFT JOIN _ws_fr f USING (el)
), h AS (
  SELECT el, hash(t) AS hh FROM txt
), dup AS (
  SELECT el, 'duplicate' AS kind, NULL::VARCHAR AS detail FROM (
    SELECT el, row_number() OVER (PARTITION BY t ORDER BY el) AS rn
    FROM txt WHERE el IN (SELECT el FROM h WHERE hh IN (SELECT hh FROM h GROUP BY hh HAVING count(*) > 1)))
  WHERE rn > 1
), back AS (
  SELECT el, 'recv_backwards', json_object('basis_ms', basis, 'before_ms', prev_max) FROM (
    SELECT el, basis, wrapped, max(basis) OVER (ORDER BY el ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_max
    FROM (SELECT b.el, b.basis, f.wrap_ms IS NOT NULL AS wrapped FROM _ws_b b LEFT JOIN _ws_fr f USING (el)))
  WHERE basis < prev_max - CASE WHEN wrapped THEN 0 ELSE 5000 END
), flagged AS (
  SELECT * FROM dup UNION ALL SELECT * FROM back
), toks AS (
  SELECT m.el, m.mi, coalesce(m.asset_id, pc.asset_id) AS asset_id, m.market
  FROM _ws_m m LEFT JOIN (SELECT el, mi, unnest(price_changes).asset_id AS asset_id FROM _ws_m WHERE el IN (SELECT el FROM flagged)) pc USING (el, mi)
  WHERE m.el IN (SELECT el FROM flagged)
)
SELECT DISTINCT ON (fl.kind, t.asset_id, fl.el) fl.kind, t.asset_id, t.market, r.recv_ms, r.seq0 + t.mi, fl.detail
FROM flagged fl JOIN toks t USING (el) JOIN _ws_recv r USING (el)
WHERE t.asset_id IS NOT NULL AND r.recv_ms IS NOT NULL AND NOT _ws_bad_token(t.asset_id) AND NOT _ws_bad_condition(t.market)
ORDER BY fl.kind, t.asset_id, fl.el, t.mi;

INSERT INTO stg_last_trades
SELECT make_timestamp(coalesce(m.ts_ms, r.recv_ms) * 1000) AS ts,
       make_timestamp(r.recv_ms * 1000) AS recv_ts,
       m.market AS condition_id, m.asset_id, upper(m.side) AS side,
       TRY_CAST(m.price AS DECIMAL(10,6)) AS price,
       TRY_CAST(m.size AS DECIMAL(18,6)) AS size,
       TRY_CAST(m.fee_rate_bps AS INTEGER) AS fee_rate_bps,
       m.transaction_hash, r.seq0 + m.mi AS seq
FROM _ws_m m JOIN _ws_recv r USING (el)
WHERE m.event_type = 'last_trade_price' AND m.asset_id IS NOT NULL AND r.recv_ms IS NOT NULL
  AND TRY_CAST(m.price AS DECIMAL(10,6)) IS NOT NULL AND TRY_CAST(m.size AS DECIMAL(18,6)) IS NOT NULL
  AND NOT _ws_bad_token(m.asset_id) AND NOT _ws_bad_condition(m.market)
  AND NOT pm_long_name(m.side) AND NOT pm_long_name(m.transaction_hash);
