-- Replay input for book reconstruction (ingest/books.ts). Needs _bk_touch(tok, asset_id, min_seq, ...),
-- _bk_seed(asset_id, ts, seq, bids, asks), _bk_tail (l2 rows already in the lake between the seed and the
-- batch), _bk_tail_trades (the stored last_trades of that stretch), stg_tape_flags (tick_size_change rows,
-- ws_stage.sql). src: 0 = seed snapshot, 1 = stored tail (replayed, not re-emitted), 2 = this batch.
-- Prices and sizes go to JavaScript as integers of 1e-6 units (exact, and read straight from typed arrays).
-- A view, not a table: the replay's sorted stream is its only reader, and the sort materialises the rows anyway.
CREATE OR REPLACE TEMP VIEW _bk_in AS
WITH seed AS (
  SELECT asset_id, seq, epoch_ms(ts) AS ms,
         CASE WHEN coalesce(len(bids), 0) + coalesce(len(asks), 0) = 0
              THEN [{'side': NULL::VARCHAR, 'price': NULL::DECIMAL(10,6), 'size': NULL::DECIMAL(18,6)}]
              ELSE list_concat(list_transform(coalesce(bids, []), x -> {'side': 'bid', 'price': x.price, 'size': x.size}),
                               list_transform(coalesce(asks, []), x -> {'side': 'ask', 'price': x.price, 'size': x.size}))
         END AS lv
  FROM _bk_seed
), rows AS (
  SELECT asset_id, 0 AS src, seq, ms, 0 AS k, l.side AS side, l.price AS price, l.size AS size, 1 AS snap, i AS level_idx,
         NULL::DECIMAL(10,6) AS chk_a, NULL::DECIMAL(10,6) AS chk_b
  FROM (SELECT asset_id, seq, ms, unnest(lv) AS l, unnest(range(len(lv))) AS i FROM seed)
  UNION ALL
  SELECT asset_id, 1, seq, seq // 1000000, seq % 1000000, side, price, size, is_snapshot::INTEGER, level_idx, NULL, NULL FROM _bk_tail
  UNION ALL
  SELECT asset_id, 2, seq, seq // 1000000, seq % 1000000, side, price, size, is_snapshot::INTEGER, level_idx,
         -- chk_a/chk_b: a new-shape entry's best_bid/best_ask; on a book's rows chk_a is the book's tick_size.
         CASE WHEN is_snapshot THEN chk_tick ELSE chk_bid END, chk_ask FROM stg_l2
  UNION ALL
  -- A tick_size_change: one row of its own (side 3, price = the new tick), not a level update.
  SELECT asset_id, 2, seq, seq // 1000000, seq % 1000000, '~tick', CAST(detail AS DECIMAL(10,6)), NULL, 0, 0, NULL, NULL
  FROM stg_tape_flags WHERE kind = 'tick'
  UNION ALL
  -- A last_trade_price: the taker took `size` at `price` from the token's asks (BUY) or bids (SELL). The venue
  -- answers a trade with a fresh `book`, which the checkpoint compares with the replayed book minus the trade.
  SELECT asset_id, 2, seq, seq // 1000000, seq % 1000000, CASE side WHEN 'BUY' THEN '~buy' ELSE '~sell' END, price, size, 0, 0, NULL, NULL
  FROM stg_last_trades WHERE asset_id IS NOT NULL AND side IN ('BUY', 'SELL') AND seq IS NOT NULL
  UNION ALL
  -- The stored trades between the seed and the batch (_bk_tail_trades), as the stored tail's.
  SELECT asset_id, 1, seq, seq // 1000000, seq % 1000000, CASE side WHEN 'BUY' THEN '~buy' ELSE '~sell' END, price, size, 0, 0, NULL, NULL
  FROM _bk_tail_trades WHERE asset_id IS NOT NULL AND side IN ('BUY', 'SELL') AND seq IS NOT NULL
)
SELECT t.tok::INTEGER AS tok, r.src::INTEGER AS src, r.seq, r.level_idx,
       r.ms::DOUBLE AS ms, r.k::INTEGER AS k,
       (CASE r.side WHEN 'bid' THEN 0 WHEN 'ask' THEN 1 WHEN '~tick' THEN 3 WHEN '~sell' THEN 4 WHEN '~buy' THEN 5 ELSE 2 END)::INTEGER AS side,
       r.snap::INTEGER AS snap,
       coalesce(CAST(r.price * 1000000 AS INTEGER), -1) AS price,
       coalesce(CAST(CAST(r.size AS DECIMAL(38,6)) * 1000000 AS DOUBLE), 0) AS size,
       coalesce(CAST(r.chk_a * 1000000 AS INTEGER), -1) AS chk_a, coalesce(CAST(r.chk_b * 1000000 AS INTEGER), -1) AS chk_b
FROM rows r JOIN _bk_touch t USING (asset_id);
