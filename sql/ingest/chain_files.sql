-- Chain files of `pmlake chain` (docs/chain-format.md) → chain_logs and, through sql/ingest/fills.sql, trades.
-- Input: _chain_objs(ord BIGINT, obj JSON), one row per line of the file (`ord` = its line number).

-- name: blocks
-- One row per `block` line. The first line of a block number is its block; a later one is checked against it.
CREATE OR REPLACE TEMP TABLE _chain_blocks AS
SELECT ord AS line,
       TRY_CAST(obj->>'number' AS BIGINT) AS number,
       lower(obj->>'hash') AS hash,
       TRY_CAST(obj->>'timestamp' AS BIGINT) AS ts,
       row_number() OVER (PARTITION BY TRY_CAST(obj->>'number' AS BIGINT) ORDER BY ord) AS nth
FROM _chain_objs
WHERE (obj->>'kind') = 'block';

-- name: logs
-- One row per `log` line, with why it does not land (NULL: it lands).
CREATE OR REPLACE TEMP TABLE _chain_logs AS
WITH l AS (
  SELECT ord AS line,
         TRY_CAST(obj->>'block_number' AS BIGINT) AS block_number,
         lower(obj->>'block_hash') AS block_hash,
         lower(obj->>'transaction_hash') AS transaction_hash,
         TRY_CAST(obj->>'transaction_index' AS INTEGER) AS transaction_index,
         TRY_CAST(obj->>'log_index' AS INTEGER) AS log_index,
         lower(obj->>'address') AS address,
         obj->>'exchange' AS exchange,
         obj->>'event' AS event,
         -- `args` is null for a topic no ABI knows; kept as JSON text (its keys are camelCase: not lower-cased).
         CASE WHEN json_type(obj->'args') = 'OBJECT' THEN obj->'args' END AS args,
         list_transform(json_extract_string(obj, '$.topics[*]'), t -> lower(t)) AS topics,
         lower(obj->>'data') AS data
  FROM _chain_objs
  WHERE (obj->>'kind') = 'log'
)
SELECT l.*, b.ts AS block_ts_s,
  CASE
    WHEN l.block_number IS NULL OR l.log_index IS NULL OR l.transaction_hash IS NULL OR l.address IS NULL
      THEN 'log line lacks block_number, log_index, transaction_hash or address'
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
  SELECT min(ord) FILTER (WHERE (obj->>'kind') = 'chain_range') AS first_range,
         count(*) FILTER (WHERE (obj->>'kind') = 'chain_range') AS ranges,
         min(ord) FILTER (WHERE (obj->>'kind') = 'end') AS end_line,
         max(ord) AS last_line,
         count(*) FILTER (WHERE (obj->>'kind') = 'log') AS log_lines
  FROM _chain_objs
), issues AS (
  SELECT line, 'block line lacks number, hash or timestamp' AS message, 1 AS n FROM _chain_blocks
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
  SELECT ord, 'error line kept by the indexer (block ' || coalesce(obj->>'block_number', '?') || '): ' || coalesce(obj->>'message', '(no message)'), 1
  FROM _chain_objs WHERE (obj->>'kind') = 'error'
  UNION ALL
  SELECT min(ord), 'unknown line kind ' || coalesce('"' || (obj->>'kind') || '"', '(none)'), count(*) FROM _chain_objs
  WHERE (obj->>'kind') IS NULL OR (obj->>'kind') NOT IN ('chain_range', 'block', 'log', 'error', 'end')
  GROUP BY (obj->>'kind')
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
       log_index::VARCHAR AS log_index, args->>'orderHash' AS order_hash, args->>'maker' AS maker, args->>'taker' AS taker,
       args->>'makerAssetId' AS maker_asset_id, args->>'takerAssetId' AS taker_asset_id,
       args->>'makerAmountFilled' AS maker_amount_filled, args->>'takerAmountFilled' AS taker_amount_filled,
       args->>'fee' AS fee, NULL::VARCHAR AS source_id, args->>'side' AS side, args->>'tokenId' AS token_id,
       address AS contract
FROM _chain_logs WHERE problem IS NULL AND event = 'OrderFilled';

-- name: summary
SELECT (SELECT count(*) FROM _chain_logs WHERE problem IS NULL) AS logs,
       (SELECT count(*) FROM _chain_logs WHERE problem IS NOT NULL) AS logs_not_landed,
       (SELECT count(*) FROM _chain_objs WHERE (obj->>'kind') = 'error') AS error_lines,
       (SELECT max(ts) * 1000 FROM _chain_blocks WHERE number IS NOT NULL AND hash IS NOT NULL) AS newest_block_ms;
