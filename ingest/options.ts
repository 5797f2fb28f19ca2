import { columnDdl } from '../src/lake/layout.js';
import { sqlString } from '../src/lake/duckdb.js';
import type { BatchContext, SourceHandler } from './types.js';
import { identifierMacros } from './identifiers.js';

/**
 * Crypto-options trades, one JSON object per line, as a Deribit-style venue publishes them
 * (public/get_last_trades_by_currency, one `trades[]` element per line):
 *
 *   {"instrument_name":"BTC-27JUN25-100000-C","timestamp":1719475200000,"trade_id":"BTC-123",
 *    "price":0.0123,"iv":55.2,"index_price":98000.5,"amount":1.5,"direction":"buy"}
 *
 * price is in units of the underlying, iv in percent, timestamp in epoch milliseconds. Instrument names are
 * UNDERLYING-DMMMYY-STRIKE-C|P; the venue expires options at 08:00 UTC on that date. A line that is not such
 * a record is reported (file and line) and skipped; the rest of the file still lands.
 */
const NAME = '^([A-Z]+)-([0-9]{1,2}[A-Z]{3}[0-9]{2})-([0-9]+(?:\\.[0-9]+)?)-([CP])$';

export const optionsHandler: SourceHandler = {
  kind: 'options',
  name: 'options trades JSONL (Deribit-style)',
  detect(_file, head) {
    const first = head.split('\n', 1)[0] ?? '';
    return first.includes('"instrument_name"') && first.includes('"iv"') && first.includes('"index_price"');
  },
  async stage(ctx: BatchContext, file: string) {
    const { conn } = ctx;
    await conn.run(`CREATE TEMP TABLE IF NOT EXISTS stg_options (${columnDdl('options')})`);
    await conn.run('DROP TABLE IF EXISTS _opt_lines');
    // Each line as text (no CSV quoting or delimiters), numbered, so bad lines can be named.
    await conn.run(
      `CREATE TEMP TABLE _opt_lines AS
       SELECT row_number() OVER () AS line, j FROM read_csv(${sqlString(file)}, columns = {'j': 'VARCHAR'},
         header = false, delim = '\x1f', quote = '', escape = '', auto_detect = false, compression = 'auto')`,
    );
    await conn.run('DROP TABLE IF EXISTS _opt_parsed');
    await conn.run(
      `CREATE TEMP TABLE _opt_parsed AS
       SELECT line, j,
         try(j::JSON) AS doc,
         regexp_extract(try(j::JSON)->>'instrument_name', '${NAME}', ['u', 'd', 'k', 't']) AS n
       FROM _opt_lines WHERE trim(j) <> ''`,
    );
    await conn.run('DROP TABLE IF EXISTS _opt_rows');
    await conn.run(
      `CREATE TEMP TABLE _opt_rows AS
       SELECT line,
         make_timestamp(try_cast(doc->>'timestamp' AS BIGINT) * 1000) AS ts,
         'deribit' AS venue,
         nullif(n.u, '') AS underlying,
         doc->>'instrument_name' AS instrument_name,
         try_strptime(nullif(n.d, '') || ' 08:00', '%d%b%y %H:%M') AS expiry,
         try_cast(nullif(n.k, '') AS DOUBLE) AS strike,
         nullif(n.t, '') AS option_type,
         doc->>'trade_id' AS trade_id,
         try_cast(doc->>'price' AS DOUBLE) AS price,
         try_cast(doc->>'iv' AS DOUBLE) AS iv,
         try_cast(doc->>'index_price' AS DOUBLE) AS index_price,
         try_cast(doc->>'amount' AS DOUBLE) AS amount,
         lower(doc->>'direction') AS direction
       FROM _opt_parsed`,
    );
    // The name and the trade id land as text: bounded like every name (sql/ingest/identifiers.sql).
    await identifierMacros(conn);
    const valid = `ts IS NOT NULL AND underlying IS NOT NULL AND expiry IS NOT NULL AND strike > 0 AND trade_id IS NOT NULL
      AND price >= 0 AND iv > 0 AND index_price > 0 AND amount > 0 AND direction IN ('buy', 'sell')
      AND NOT pm_long_name(instrument_name) AND NOT pm_long_name(trade_id)`;
    const bad = (await conn.runAndReadAll(`SELECT line FROM _opt_rows WHERE NOT coalesce(${valid}, false) ORDER BY line LIMIT 1000`))
      .getRowObjectsJS()
      .map((r) => Number(r.line));
    for (const line of bad)
      ctx.issues.push({
        file,
        line,
        message: 'not an options trade record (instrument_name, timestamp, trade_id, price, iv, index_price, amount, direction; names at most 256 bytes)',
      });
    const res = await conn.run(
      `INSERT INTO stg_options SELECT ts, venue, underlying, instrument_name, expiry, strike, option_type, trade_id, price, iv,
         index_price, amount, direction FROM _opt_rows WHERE coalesce(${valid}, false)`,
    );
    ctx.counts.options_trades = (ctx.counts.options_trades ?? 0) + Number(res.rowsChanged);
    if (bad.length) ctx.counts.options_bad_lines = (ctx.counts.options_bad_lines ?? 0) + bad.length;
    await conn.run('DROP TABLE IF EXISTS _opt_lines; DROP TABLE IF EXISTS _opt_parsed; DROP TABLE IF EXISTS _opt_rows');
  },
};
