-- Chain files of `pmlake chain` (docs/chain-format.md) → chain_logs and, through sql/ingest/fills.sql, trades.
-- Input: _chain_objs(ord BIGINT, obj JSON), one row per line of the file (`ord` = its line number).

-- name: lines
-- Each line's kind, read once: every `->>` parses the line again.
CREATE OR REPLACE TEMP TABLE _chain_objs AS SELECT ord, obj->>'kind' AS kind, obj FROM _chain_objs;

-- name: blocks
-- One row per `block` line. The first line of a block number is its block; a later one is checked against it.
CREATE OR REPLACE TEMP TABLE _chain_blocks AS
SELECT line, number, hash, ts, row_number() OVER (PARTITION BY number ORDER BY line) AS nth
FROM (
  -- A hash over its bound (identifiers.sql) is no hash: the line is reported as lacking one, and no log matches it.
  SELECT ord AS line, TRY_CAST(j.number AS BIGINT) AS number, CASE WHEN NOT pm_long_name(j.hash) THEN lower(j.hash) END AS hash,
         TRY_CAST(j.timestamp AS BIGINT) AS ts
  FROM (SELECT ord, json_transform(obj, '{"number":"VARCHAR","hash":"VARCHAR","timestamp":"VARCHAR"}') AS j FROM _chain_objs WHERE kind = 'block')
);

-- name: logs
-- One row per `log` line, with why it does not land (NULL: it lands).
CREATE OR REPLACE TEMP TABLE _chain_logs AS
WITH j AS (
  -- One parse per line, as for `kind`.
  SELECT ord AS line, json_transform(obj, '{"block_number":"VARCHAR","block_hash":"VARCHAR","transaction_hash":"VARCHAR",
    "transaction_index":"VARCHAR","log_index":"VARCHAR","address":"VARCHAR","exchange":"VARCHAR","event":"VARCHAR",
    "args":"JSON","topics":["VARCHAR"],"data":"VARCHAR"}') AS j
  FROM _chain_objs
  WHERE kind = 'log'
), l AS (
  SELECT line,
         TRY_CAST(j.block_number AS BIGINT) AS block_number,
         lower(j.block_hash) AS block_hash,
         lower(j.transaction_hash) AS transaction_hash,
         TRY_CAST(j.transaction_index AS INTEGER) AS transaction_index,
         TRY_CAST(j.log_index AS INTEGER) AS log_index,
         lower(j.address) AS address,
         j.exchange AS exchange,
         j.event AS event,
         -- `args` is null for a topic no ABI knows; kept as JSON text (its keys are camelCase: not lower-cased).
         CASE WHEN json_type(j.args) = 'OBJECT' THEN j.args END AS args,
         list_transform(j.topics, t -> lower(t)) AS topics,
         lower(j.data) AS data
  FROM j
)
SELECT l.*, b.ts AS block_ts_s,
  CASE
    WHEN l.block_number IS NULL OR l.log_index IS NULL OR l.transaction_hash IS NULL OR l.address IS NULL
      THEN 'log line lacks block_number, log_index, transaction_hash or address'
    -- identifiers.sql: what lands as a column is bounded (args and data stay as the node gave them, like raw's frames).
    WHEN pm_long_name(l.block_hash) OR pm_long_name(l.transaction_hash) OR pm_long_name(l.address) OR pm_long_name(l.exchange)
      OR pm_long_name(l.event) OR pm_bad_names(l.topics) THEN 'a hash, address, exchange, event or topic over 256 bytes, or over 64 topics'
    WHEN b.number IS NULL THEN 'no block line for block ' || l.block_number
    WHEN b.ts IS NULL OR b.hash IS NULL THEN 'its block line ' || b.line || ' lacks hash or timestamp'
    WHEN l.block_hash IS DISTINCT FROM b.hash THEN 'block_hash ' || coalesce(l.block_hash, 'null') || ' differs from block line ' || b.line || ' (' || b.hash || ')'
    WHEN row_number() OVER (PARTITION BY l.block_number, l.log_index ORDER BY l.line) > 1 THEN 'log ' || l.log_index || ' of block ' || l.block_number || ' repeated'
  END AS problem
FROM l LEFT JOIN _chain_blocks b ON b.number = l.block_number AND b.nth = 1;

-- name: problems
-- Everything in the file that is an issue: (line, message, n records it stands for), in file order.
WITH ordered_blocks AS (
  SELECT *, lag(ts) OVER (ORDER BY line) AS prev_ts, lag(number) OVER (ORDER BY line) AS prev_number FROM _chain_blocks
), range_line AS (
  SELECT min(ord) FILTER (WHERE kind = 'chain_range') AS first_range,
         count(*) FILTER (WHERE kind = 'chain_range') AS ranges,
         min(ord) FILTER (WHERE kind = 'end') AS end_line,
         max(ord) AS last_line,
         count(*) FILTER (WHERE kind = 'log') AS log_lines
  FROM _chain_objs
), issues AS (
  SELECT line, 'block line lacks number, hash (of at most 256 bytes) or timestamp' AS message, 1 AS n FROM _chain_blocks
  WHERE number IS NULL OR hash IS NULL OR ts IS NULL
  UNION ALL
  SELECT line, 'block ' || number || ': timestamp ' || ts || ' is before the previous block line''s (' || prev_number || ', ' || prev_ts || ')', 1
  FROM ordered_blocks WHERE ts < prev_ts
  UNION ALL
  SELECT b.line, 'block ' || b.number || ' repeated with hash ' || b.hash || ' (line ' || f.line || ': ' || f.hash || ')', 1
  FROM _chain_blocks b JOIN _chain_blocks f ON f.number = b.number AND f.nth = 1
  WHERE b.nth > 1 AND b.hash IS DISTINCT FROM f.hash
  UNION ALL
  -- A block's logs share one cause: one issue per block and cause, at its first log, counting them.
  SELECT min(line), 'log not landed: ' || any_value(problem ORDER BY line), count(*) FROM _chain_logs
  WHERE problem IS NOT NULL GROUP BY block_number, regexp_replace(problem, '^log [0-9]+ ', 'log ')
  UNION ALL
  -- The indexer's own text, told in the issue as a bounded head.
  SELECT ord, 'error line kept by the indexer (block ' || coalesce(left(obj->>'block_number', 32), '?') || '): '
              || coalesce(left(obj->>'message', 256), '(no message)'), 1
  FROM _chain_objs WHERE kind = 'error'
  UNION ALL
  SELECT min(ord), 'unknown line kind ' || coalesce('"' || left(kind, 64) || '"', '(none)'), count(*) FROM _chain_objs
  WHERE kind IS NULL OR kind NOT IN ('chain_range', 'block', 'log', 'error', 'end')
  GROUP BY kind
  UNION ALL
  SELECT last_line, 'no end line: the file is torn after line ' || last_line || ' (its complete lines landed)', 1
  FROM range_line WHERE end_line IS NULL
  UNION ALL
  SELECT e.ord, 'end line says ' || coalesce(e.obj->>'logs', '?') || ' logs, the file holds ' || r.log_lines, 1
  FROM _chain_objs e, range_line r
  WHERE e.ord = r.end_line AND TRY_CAST(e.obj->>'logs' AS BIGINT) IS DISTINCT FROM r.log_lines
  UNION ALL
  SELECT min(o.ord), 'lines after the end line', count(*) FROM _chain_objs o, range_line r
  WHERE o.ord > r.end_line HAVING count(*) > 0
  UNION ALL
  SELECT first_range, 'chain_range line repeated', ranges - 1 FROM range_line WHERE ranges > 1
)
SELECT line, message, n FROM issues ORDER BY line, message;

-- name: stage_logs
INSERT INTO stg_chain_logs BY NAME
SELECT block_number, block_hash, make_timestamp(block_ts_s * 1000000) AS block_ts, transaction_hash, transaction_index,
       log_index, address, exchange, event, args::VARCHAR AS args, topics, data
FROM _chain_logs WHERE problem IS NULL;

-- name: fills_raw
-- The landed OrderFilled logs in the columns the fills derivation reads (sql/ingest/fills.sql), all VARCHAR:
-- V1 args carry makerAssetId/takerAssetId, V2 args side/tokenId; `contract` tells V1 from V2.
CREATE OR REPLACE TEMP TABLE _fills_raw AS
SELECT line, event, block_number::VARCHAR AS block_number, block_ts_s::VARCHAR AS block_timestamp, transaction_hash,
       log_index::VARCHAR AS log_index, a.orderHash AS order_hash, a.maker, a.taker, a.makerAssetId AS maker_asset_id,
       a.takerAssetId AS taker_asset_id, a.makerAmountFilled AS maker_amount_filled,
       a.takerAmountFilled AS taker_amount_filled, a.fee, NULL::VARCHAR AS source_id, a.side, a.tokenId AS token_id,
       address AS contract
FROM (
  SELECT *, json_transform(args, '{"orderHash":"VARCHAR","maker":"VARCHAR","taker":"VARCHAR","makerAssetId":"VARCHAR",
    "takerAssetId":"VARCHAR","makerAmountFilled":"VARCHAR","takerAmountFilled":"VARCHAR","fee":"VARCHAR","side":"VARCHAR",
    "tokenId":"VARCHAR"}') AS a
  FROM _chain_logs WHERE problem IS NULL AND event = 'OrderFilled'
);

-- name: summary
SELECT (SELECT count(*) FROM _chain_logs WHERE problem IS NULL) AS logs,
       (SELECT count(*) FROM _chain_logs WHERE problem IS NOT NULL) AS logs_not_landed,
       (SELECT count(*) FROM _chain_objs WHERE kind = 'error') AS error_lines,
       (SELECT max(ts) * 1000 FROM _chain_blocks WHERE number IS NOT NULL AND hash IS NOT NULL) AS newest_block_ms;
