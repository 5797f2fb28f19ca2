-- The public archive's hourly Parquet files (docs/archive-format.md) → the tape's staging tables, as the websocket
-- path fills them (ws_stage.sql). Input: the table macro _ar_src(f, lo, hi) (ingest/archive/columns.ts: the
-- file's columns normalized, the rows of markets lo..hi: a file is staged in pieces of whole markets) and $f, $lo, $hi. Output: rows appended to stg_l2, stg_last_trades,
-- stg_tape_flags and stg_raw. One archive row is one level change (price_change), one whole book (book, levels as
-- JSON text), one trade or one tick change.
--
-- The integrity inputs on staged level updates (not l2 columns: the merge writes the data set's columns only).
ALTER TABLE stg_l2 ADD COLUMN IF NOT EXISTS chk_bid DECIMAL(10,6);
ALTER TABLE stg_l2 ADD COLUMN IF NOT EXISTS chk_ask DECIMAL(10,6);
ALTER TABLE stg_l2 ADD COLUMN IF NOT EXISTS chk_tick DECIMAL(10,6);
CREATE TEMP TABLE IF NOT EXISTS stg_tape_flags (kind VARCHAR, asset_id VARCHAR, condition_id VARCHAR, recv_ms BIGINT, seq BIGINT, detail VARCHAR);

-- Messages: a book, trade or tick change is one row. The entries of a price_change are several rows, split by
-- token (the file is sorted by token), so its boundaries are inferred: within a token's rows of one market,
-- receive ms and venue ms (a group), the price_change rows between two other messages (r counts the other
-- messages before a row) were one message, and a market's entries with the same r are taken as that message.
-- Two price_change messages of one market at the same receive and venue ms with nothing between them are thus
-- one message; each token keeps its rows in file order, which is its arrival order.
-- seq = recv_ms * 1,000,000 + k, k = the message's rank among the same market's messages of that receive ms,
-- ordered by venue time, then r (a price_change run before the message that ends it), then file position.
-- k is local to a market, so a file staged in pieces cut at market boundaries gives the same rows as whole.
-- The piece's rows, read once (the staging steps below read them several times): known types with a receive
-- time and a market, naming no token or market id the census refused (_ar_bad_tokens, _ar_bad_markets:
-- ingest/archive/stage.ts, identifiers.sql; empty lists cost the lookups next to nothing).
CREATE OR REPLACE TEMP TABLE _ar_r AS
SELECT *, CASE event_type WHEN 'price_change' THEN 2 WHEN 'book' THEN 1 WHEN 'last_trade_price' THEN 0 WHEN 'tick_size_change' THEN 3 END AS et_rank
FROM _ar_src($f, $lo, $hi)
WHERE recv_ms IS NOT NULL AND market_n IS NOT NULL AND event_type IN ('price_change', 'book', 'last_trade_price', 'tick_size_change')
  AND NOT coalesce(asset_id IN (SELECT asset_id FROM _ar_bad_tokens), false)
  AND NOT coalesce(market_n IN (SELECT market_n FROM _ar_bad_markets), false);

-- The windows run over narrow rows (the wide rows would be carried through their sorts): market and token as
-- 64-bit hashes (two that collided would only share a ranking: each token's order stays its own).
CREATE OR REPLACE TEMP TABLE _ar_k AS
WITH src AS (
  SELECT rn, hash(market_n) AS mh, hash(asset_id) AS ah, recv_ms, ts_ms, et_rank FROM _ar_r
), runs AS (
  -- One window over a token's group: r, and li, a price_change entry's position in its run (rows after the
  -- last other message of the group; the file lists a message's entries token by token).
  SELECT *, coalesce(count(*) FILTER (WHERE et_rank <> 2) OVER w, 0) AS r,
         rn - coalesce(max(rn) FILTER (WHERE et_rank <> 2) OVER w, first_value(rn) OVER g - 1) - 1 AS li
  FROM src
  -- g orders the group as w does (its first row has the least rn), so both are evaluated over one sort.
  WINDOW g AS (PARTITION BY ah, mh, recv_ms, ts_ms ORDER BY rn), w AS (g ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
)
SELECT rn AS k_rn, mh, recv_ms AS k_recv_ms, et_rank = 2 AS k_pc,
       dense_rank() OVER (PARTITION BY mh, recv_ms ORDER BY ts_ms, r, et_rank = 2 DESC, CASE WHEN et_rank = 2 THEN -1 ELSE rn END) - 1 AS k,
       li::INTEGER AS li
FROM runs;

-- The rows with their ranks, joined on the file row as each step below scans them: the wide rows are held once.
CREATE OR REPLACE TEMP VIEW _ar_m AS SELECT * EXCLUDE (market_n, mh, k_recv_ms, k_pc) FROM _ar_r JOIN _ar_k ON rn = k_rn;

-- price_change rows: one level update each. BUY levels are bids, SELL levels are asks; best_bid/best_ask are
-- the integrity layer's top check (as a new-shape entry's). The archive has no book hash; hash is
-- 'pmlake-rebuilt:<seq>', one per message, because l2's natural key holds the hash: without it, the unchanged
-- levels of a second book of the same token and venue ms would be taken for copies of the first's and dropped.
INSERT INTO stg_l2 BY NAME
SELECT make_timestamp(recv_ms * 1000) AS recv_ts, make_timestamp(ts_ms * 1000) AS ts, market AS condition_id, asset_id,
       CASE side WHEN 'BUY' THEN 'bid' WHEN 'SELL' THEN 'ask' ELSE CASE upper(side) WHEN 'BUY' THEN 'bid' WHEN 'SELL' THEN 'ask' END END AS side,
       price, size, false AS is_snapshot, 'pmlake-rebuilt:' || (recv_ms * 1000000 + k) AS hash, recv_ms * 1000000 + k AS seq, li::INTEGER AS level_idx,
       false AS after_gap, best_bid AS chk_bid, best_ask AS chk_ask, NULL::DECIMAL(10,6) AS chk_tick
FROM _ar_m
WHERE et_rank = 2 AND asset_id IS NOT NULL AND price IS NOT NULL AND size IS NOT NULL AND upper(side) IN ('BUY', 'SELL');

-- book rows: bids/asks are JSON text, [["price","size"],…] (objects {"price","size"} accepted too), parsed with
-- one typed from_json each. A book whose depth does not parse is skipped whole (half a book would replace the
-- token's book wrongly) and reported. NULL depth is an empty side.
CREATE OR REPLACE TEMP MACRO _ar_depth(t) AS CASE
  WHEN t IS NULL THEN []
  WHEN NOT json_valid(t) THEN NULL
  WHEN json_type(t::JSON) <> 'ARRAY' THEN NULL
  WHEN json_array_length(t::JSON) = 0 THEN []
  WHEN json_type(t::JSON, '$[0]') = 'ARRAY'
    THEN list_transform(from_json(t, '[["VARCHAR"]]'), x -> {'price': TRY_CAST(x[1] AS DECIMAL(10,6)), 'size': TRY_CAST(x[2] AS DECIMAL(18,6))})
  WHEN json_type(t::JSON, '$[0]') = 'OBJECT'
    THEN list_transform(from_json(t, '[{"price":"VARCHAR","size":"VARCHAR"}]'), x -> {'price': TRY_CAST(x.price AS DECIMAL(10,6)), 'size': TRY_CAST(x.size AS DECIMAL(18,6))})
END;
CREATE OR REPLACE TEMP TABLE _ar_bk AS
WITH j AS (
  SELECT rn, recv_ms, ts_ms, market, asset_id, k, bids, asks, _ar_depth(bids) AS b, _ar_depth(asks) AS a FROM _ar_m WHERE et_rank = 1
)
SELECT *, (asset_id IS NULL OR b IS NULL OR a IS NULL
           OR len(list_filter(list_concat(b, a), x -> x.price IS NULL OR x.size IS NULL)) > 0) AS bad
FROM j;

INSERT INTO stg_l2 BY NAME
WITH ok AS (SELECT * FROM _ar_bk WHERE NOT bad), u AS (
  SELECT recv_ms, ts_ms, market, asset_id, k, 'bid' AS side, unnest(b).price AS price, unnest(b).size AS size,
         unnest(generate_series(0, len(b) - 1)) AS level_idx
  FROM ok WHERE len(b) > 0
  UNION ALL
  SELECT recv_ms, ts_ms, market, asset_id, k, 'ask', unnest(a).price, unnest(a).size, unnest(generate_series(len(b), len(b) + len(a) - 1))
  FROM ok WHERE len(a) > 0
  UNION ALL
  -- An empty book: one marker row (side, price, size NULL), so the lake records that the book was cleared.
  SELECT recv_ms, ts_ms, market, asset_id, k, NULL, NULL, NULL, 0 FROM ok WHERE len(b) + len(a) = 0
)
SELECT make_timestamp(recv_ms * 1000) AS recv_ts, make_timestamp(ts_ms * 1000) AS ts, market AS condition_id, asset_id, side,
       price, size, true AS is_snapshot, 'pmlake-rebuilt:' || (recv_ms * 1000000 + k) AS hash, recv_ms * 1000000 + k AS seq, level_idx::INTEGER AS level_idx,
       false AS after_gap, NULL::DECIMAL(10,6) AS chk_bid, NULL::DECIMAL(10,6) AS chk_ask, NULL::DECIMAL(10,6) AS chk_tick
FROM u;

INSERT INTO stg_last_trades
SELECT make_timestamp(coalesce(ts_ms, recv_ms) * 1000), make_timestamp(recv_ms * 1000), market, asset_id, upper(side),
       price, size, fee_rate_bps, transaction_hash, recv_ms * 1000000 + k
FROM _ar_m
WHERE et_rank = 0 AND asset_id IS NOT NULL AND price IS NOT NULL AND size IS NOT NULL;

-- tick_size_change rows (no level update): the new tick, for the off-tick check of later prices.
INSERT INTO stg_tape_flags
SELECT 'tick', asset_id, market, recv_ms, recv_ms * 1000000 + k, CAST(new_tick_size AS VARCHAR)
FROM _ar_m WHERE et_rank = 3 AND asset_id IS NOT NULL AND new_tick_size IS NOT NULL;

-- raw: the archive holds no frames. Each archive row is rebuilt as a venue message (keys in the venue's order)
-- whose hash (the message's, or its entry's) is 'pmlake-rebuilt:<seq>' — the replay's marker for a book it
-- rebuilt, plus the message's seq: a reader of raw, and a replay client, can tell rebuilt from recorded, and two
-- equal messages of one receive ms stay two (raw's key is recv_ts and the text). A price_change row becomes a
-- message of its one entry (the file splits a message's entries by token; regrouping them would cost a sort of
-- the whole file for no change in what a client replays); its entries keep the message's seq.
-- Text fields are quoted as they are unless they hold a quote or backslash (ids and sides never do).
CREATE OR REPLACE TEMP MACRO _ar_js(x) AS CASE WHEN x IS NULL THEN 'null'
  WHEN contains(x, '"') OR contains(x, '\') THEN CAST(to_json(x) AS VARCHAR) ELSE '"' || x || '"' END;

-- Numbers are written as format('{}', x) writes a DECIMAL: through DOUBLE, shortest form ("196.0", "1e-06").
INSERT INTO stg_raw
SELECT make_timestamp(recv_ms * 1000), recv_ms * 1000000 + k, ['price_change'], [market],
       concat('{"market":', _ar_js(market), ',"price_changes":[{"asset_id":', _ar_js(asset_id), ',"price":"', CAST(price AS DOUBLE),
              '","size":"', CAST(size AS DOUBLE), '","side":', _ar_js(side), ',"hash":"pmlake-rebuilt:', recv_ms * 1000000 + k,
              CASE WHEN best_bid IS NULL OR best_ask IS NULL THEN '"'
                ELSE concat('","best_bid":"', CAST(best_bid AS DOUBLE), '","best_ask":"', CAST(best_ask AS DOUBLE), '"') END,
              '}],"timestamp":"', ts_ms, '","event_type":"price_change"}')
FROM _ar_m WHERE et_rank = 2;

-- A book's depth keeps the archive's text for its levels: each ["price","size"] pair becomes the venue's
-- {"price":…,"size":…} by one regular expression (an object list is kept as it is).
CREATE OR REPLACE TEMP MACRO _ar_levels(t) AS CASE WHEN t IS NULL THEN '[]'
  ELSE regexp_replace(t, '\[\s*("[^"]*")\s*,\s*("[^"]*")\s*\]', '{"price":\1,"size":\2}', 'g') END;

INSERT INTO stg_raw
SELECT make_timestamp(recv_ms * 1000), recv_ms * 1000000 + k, ['book'], [market],
       '{"market":' || to_json(market) || ',"asset_id":' || to_json(asset_id) || ',"timestamp":"' || CAST(ts_ms AS VARCHAR)
         || '","hash":"pmlake-rebuilt:' || (recv_ms * 1000000 + k) || '","bids":' || _ar_levels(bids) || ',"asks":' || _ar_levels(asks)
         || ',"event_type":"book"}'
FROM _ar_bk WHERE NOT bad;

INSERT INTO stg_raw
SELECT make_timestamp(recv_ms * 1000), recv_ms * 1000000 + k, [event_type], [market],
       CASE et_rank
         WHEN 0 THEN json_object('market', market, 'asset_id', asset_id, 'price', format('{}', price), 'size', format('{}', size),
                                 'fee_rate_bps', CAST(fee_rate_bps AS VARCHAR), 'side', side, 'timestamp', CAST(ts_ms AS VARCHAR),
                                 'event_type', event_type, 'transaction_hash', transaction_hash, 'hash', 'pmlake-rebuilt:' || (recv_ms * 1000000 + k))
         ELSE json_object('market', market, 'asset_id', asset_id, 'old_tick_size', format('{}', old_tick_size),
                          'new_tick_size', format('{}', new_tick_size), 'timestamp', CAST(ts_ms AS VARCHAR), 'event_type', event_type,
                          'hash', 'pmlake-rebuilt:' || (recv_ms * 1000000 + k))
       END::VARCHAR
FROM _ar_m WHERE et_rank IN (0, 3) AND asset_id IS NOT NULL;
