import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contentDisposition } from '../../src/downloads/disposition.js';
import { activateSubscriptionTx } from '../../src/state/accounts.js';
import type { RunningServer } from '../../src/server.js';
import { buildDownloadsLake, type DlLake } from '../helpers/downloads-lake.js';
import { files } from '../helpers/lake-files.js';
import { startTestServer, tempDir, testConfig } from '../helpers/server.js';

/**
 * The file name a client saves, read from the Content-Disposition of every file pmlake hands out: a GET download,
 * a bulk ZIP, an export behind pmlake's own link (default store) and behind an S3 presigned link. Two readers:
 *  - the official Python SDK's (supagamma `_streaming.filename_from` then `safe_filename`): everything after the
 *    first `filename=`, whitespace and quotes stripped, reduced to its last path component;
 *  - an RFC 6266 reader written here (parameters split outside quotes, `filename*` preferred, RFC 8187 decoded).
 * Both must give the file's real name.
 */

/** supagamma's `filename_from` + `safe_filename`, transcribed: split, strip, strip('"'), last path component. */
function sdkFileName(header: string | null): string {
  const d = header ?? '';
  if (!d.includes('filename=')) return 'supagamma-download';
  const name = d
    .slice(d.indexOf('filename=') + 'filename='.length)
    .trim()
    .replace(/^"+|"+$/g, '');
  const last = name.replace(/\\/g, '/').split('/').pop() ?? '';
  return last === '' || last === '.' || last === '..' ? 'supagamma-download' : last;
}

/** RFC 6266: disposition type, then `; name=value` pairs (token or quoted-string); filename* wins over filename. */
function rfc6266FileName(header: string | null): string | undefined {
  const params = new Map<string, string>();
  const re = /;\s*([A-Za-z0-9!#$&+.^_`|~*-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;\s]*)/g;
  const h = header ?? '';
  expect(h.startsWith('attachment')).toBe(true);
  for (let m = re.exec(h); m; m = re.exec(h)) {
    const name = m[1]!.toLowerCase();
    expect(params.has(name), `parameter ${name} given twice in ${h}`).toBe(false);
    const raw = m[2]!;
    params.set(name, raw.startsWith('"') ? raw.slice(1, -1).replace(/\\(.)/g, '$1') : raw);
  }
  const ext = params.get('filename*');
  if (ext !== undefined) {
    const m = /^UTF-8'[^']*'(.*)$/i.exec(ext);
    expect(m, `RFC 8187 value ${ext}`).not.toBeNull();
    expect(m![1]).toMatch(/^(?:[A-Za-z0-9!#$&+.^_`|~-]|%[0-9A-F]{2})*$/);
    return decodeURIComponent(m![1]!);
  }
  return params.get('filename');
}

describe('contentDisposition', () => {
  it('an ASCII name: filename= alone, read whole by the SDK and by RFC 6266', () => {
    for (const name of ['trades_539784.csv', 'ohlcv_0x12_1h.parquet', 'pmlake_bulk_2025-09-14T00-00-00-000Z.zip', 'a.b-c_d.json']) {
      const h = contentDisposition(name);
      expect(h).toBe(`attachment; filename="${name}"`);
      expect(sdkFileName(h)).toBe(name);
      expect(rfc6266FileName(h)).toBe(name);
    }
  });

  it('another name: RFC 6266 reads it exactly, the SDK reads a clean ASCII fallback (no filename* in it)', () => {
    for (const name of ['prix_€.csv', "o'neil (1)*.csv", 'año 2025.parquet', 'a;b"c.json']) {
      const h = contentDisposition(name);
      expect(rfc6266FileName(h)).toBe(name);
      const sdk = sdkFileName(h);
      expect(sdk).toMatch(/^[A-Za-z0-9._-]+$/);
      expect(sdk.length).toBe(name.length);
    }
  });
});

let L: DlLake;
let marketId: string;
let local: { srv: RunningServer; key: string; cleanup(): void };

async function exportLink(base: string, key: string): Promise<{ fileName: string; url: string }> {
  const headers = { 'x-api-key': key, 'content-type': 'application/json' };
  const body = JSON.stringify({ kind: 'trades', market_id: marketId, format: 'csv' });
  const job = (await (await fetch(`${base}/v1/exports`, { method: 'POST', headers, body })).json()) as { id: string };
  for (;;) {
    const j = (await (await fetch(`${base}/v1/exports/${job.id}`, { headers })).json()) as { status: string; file_name: string };
    if (!['queued', 'running'].includes(j.status)) {
      expect(j.status).toBe('succeeded');
      const u = (await (await fetch(`${base}/v1/exports/${job.id}/url`, { headers })).json()) as { data: { download_url: string } };
      return { fileName: j.file_name, url: u.data.download_url };
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  L = await buildDownloadsLake({ seed: 5 });
  const m = (
    await L.rows(
      `SELECT m.id, count(*) n FROM read_parquet(${files(L.lakeDir, 'catalog/markets')}) m
       JOIN read_parquet(${files(L.lakeDir, 'trades')}) t ON list_contains(m.outcome_token_ids, t.token_id) GROUP BY ALL ORDER BY n DESC LIMIT 1`,
    )
  )[0]!;
  marketId = String(m.id);
  // A second server over the same lake with the default (local) export store: pmlake serves the file itself.
  const tmp = tempDir('pmlake-cd-');
  const srv = await startTestServer(testConfig({ PMLAKE_LAKE: L.lakeDir, PMLAKE_STATE: path.join(tmp.dir, 'state') }));
  const user = await srv.ctx.state.upsertUser('cd@example.com', 'professional');
  await srv.ctx.state.tx((t) =>
    activateSubscriptionTx(t, { userId: user.id, tier: 'professional', billingPeriod: 'monthly', fundedBy: 'grant', at: new Date() }),
  );
  const key = (await srv.ctx.state.createApiKey({ userId: user.id, name: 't', prefix: srv.ctx.config.keyPrefix })).plaintext;
  local = { srv, key, cleanup: tmp.cleanup };
});
afterAll(async () => {
  await local?.srv.close();
  local?.cleanup();
  await L?.close();
});

describe('the name a client saves, from every file pmlake hands out', () => {
  const both = (header: string | null, name: string) => {
    expect(sdkFileName(header), `SDK reading ${header}`).toBe(name);
    expect(rfc6266FileName(header), `RFC 6266 reading ${header}`).toBe(name);
  };

  it('GET /v1/download/* (CSV, Parquet, JSON)', async () => {
    for (const [p, name] of [
      [`/v1/download/trades?market_id=${marketId}&format=csv&limit=5`, `trades_${marketId}.csv`],
      [`/v1/download/ohlcv?market_id=${marketId}&format=parquet&limit=5`, `ohlcv_${marketId}_1h.parquet`],
      [`/v1/download/orderbook?market_id=${marketId}&format=json&limit=2`, `orderbook_${marketId}.json`],
    ] as const) {
      const r = await L.fetch(p);
      expect(r.status).toBe(200);
      await r.arrayBuffer();
      both(r.headers.get('content-disposition'), name);
    }
  });

  it('POST /v1/download/bulk (the ZIP)', async () => {
    const r = await L.fetch('/v1/download/bulk', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ items: [{ kind: 'trades', market_id: marketId, format: 'csv', limit: 5 }] }),
    });
    expect(r.status).toBe(200);
    await r.arrayBuffer();
    const name = sdkFileName(r.headers.get('content-disposition'));
    expect(name).toMatch(/^pmlake_bulk_\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z\.zip$/);
    both(r.headers.get('content-disposition'), name);
  });

  it("an export behind pmlake's own link (default store) and behind an S3 presigned link", async () => {
    for (const [base, key] of [
      [local.srv.url, local.key],
      [L.srv.url, L.key],
    ] as const) {
      const { fileName, url } = await exportLink(base, key);
      // Which store answered: pmlake's own route, or the S3 server's presigned GET.
      expect(new URL(url).pathname.startsWith('/v1/exports/')).toBe(base === local.srv.url);
      const r = await fetch(url);
      expect(r.status).toBe(200);
      await r.arrayBuffer();
      expect(fileName).toMatch(/\.csv$/);
      both(r.headers.get('content-disposition'), fileName);
    }
  });
});
