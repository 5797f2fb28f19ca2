import type { DuckDBDataChunk, DuckDBInstance, DuckDBValue } from '@duckdb/node-api';
import type { Query } from './duckdb.js';

/**
 * A statement's result pulled one data chunk (up to 2,048 rows) at a time, on a connection of its own: DuckDB
 * produces the next chunk only when asked (it buffers at most its `streaming_buffer_size` ahead), so a consumer
 * that stops pulling holds one chunk. Values stay in the chunk's vectors until read (`getColumnVector(i).getItem`),
 * so a row becomes JavaScript only when it is used. Ending early (return, throw) interrupts the statement and
 * releases the connection.
 */
export async function* streamChunks(db: DuckDBInstance, q: Query): AsyncGenerator<DuckDBDataChunk> {
  const conn = await db.connect();
  let finished = false;
  try {
    const result = await conn.stream(q.sql, q.params as Record<string, DuckDBValue>);
    for (;;) {
      const chunk = await result.fetchChunk();
      if (!chunk || chunk.rowCount === 0) break;
      yield chunk;
    }
    finished = true;
  } finally {
    // A statement still producing would otherwise keep its threads and buffers until it ran to its end.
    if (!finished) conn.interrupt();
    conn.closeSync();
  }
}
