import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { files } from '../helpers/lake-files.js';
import { query, tempDir } from './fills-oracle.js';

/** Options trades land their instrument name and trade id as text: bounded like every name (lake/README.md, "What the ingest accepts"). */
const tmp = tempDir('pmlake-ident-opt-');
afterAll(() => tmp.cleanup());

describe('identifiers in options trades', () => {
  it('a trade id or an instrument name over 256 bytes is an issue with its line; the other trades land', async () => {
    const trade = (name: string, id: string, ts: number) =>
      JSON.stringify({ instrument_name: name, timestamp: ts, trade_id: id, price: 0.01, iv: 50, index_price: 98000, amount: 1, direction: 'buy' });
    const file = path.join(tmp.dir, 'in', 'options.jsonl');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const lines = [
      trade('BTC-27JUN25-100000-C', 'BTC-1', 1719475200000),
      trade('BTC-27JUN25-100000-C', `BTC-${'9'.repeat(100_000)}`, 1719475201000),
      trade(`${'B'.repeat(300)}-27JUN25-100000-C`, 'BTC-3', 1719475202000),
      trade('BTC-27JUN25-100000-P', 'BTC-4', 1719475203000),
    ];
    fs.writeFileSync(file, lines.join('\n') + '\n');
    const lake = path.join(tmp.dir, 'lake');
    const r = await runIngest([file], { lakeDir: lake, threads: 1 });
    expect(r.failed).toBe(0);
    expect(r.issues.map((i) => ({ file: i.file, line: i.line }))).toEqual([
      { file, line: 2 },
      { file, line: 3 },
    ]);
    const rows = await query(`SELECT trade_id FROM read_parquet(${files(lake, 'options')}, hive_partitioning = false) ORDER BY 1`);
    expect(rows.map((x) => x.trade_id)).toEqual(['BTC-1', 'BTC-4']);
  });
});
