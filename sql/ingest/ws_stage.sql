-- Common tail of every tape format. Input: _ws_el(el, j) the file's elements (frames), _ws_fr(el, kind,
-- wrap_ms, frame) with frame set only where the stored frame is not the element itself, and _ws_m (flat
-- messages, see ws_json_messages.sql). Output: rows appended to stg_raw, stg_l2 and stg_last_trades.
--
-- Receive time: the wrapper's timestamp when the capture recorded one, otherwise the newest venue timestamp
-- in the frame; then a running maximum in file order, because a frame cannot arrive before one written
-- above it (the initial array of books carries timestamps out of order).
-- seq = recv_ms * 1,000,000 + k, k = arrival rank of the message among messages of the same file with the
-- same recv_ms. It depends only on the file's content, orders arrival within a token and is stable across
-- re-runs, so derived rows keyed on it de-duplicate.
-- Window functions run on narrow per-element rows only; wide message rows are joined to them by el.
CREATE OR REPLACE TEMP TABLE _ws_b AS
SELECT el, coalesce(wrap_ms, ts_ms) AS basis, 1 AS n, [event_type] AS event_types, [market] AS condition_ids
FROM _ws_m WHERE NOT multi
UNION ALL
SELECT el, max(coalesce(wrap_ms, ts_ms)), count(*), list_sort(list_distinct(list(event_type))), list_sort(list_distinct(list(market)))
FROM _ws_m WHERE multi GROUP BY el
UNION ALL
SELECT el, NULL, 0, [], [] FROM _ws_fr WHERE kind = 'frame' AND el NOT IN (SELECT el FROM _ws_m WHERE multi);

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
       CAST(coalesce(f.frame, e.j) AS VARCHAR)
FROM _ws_recv r JOIN _ws_b b USING (el) JOIN _ws_el e USING (el) LEFT JOIN _ws_fr f USING (el)
WHERE r.recv_ms IS NOT NULL;

-- One list of level updates per message. A `book` lists its bids then its asks (as sent: bids ascending, asks
-- descending); an empty book becomes a single marker level with side, price and size NULL so the lake still
-- records that the book was cleared. Old price_change: `changes` of the message's token; new shape:
-- `price_changes`, each entry with its own token and hash. BUY levels are bids, SELL levels are asks.
-- A view, not a table: the 'bad' rows are rare, so the level rows are produced once, straight into stg_l2.
CREATE OR REPLACE TEMP VIEW _ws_lv AS
WITH lv AS (
  SELECT r.seq0 + m.mi AS seq, r.recv_ms, m.ts_ms, m.market, m.event_type = 'book' AS is_snapshot, m.el,
         CASE
           WHEN m.event_type = 'book' THEN
             CASE WHEN coalesce(len(m.bids), 0) + coalesce(len(m.asks), 0) = 0
                  THEN [{'asset_id': m.asset_id, 'hash': m.hash, 'side': NULL::VARCHAR, 'price': NULL::VARCHAR, 'size': NULL::VARCHAR, 'bad': false}]
                  ELSE list_concat(
                    list_transform(coalesce(m.bids, []), x -> {'asset_id': m.asset_id, 'hash': m.hash, 'side': 'bid', 'price': x.price, 'size': x.size, 'bad': false}),
                    list_transform(coalesce(m.asks, []), x -> {'asset_id': m.asset_id, 'hash': m.hash, 'side': 'ask', 'price': x.price, 'size': x.size, 'bad': false}))
             END
           WHEN m.price_changes IS NOT NULL AND len(m.price_changes) > 0 THEN
             list_transform(m.price_changes, x -> {'asset_id': x.asset_id, 'hash': x.hash,
               'side': CASE upper(x.side) WHEN 'BUY' THEN 'bid' WHEN 'SELL' THEN 'ask' END, 'price': x.price, 'size': x.size,
               'bad': upper(x.side) NOT IN ('BUY', 'SELL')})
           ELSE
             list_transform(coalesce(m.changes, []), x -> {'asset_id': m.asset_id, 'hash': m.hash,
               'side': CASE upper(x.side) WHEN 'BUY' THEN 'bid' WHEN 'SELL' THEN 'ask' END, 'price': x.price, 'size': x.size,
               'bad': upper(x.side) NOT IN ('BUY', 'SELL')})
         END AS levels
  FROM _ws_m m JOIN _ws_recv r USING (el)
  WHERE m.event_type IN ('book', 'price_change') AND r.recv_ms IS NOT NULL
), u AS (
  SELECT seq, recv_ms, ts_ms, market, is_snapshot, el, unnest(levels) AS l, unnest(range(len(levels))) AS level_idx FROM lv
), c AS (
  SELECT *, TRY_CAST(l.price AS DECIMAL(10,6)) AS price, TRY_CAST(l.size AS DECIMAL(18,6)) AS size FROM u
)
SELECT make_timestamp(recv_ms * 1000) AS recv_ts,
       make_timestamp(ts_ms * 1000) AS ts,
       market AS condition_id,
       l.asset_id, l.side, price, size,
       is_snapshot, l.hash, seq, level_idx::INTEGER AS level_idx,
       el,
       (l.bad OR l.asset_id IS NULL
         OR (l.side IS NOT NULL AND (price IS NULL OR size IS NULL))
         OR (l.side IS NULL AND NOT is_snapshot)) AS bad
FROM c;

INSERT INTO stg_l2
SELECT recv_ts, ts, condition_id, asset_id, side, price, size, is_snapshot, hash, seq, level_idx
FROM _ws_lv WHERE NOT bad;

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
  AND TRY_CAST(m.price AS DECIMAL(10,6)) IS NOT NULL AND TRY_CAST(m.size AS DECIMAL(18,6)) IS NOT NULL;
