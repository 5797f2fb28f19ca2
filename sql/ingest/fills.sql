-- On-chain OrderFilled events → trades, for every fills source (fills files, chain files).
-- Input: _fills_raw(line, event, block_number, block_timestamp, transaction_hash, log_index, order_hash, maker,
-- taker, maker_asset_id, taker_asset_id, maker_amount_filled, taker_amount_filled, fee, source_id, side, token_id,
-- contract), all VARCHAR. V1 events carry maker/taker asset ids; V2 events carry `side` and `token_id` instead.
-- `contract`: the emitting exchange's address, NULL when the source does not say (Goldsky CSV, subgraph JSON).
-- Parameters: $ctf, $negrisk (V1), $ctf_v2, $negrisk_v2 (V2), lower-case.

-- name: parse
-- Amounts are uint256 on chain with 6 decimals (USDC and outcome shares alike): parsed as HUGEINT so
-- nothing passes through a float; values that do not fit the lake's DECIMAL(18,6) are reported, not rounded.
CREATE OR REPLACE TEMP TABLE _fills_parsed AS
WITH p AS (
  SELECT line,
         nullif(trim(event), '') AS event,
         lower(trim(transaction_hash)) AS tx,
         TRY_CAST(block_number AS BIGINT) AS block_number,
         TRY_CAST(block_timestamp AS BIGINT) AS ts_raw,
         TRY_CAST(log_index AS INTEGER) AS log_index_raw,
         nullif(trim(log_index), '') AS log_index_text,
         lower(nullif(trim(order_hash), '')) AS order_hash,
         lower(trim(maker)) AS maker,
         lower(trim(taker)) AS taker,
         lower(nullif(trim(contract), '')) AS contract,
         v2_shape, nullif(trim(side), '') AS v2_side,
         -- Token ids are 70+ digit decimals (beyond HUGEINT): kept as text, leading zeros removed.
         CASE WHEN ltrim(trim(maker_asset_raw), '0') = '' AND trim(maker_asset_raw) <> '' THEN '0' ELSE ltrim(trim(maker_asset_raw), '0') END AS maker_asset,
         CASE WHEN ltrim(trim(taker_asset_raw), '0') = '' AND trim(taker_asset_raw) <> '' THEN '0' ELSE ltrim(trim(taker_asset_raw), '0') END AS taker_asset,
         TRY_CAST(trim(maker_amount_filled) AS HUGEINT) AS maker_amount,
         TRY_CAST(trim(taker_amount_filled) AS HUGEINT) AS taker_amount,
         coalesce(TRY_CAST(nullif(trim(fee), '') AS HUGEINT), 0) AS fee_raw,
         nullif(trim(fee), '') IS NOT NULL AND TRY_CAST(trim(fee) AS HUGEINT) IS NULL AS fee_bad,
         source_id,
         maker_amount_filled, taker_amount_filled
  FROM (
    SELECT *,
           -- V2 (docs/chain-v2.md): makerAssetId = side × tokenId, takerAssetId = tokenId − makerAssetId, side 0
           -- BUY / 1 SELL. Token ids exceed HUGEINT, so the product is taken case by case; any other side gives
           -- NULL ids (reported below).
           CASE WHEN v2_shape THEN CASE trim(side) WHEN '0' THEN '0' WHEN '1' THEN token_id END ELSE maker_asset_id END AS maker_asset_raw,
           CASE WHEN v2_shape THEN CASE trim(side) WHEN '0' THEN token_id WHEN '1' THEN '0' END ELSE taker_asset_id END AS taker_asset_raw
    FROM (
      SELECT *,
             -- A record with asset ids is read as V1 even when it also names a side or token.
             nullif(trim(maker_asset_id), '') IS NULL AND nullif(trim(taker_asset_id), '') IS NULL
               AND nullif(trim(token_id), '') IS NOT NULL AS v2_shape
      FROM _fills_raw
    )
  )
), d AS (
  SELECT *,
         -- Asset id 0 is the collateral (USDC on V1, PMCT 1:1 on V2; both "usdc" here). makerAssetId = 0: the maker pays USDC, i.e. BUYS token
         -- takerAssetId; otherwise the maker gives shares of makerAssetId, i.e. SELLS them.
         maker_asset = '0' AS maker_buys,
         CASE WHEN maker_asset = '0' THEN taker_asset ELSE maker_asset END AS token_id,
         CASE WHEN maker_asset = '0' THEN maker_amount ELSE taker_amount END AS usdc,
         CASE WHEN maker_asset = '0' THEN taker_amount ELSE maker_amount END AS shares,
         -- Block timestamps are epoch seconds; a value above 1e11 can only be milliseconds.
         CASE WHEN ts_raw > 100000000000 THEN ts_raw * 1000 ELSE ts_raw * 1000000 END AS ts_micros
  FROM p
)
SELECT *,
  CASE
    WHEN event IS NOT NULL AND event <> 'OrderFilled' THEN 'not an OrderFilled event'
    WHEN tx IS NULL OR tx = '' THEN 'missing transaction hash'
    WHEN ts_raw IS NULL OR ts_raw <= 0 THEN 'missing or invalid block timestamp'
    WHEN log_index_text IS NOT NULL AND log_index_raw IS NULL THEN 'invalid log index'
    WHEN v2_shape AND (v2_side IS NULL OR v2_side NOT IN ('0', '1')) THEN 'V2 side must be 0 (BUY) or 1 (SELL)'
    -- identifiers.sql: a token id is a uint256 in decimal (leading zeros removed above); text lands bounded.
    WHEN maker_asset IS NULL OR taker_asset IS NULL OR maker_asset = '' OR taker_asset = '' OR pm_bad_token(maker_asset)
         OR pm_bad_token(taker_asset) THEN 'asset ids must be decimal integers of a uint256 (at most 2^256 - 1)'
    WHEN pm_long_name(tx) OR pm_long_name(order_hash) OR pm_long_name(maker) OR pm_long_name(taker)
      THEN 'a transaction hash, order hash, maker or taker over 256 bytes'
    WHEN (maker_asset = '0') = (taker_asset = '0') THEN 'exactly one of makerAssetId / takerAssetId must be 0 (USDC)'
    WHEN maker_amount IS NULL OR taker_amount IS NULL OR fee_bad THEN 'amount is not an integer within 128 bits'
    WHEN shares <= 0 OR usdc < 0 THEN 'non-positive share amount'
    WHEN shares >= 1000000000000000000 OR usdc >= 1000000000000000000 OR fee_raw >= 1000000000000000000 OR fee_raw < 0
      THEN 'amount beyond 10^12 units (DECIMAL(18,6))'
    WHEN usdc * 1000000 >= shares * 10000000000 THEN 'price beyond DECIMAL(10,6)'
  END AS problem
FROM d;

-- name: problems
SELECT line, problem, maker_amount_filled, taker_amount_filled FROM _fills_parsed
WHERE problem IS NOT NULL AND problem <> 'not an OrderFilled event' ORDER BY line LIMIT 50;

-- name: counts
SELECT count(*) FILTER (WHERE problem IS NULL AND taker IN ($ctf, $negrisk, $ctf_v2, $negrisk_v2)) AS exchange_taker,
       count(*) FILTER (WHERE problem IS NULL AND taker NOT IN ($ctf, $negrisk, $ctf_v2, $negrisk_v2)) AS fills,
       count(*) FILTER (WHERE problem = 'not an OrderFilled event') AS other_events,
       count(*) FILTER (WHERE problem IS NOT NULL AND problem <> 'not an OrderFilled event') AS rejected
FROM _fills_parsed;

-- name: stage
-- Each match also emits one OrderFilled whose taker is the exchange contract itself (the taker order's own
-- fill against all makers), on V1 and V2 alike; dropping it counts every trade once. What remains is maker vs taker: the taker
-- is the aggressor, so `side` is the taker's side, the opposite of the maker's.
INSERT INTO stg_trades BY NAME
SELECT
  tx || '-' || log_index AS id,
  token_id,
  NULL AS condition_id,
  make_timestamp(ts_micros) AS ts,
  block_number,
  tx AS transaction_hash,
  log_index,
  order_hash,
  CASE WHEN maker_buys THEN 'sell' ELSE 'buy' END AS side,
  -- price = USDC / shares rounded half-up to 6 decimals, in integer arithmetic: (2·usdc·10^6 + shares) // (2·shares).
  (((usdc * 2000000 + shares) // (shares * 2))::DECIMAL(38,0) * 0.000001)::DECIMAL(10,6) AS price,
  (shares::DECIMAL(38,0) * 0.000001)::DECIMAL(18,6) AS size,
  (usdc::DECIMAL(38,0) * 0.000001)::DECIMAL(18,6) AS usd_value,
  maker,
  taker,
  (fee_raw::DECIMAL(38,0) * 0.000001)::DECIMAL(18,6) AS fee,
  -- V2 settles in its own collateral token (PMCT, 6 decimals, 1:1 USDC): known by the emitting contract, or by
  -- the V2 event shape when the source does not name the contract.
  CASE WHEN contract IN ($ctf_v2, $negrisk_v2) OR v2_shape THEN 'PMCT' ELSE 'USDC' END AS collateral
FROM (
  SELECT *,
         -- Sources without a log index (e.g. Goldsky CSV exports) get a stable one from the record itself:
         -- 1e9 + md5(id or order hash + parties + amounts) mod 1e9, so the same fill always gets the same
         -- trade id and can never meet a real log index (those are small per-block counters).
         coalesce(log_index_raw, 1000000000 + ((('0x' || substr(md5(coalesce(source_id,
           concat_ws(':', order_hash, maker, taker, maker_asset, taker_asset, maker_amount::VARCHAR, taker_amount::VARCHAR))), 1, 15))::UBIGINT)
           % 1000000000)::INTEGER) AS log_index
  FROM _fills_parsed
  WHERE problem IS NULL AND taker NOT IN ($ctf, $negrisk, $ctf_v2, $negrisk_v2)
);
