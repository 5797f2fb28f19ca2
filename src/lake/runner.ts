import type { DuckDBInstance, DuckDBValue } from '@duckdb/node-api';
import { sqlIdent, withConnection, type Query } from './duckdb.js';
import { shapeReplacements, toJsonRow, type Json, type Row, type RowShape } from './values.js';

/**
 * The executor, the one place statements run: a builder's `{ sql, params }` (src/query/) on a DuckDB instance
 * with the values bound — rows (`runQuery`), one row (`runOne`), a count (`runCount`), one JSON array text
 * (`runJsonArray`), a COPY stream (`startCopy`) — each on a connection of its own. Callers reach it through a lake session (./session.ts),
 * which adds the pinned version's sources; rows come back JSON-safe (./values.ts). Only for small JSON answers:
 * bulk output goes through COPY (./stream.ts).
 */
export async function runQuery(db: DuckDBInstance, q: Query): Promise<Row[]> {
  return withConnection(db, async (conn) => {
    const reader = await conn.runAndReadAll(q.sql, q.params as Record<string, DuckDBValue>);
    return reader.getRowObjects().map(toJsonRow);
  });
}

export async function runOne(db: DuckDBInstance, q: Query): Promise<Row | undefined> {
  return (await runQuery(db, q))[0];
}

/** The first column of the first row as a number (a `count(*)`), 0 when there is no row or it is NULL. */
export async function runCount(db: DuckDBInstance, q: Query): Promise<number> {
  return withConnection(db, async (conn) => {
    const reader = await conn.runAndReadAll(q.sql, q.params as Record<string, DuckDBValue>);
    return Number(reader.getRows()[0]?.[0] ?? 0);
  });
}

/**
 * Streaming, the executor's fifth way: a builder's SELECT wrapped in `COPY … TO '<fifo>'`, the bytes read from the
 * FIFO (downloads, bulk items, exports). It lives in ./stream.ts with its FIFO machinery.
 */
export { startCopy, type CopyFormat, type CopyStream } from './stream.js';

export type JsonShape = RowShape & {
  /**
   * Columns with one value for every row (bound parameters such as the token id), in select order and first:
   * left out of the SQL and written by JavaScript in front of each row, so DuckDB does not serialise the same
   * 78-digit token id on every row and JavaScript decodes fewer bytes. At least one column must remain.
   */
  constants?: ReadonlyArray<readonly [string, Json]>;
};

/**
 * Runs a query and returns its rows as one JSON array text, each row serialised by DuckDB (`to_json`), so the
 * values never become JavaScript objects: cheaper than row objects + JSON.stringify for a large page, and than
 * a plain DuckDB client reading the same rows. The shape is the resource's
 * (src/query/shapes.ts, the same its files use): timestamps as ISO text, DECIMALs as DOUBLE — to_json writes a
 * DECIMAL wider than 15 digits with its scale (`68.280000`), and a HUGEINT-backed sum as decimal text. The casts
 * wrap the builder's query, so they run on the rows sent only, after its LIMIT.
 */
export async function runJsonArray(db: DuckDBInstance, q: Query, shape: JsonShape = {}): Promise<{ json: string; rows: number }> {
  const rows = await runJsonRows(db, q, shape);
  return { json: `[${rows.join(',')}]`, rows: rows.length };
}

/** runJsonArray's rows, each its own JSON object text: a page that read one row more than it shows drops it here. */
export async function runJsonRows(db: DuckDBInstance, q: Query, shape: JsonShape = {}): Promise<string[]> {
  const replace = shapeReplacements(shape, 'json');
  const constants = shape.constants ?? [];
  const exclude = constants.length ? ` EXCLUDE (${constants.map(([c]) => sqlIdent(c)).join(', ')})` : '';
  const inner = replace.length || exclude ? `SELECT *${exclude}${replace.length ? ` REPLACE (${replace.join(', ')})` : ''} FROM (${q.sql})` : q.sql;
  // `{"market_id":"…","outcome":0,` then each row's own text without its opening brace.
  const head = constants.length ? `{${constants.map(([c, v]) => `${JSON.stringify(c)}:${JSON.stringify(v)}`).join(',')},` : '';
  return withConnection(db, async (conn) => {
    const reader = await conn.runAndReadAll(`SELECT to_json(_r)::VARCHAR AS j FROM (${inner}) _r`, q.params as Record<string, DuckDBValue>);
    const col = (reader.getColumns()[0] ?? []) as string[];
    if (!head) return col;
    const rows = new Array<string>(col.length);
    for (let i = 0; i < col.length; i++) rows[i] = head + col[i]!.slice(1);
    return rows;
  });
}
