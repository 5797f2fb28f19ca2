import fs from 'node:fs';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Progress } from '../../src/exports/progress.js';
import { copyOptions, type CopyFormat } from '../../src/lake/stream.js';
import { parseCsv } from '../helpers/downloads-lake.js';
import { tempDir } from '../helpers/server.js';

/**
 * The progress counter on the bytes DuckDB's COPY really writes (the exports' own COPY options), cut into
 * chunks at every size from 1 byte up: the rows it counts equal the rows the file holds (parsed here), wherever
 * a chunk boundary falls — inside a record's start, between records, at the closing bracket.
 */
const tmp = tempDir('pmlake-progress-');
let db: DuckDBInstance;
beforeAll(async () => {
  db = await DuckDBInstance.create(':memory:');
});
afterAll(() => {
  db.closeSync();
  tmp.cleanup();
});

async function copyOut(rows: number, format: CopyFormat): Promise<Buffer> {
  const file = path.join(tmp.dir, `out-${rows}.${format}`);
  const conn = await db.connect();
  try {
    // Strings with commas, quotes, braces and a tab-brace inside them: nothing a naive count should take for a row.
    await conn.run(
      `COPY (SELECT range AS id, 'a,"b"' || chr(9) || '{x}' AS s, {'k': range} AS nested FROM range(${rows})) TO '${file}' (${copyOptions(format)})`,
    );
  } finally {
    conn.closeSync();
  }
  return fs.readFileSync(file);
}

const parsed = (format: CopyFormat, b: Buffer) => (format === 'json' ? (JSON.parse(b.toString()) as unknown[]).length : parseCsv(b.toString()).length - 1);

describe('export progress rows', () => {
  for (const format of ['json', 'csv'] as const) {
    it(`${format}: equal to the file's rows for any chunking (0, 1 and 37 rows)`, async () => {
      for (const rows of [0, 1, 37]) {
        const bytes = await copyOut(rows, format);
        expect(parsed(format, bytes)).toBe(rows);
        for (let size = 1; size <= Math.min(bytes.length, 64); size++) {
          const p = new Progress(format);
          for (let i = 0; i < bytes.length; i += size) p.add(Buffer.from(bytes.subarray(i, i + size)));
          expect([p.rows(), p.bytes], `${rows} rows in chunks of ${size}`).toEqual([rows, bytes.length]);
        }
      }
    });
  }
});
