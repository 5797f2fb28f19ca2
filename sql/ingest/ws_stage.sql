-- Common tail of every tape format. Input: _ws_fr(el, frame JSON|VARCHAR, wrap_ms) and _ws_m (flat messages,
-- see ws_json_messages.sql), el = position of the frame in the file. Output: rows appended to stg_raw,
-- stg_l2 and stg_last_trades.
--
-- Receive time: the wrapper's timestamp when the capture recorded one, otherwise the newest venue timestamp
-- in the frame; then a running maximum in file order, because a frame cannot arrive before one written
-- above it (the initial array of books carries timestamps out of order).
-- seq = recv_ms * 1,000,000 + k, k = arrival rank of the message among messages of the same file with the
-- same recv_ms. It depends only on the file's content, orders arrival within a token and is stable across
-- re-runs, so derived rows keyed on it de-duplicate.
CREATE OR REPLACE TEMP TABLE _ws_recv AS
WITH b AS (
  SELECT f.el, max(coalesce(m.wrap_ms, m.ts_ms)) AS basis
  FROM _ws_fr f LEFT JOIN _ws_m m USING (el)
  GROUP BY f.el
), r AS (
  SELECT el, max(basis) OVER (ORDER BY el ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS run_ms FROM b
)
SELECT el, coalesce(run_ms, (SELECT min(basis) FROM b)) AS recv_ms FROM r;

CREATE OR REPLACE TEMP TABLE _ws_ms AS
SELECT m.*, r.recv_ms,
       r.recv_ms * 1000000 + row_number() OVER (PARTITION BY r.recv_ms ORDER BY m.el, m.mi) - 1 AS seq
FROM _ws_m m JOIN _ws_recv r USING (el)
WHERE r.recv_ms IS NOT NULL;

INSERT INTO stg_raw
SELECT make_timestamp(r.recv_ms * 1000) AS recv_ts,
       coalesce(min(m.seq), r.recv_ms * 1000000) AS seq,
       list_sort(list_distinct(list(m.event_type))) AS event_types,
       list_sort(list_distinct(list(m.market))) AS condition_ids,
       CAST(any_value(f.frame) AS VARCHAR) AS frame
FROM _ws_fr f JOIN _ws_recv r USING (el) LEFT JOIN _ws_ms m USING (el)
WHERE r.recv_ms IS NOT NULL
GROUP BY f.el, r.recv_ms;

-- One list of level updates per message. A `book` lists its bids then its asks (as sent: bids ascending, asks
-- descending); an empty book becomes a single marker level with side, price and size NULL so the lake still
-- records that the book was cleared. Old price_change: `changes` of the message's token; new shape:
-- `price_changes`, each entry with its own token and hash. BUY levels are bids, SELL levels are asks.
CREATE OR REPLACE TEMP TABLE _ws_lv AS
WITH lv AS (
  SELECT seq, recv_ms, ts_ms, market, event_type = 'book' AS is_snapshot, el,
         CASE
           WHEN event_type = 'book' THEN
             CASE WHEN coalesce(len(bids), 0) + coalesce(len(asks), 0) = 0
                  THEN [{'asset_id': asset_id, 'hash': hash, 'side': NULL::VARCHAR, 'price': NULL::VARCHAR, 'size': NULL::VARCHAR, 'bad': false}]
                  ELSE list_concat(
                    list_transform(coalesce(bids, []), x -> {'asset_id': asset_id, 'hash': hash, 'side': 'bid', 'price': x.price, 'size': x.size, 'bad': false}),
                    list_transform(coalesce(asks, []), x -> {'asset_id': asset_id, 'hash': hash, 'side': 'ask', 'price': x.price, 'size': x.size, 'bad': false}))
             END
           WHEN price_changes IS NOT NULL AND len(price_changes) > 0 THEN
             list_transform(price_changes, x -> {'asset_id': x.asset_id, 'hash': x.hash,
               'side': CASE upper(x.side) WHEN 'BUY' THEN 'bid' WHEN 'SELL' THEN 'ask' END, 'price': x.price, 'size': x.size,
               'bad': upper(x.side) NOT IN ('BUY', 'SELL')})
           ELSE
             list_transform(coalesce(changes, []), x -> {'asset_id': asset_id, 'hash': hash,
               'side': CASE upper(x.side) WHEN 'BUY' THEN 'bid' WHEN 'SELL' THEN 'ask' END, 'price': x.price, 'size': x.size,
               'bad': upper(x.side) NOT IN ('BUY', 'SELL')})
         END AS levels
  FROM _ws_ms
  WHERE event_type IN ('book', 'price_change')
), u AS (
  SELECT seq, recv_ms, ts_ms, market, is_snapshot, el, unnest(levels) AS l, unnest(range(len(levels))) AS level_idx FROM lv
)
SELECT make_timestamp(recv_ms * 1000) AS recv_ts,
       make_timestamp(ts_ms * 1000) AS ts,
       market AS condition_id,
       l.asset_id, l.side,
       TRY_CAST(l.price AS DECIMAL(10,6)) AS price,
       TRY_CAST(l.size AS DECIMAL(18,6)) AS size,
       is_snapshot, l.hash, seq, level_idx::INTEGER AS level_idx,
       el,
       (l.bad OR l.asset_id IS NULL
         OR (l.side IS NOT NULL AND (TRY_CAST(l.price AS DECIMAL(10,6)) IS NULL OR TRY_CAST(l.size AS DECIMAL(18,6)) IS NULL))
         OR (l.side IS NULL AND NOT is_snapshot)) AS bad
FROM u;

INSERT INTO stg_l2
SELECT recv_ts, ts, condition_id, asset_id, side, price, size, is_snapshot, hash, seq, level_idx
FROM _ws_lv WHERE NOT bad;

INSERT INTO stg_last_trades
SELECT make_timestamp(coalesce(ts_ms, recv_ms) * 1000) AS ts,
       make_timestamp(recv_ms * 1000) AS recv_ts,
       market AS condition_id, asset_id, upper(side) AS side,
       TRY_CAST(price AS DECIMAL(10,6)) AS price,
       TRY_CAST(size AS DECIMAL(18,6)) AS size,
       TRY_CAST(fee_rate_bps AS INTEGER) AS fee_rate_bps,
       transaction_hash, seq
FROM _ws_ms
WHERE event_type = 'last_trade_price' AND asset_id IS NOT NULL
  AND TRY_CAST(price AS DECIMAL(10,6)) IS NOT NULL AND TRY_CAST(size AS DECIMAL(18,6)) IS NOT NULL;
