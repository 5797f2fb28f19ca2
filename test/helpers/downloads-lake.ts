import fs from 'node:fs';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { generate } from '../../sim/generate/index.js';
import { runIngest } from '../../ingest/run.js';
import { startLocalS3, type LocalS3 } from '../../src/s3/local.js';
import { activateSubscriptionTx } from '../../src/state/accounts.js';
import type { Logger } from '../../src/log.js';
import type { RunningServer } from '../../src/server.js';
import { startTestServer, tempDir, testConfig } from './server.js';

/**
 * A lake for the download/export tests, built by the real generator (with options trades) and the real
 * ingest; a real s3rver on loopback (random port, temp dir); the real server pointed at it; a Professional
 * key with an active subscription; and a separate DuckDB for the tests' independent reads of the Parquet.
 */
export type DlLake = {
  dir: string;
  lakeDir: string;
  s3: LocalS3;
  srv: RunningServer;
  key: string;
  otherKey: string;
  userId: string;
  db: DuckDBInstance;
  rows(sql: string): Promise<Record<string, unknown>[]>;
  fetch(p: string, init?: RequestInit & { key?: string | null }): Promise<Response>;
  close(): Promise<void>;
};

export async function buildDownloadsLake(
  opts: {
    markets?: number;
    days?: number;
    seed?: number;
    env?: Record<string, string>;
    /** generator activity (default 0.3) */ rate?: number;
    /** exports go to the default local store (no PMLAKE_S3_ENDPOINT); the s3rver still runs, unused */ defaultStore?: boolean;
    /** the service's logger (default: silent, from the test configuration) */ log?: Logger;
  } = {},
): Promise<DlLake> {
  const tmp = tempDir('pmlake-dl-');
  const lakeDir = path.join(tmp.dir, 'lake');
  const gen = path.join(tmp.dir, 'gen');
  await generate({ markets: opts.markets ?? 4, days: opts.days ?? 2, seed: opts.seed ?? 11, out: gen, workers: 0, rate: opts.rate ?? 0.3, options: true });
  await runIngest([gen], { lakeDir, threads: 2 });
  fs.rmSync(gen, { recursive: true, force: true });
  const s3 = await startLocalS3({ directory: path.join(tmp.dir, 's3'), buckets: ['pmlake-exports'] });
  const srv = await startTestServer(
    testConfig({
      PMLAKE_LAKE: lakeDir,
      PMLAKE_STATE: path.join(tmp.dir, 'state'),
      ...(opts.defaultStore ? {} : { PMLAKE_S3_ENDPOINT: s3.endpoint }),
      ...(opts.env ?? {}),
    }),
    opts.log,
  );
  const mk = async (email: string) => {
    const store = srv.ctx.state;
    const user = await store.upsertUser(email, 'professional');
    await store.tx((t) => activateSubscriptionTx(t, { userId: user.id, tier: 'professional', billingPeriod: 'monthly', fundedBy: 'grant', at: new Date() }));
    return { user, key: (await store.createApiKey({ userId: user.id, name: 't', prefix: srv.ctx.config.keyPrefix })).plaintext };
  };
  const a = await mk('dl@example.com');
  const b = await mk('other@example.com');
  const db = await DuckDBInstance.create(':memory:', { threads: '2' });
  const conn = await db.connect();
  await conn.run(`SET TimeZone = 'UTC'`);
  return {
    dir: tmp.dir,
    lakeDir,
    s3,
    srv,
    key: a.key,
    otherKey: b.key,
    userId: a.user.id,
    db,
    async rows(sql) {
      return (await conn.runAndReadAll(sql)).getRowObjectsJS() as Record<string, unknown>[];
    },
    fetch(p, init = {}) {
      const { key, ...rest } = init;
      const headers: Record<string, string> = { ...((rest.headers as Record<string, string>) ?? {}) };
      const k = key === undefined ? a.key : key;
      if (k) headers['x-api-key'] = k;
      return fetch(p.startsWith('http') ? p : `${srv.url}${p}`, { ...rest, headers });
    },
    async close() {
      conn.closeSync();
      db.closeSync();
      await srv.close();
      await s3.close();
      tmp.cleanup();
    },
  };
}

/** Minimal RFC 4180 CSV parser (quotes, doubled quotes, embedded commas and newlines) for the tests. */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let q = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (q) {
      if (c === '"') {
        if (text[i + 1] === '"') {
          field += '"';
          i++;
        } else q = false;
      } else field += c;
    } else if (c === '"') q = true;
    else if (c === ',') {
      row.push(field);
      field = '';
    } else if (c === '\n') {
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
    } else if (c !== '\r') field += c;
  }
  if (field !== '' || row.length) {
    row.push(field);
    rows.push(row);
  }
  return rows;
}
