import type { DuckDBConnection, DuckDBDataChunk, DuckDBInstance, DuckDBMaterializedResult, DuckDBValue } from '@duckdb/node-api';
import { sqlIdent, type Query } from './duckdb.js';
import { shapeReplacements, toJsonRow, type Json, type Row, type RowShape } from './values.js';

/**
 * The executor, the one place statements run: a builder's `{ sql, params }` (src/query/) on a DuckDB instance
 * with the values bound — rows (`runQuery`), one row (`runOne`), a count (`runCount`), one JSON array text
 * (`runJsonArray`), a COPY stream (`startCopy`). Callers reach it through a lake session (./session.ts),
 * which adds the pinned version's sources; rows come back JSON-safe (./values.ts). Only for small JSON answers:
 * bulk output goes through COPY (./stream.ts).
 *
 * A statement costs two turns of the event loop: its prepare and its execution, each a DuckDB call on libuv's
 * pool whose completion waits for the loop. node-api's `runAndReadAll` took six for a one-chunk answer (a fresh
 * connection, the statement split, its prepare, its execution, then one fetch per chunk and one for the end),
 * and under a crowd of cheap requests every turn is long: a scan held its slot for several of them (issue 10).
 * So the executor keeps idle connections per instance, prepares the one statement directly, and reads the
 * materialised result's chunks synchronously.
 */

/** Idle connections per instance: a statement takes one (or opens one) and gives it back when done. */
const idle = new WeakMap<DuckDBInstance, DuckDBConnection[]>();
/** More than the slotted classes run at once (src/http/admission.ts); beyond it, a finished connection closes. */
const MAX_IDLE = 16;

/**
 * Runs one statement with its values bound and hands `read` its materialised chunks and column names, read while
 * the result is alive (a chunk's strings may point into it).
 */
async function execute<T>(db: DuckDBInstance, q: Query, read: (chunks: DuckDBDataChunk[], result: DuckDBMaterializedResult) => T): Promise<T> {
  let pool = idle.get(db);
  if (!pool) idle.set(db, (pool = []));
  const conn = pool.pop() ?? (await db.connect());
  let reusable = false;
  try {
    const prepared = await conn.prepare(q.sql);
    try {
      prepared.bind(q.params as Record<string, DuckDBValue>);
      const result = await prepared.run();
      const chunks: DuckDBDataChunk[] = [];
      for (let i = 0, n = result.chunkCount; i < n; i++) {
        const chunk = result.getChunk(i);
        if (chunk.rowCount > 0) chunks.push(chunk);
      }
      const out = read(chunks, result);
      reusable = true;
      return out;
    } finally {
      prepared.destroySync();
    }
  } finally {
    // A connection whose statement failed is closed rather than kept: nothing of it carries over to the next.
    if (reusable && pool.length < MAX_IDLE) pool.push(conn);
    else conn.closeSync();
  }
}

/** Closes the instance's idle connections: before the instance itself is closed (src/compose.ts). */
export function closeIdleConnections(db: DuckDBInstance): void {
  for (const conn of idle.get(db)?.splice(0) ?? []) conn.closeSync();
}

export async function runQuery(db: DuckDBInstance, q: Query): Promise<Row[]> {
  return execute(db, q, (chunks, result) => {
    const names = result.deduplicatedColumnNames();
    const rows: Row[] = [];
    for (const c of chunks) for (const r of c.getRowObjects(names)) rows.push(toJsonRow(r));
    return rows;
  });
}

export async function runOne(db: DuckDBInstance, q: Query): Promise<Row | undefined> {
  return (await runQuery(db, q))[0];
}

/** The first column of the first row as a number (a `count(*)`), 0 when there is no row or it is NULL. */
export async function runCount(db: DuckDBInstance, q: Query): Promise<number> {
  return execute(db, q, (chunks) => Number(chunks[0]?.getColumnVector(0).getItem(0) ?? 0));
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
  return execute(db, { sql: `SELECT to_json(_r)::VARCHAR AS j FROM (${inner}) _r`, params: q.params }, (chunks) => {
    const rows: string[] = [];
    for (const c of chunks) for (const j of c.getColumnValues(0) as string[]) rows.push(head ? head + j.slice(1) : j);
    return rows;
  });
}
