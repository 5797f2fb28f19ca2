import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildQueryLake, catalog, type QueryLake } from '../helpers/query-lake.js';

/**
 * Every operation of the anchor's OpenAPI document, called on a real server over a real lake with valid input
 * (real ids, the required query parameters, minimal valid bodies): none may answer 404 (no such route, or a
 * real id not found) or 405. A route not served yet is in NOT_SERVED with a comment (and must still answer 404, so the list stays exact).
 */
const anchor = JSON.parse(readFileSync('/work/shared/reference/anchor-openapi.json', 'utf8'));
const NOT_SERVED = new Set<string>([
  // pmlake's payment provider is the local one (POST /v1/billing/webhook/local); no Paddle account exists offline.
  'POST /v1/billing/webhook/paddle',
]);

type Op = { method: string; path: string; op: any };
const ops: Op[] = Object.entries(anchor.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
  Object.entries(item).map(([method, op]) => ({ method: method.toUpperCase(), path, op })),
);
/** Operations that destroy what others use run last (a deleted key, a confirmed deletion). */
const LAST = ['POST /v1/user/keys/{key_id}/rotate', 'DELETE /v1/user/keys/{key_id}', 'POST /v1/user/delete-confirm', 'POST /v1/user/delete-cancel'];
ops.sort((a, b) => LAST.indexOf(`${a.method} ${a.path}`) - LAST.indexOf(`${b.method} ${b.path}`));

describe("every operation of the anchor's document is served", () => {
  let L: QueryLake;
  const v: Record<string, string> = {};
  beforeAll(async () => {
    L = await buildQueryLake();
    const [m] = await L.rows(`SELECT id, series_id FROM read_parquet(${catalog(L.lakeDir, 'markets')}) ORDER BY trade_count DESC LIMIT 1`);
    v.market_id = String(m!.id);
    // A series with trades (GET /v1/series names its latest data).
    const series = (await L.get('/v1/series', { key: L.key })).body as { series_id: string; latest: string | null; timeframe: string }[];
    v.series_id = series.find((x) => x.latest && !x.series_id.includes('options') && !x.series_id.includes('tape'))!.series_id;
    const key = await L.get('/v1/user/keys', { method: 'POST', body: JSON.stringify({ name: 'walk' }), key: L.key });
    v.key_id = String(key.body.id);
    const job = await L.get('/v1/exports', { method: 'POST', body: JSON.stringify({ kind: 'trades', market_id: v.market_id, format: 'csv' }), key: L.key });
    expect(job.status, JSON.stringify(job.body)).toBe(202);
    v.job_id = String(job.body.id ?? job.body.job_id ?? job.body.data?.id);
  }, 240_000);
  afterAll(async () => {
    await L?.close();
  });

  const query: Record<string, () => string> = {
    market_id: () => v.market_id!,
    series_id: () => v.series_id!,
    start: () => '2020-01-01T00:00:00Z',
    end: () => '2030-01-01T00:00:00Z',
    data_type: () => 'trades',
    symbol: () => v.market_id!,
    resolution: () => '60',
    from: () => '1577836800',
    to: () => '1893456000',
  };
  const bodies: Record<string, () => unknown> = {
    MarketEstimateRequest: () => ({ data_type: 'trades' }),
    EstimateRequest: () => ({ data_type: 'trades' }),
    BulkDownloadRequest: () => ({ items: [{ kind: 'trades', market_id: v.market_id, format: 'csv' }] }),
    ProvisionKeyRequest: () => ({ email: 'pro@example.com' }),
    CreateKeyRequest: () => ({ name: 'another' }),
    DeleteAccountRequest: () => ({ reason: 'walk' }),
    DeleteConfirmRequest: () => ({ token: 'not-a-real-token' }),
    CreateCheckoutRequest: () => ({ amount: 10, success_url: 'https://example.com/ok', cancel_url: 'https://example.com/no' }),
    SubCheckoutRequest: () => ({
      tier: 'professional',
      billing_period: 'monthly',
      success_url: 'https://example.com/ok',
      cancel_url: 'https://example.com/no',
    }),
    RedeemRequest: () => ({ tier: 'professional', billing_period: 'monthly' }),
    CreateOrderRequest: () => ({ items: [{ market_id: v.market_id, data_type: 'trades', format: 'csv' }] }),
    CreateExportRequest: () => ({ kind: 'trades', market_id: v.market_id, format: 'csv' }),
  };

  it.each(ops.map((o) => [`${o.method} ${o.path}`, o] as const))('%s', async (label, o) => {
    const path = o.path.replace(/\{(\w+)\}/g, (_, n: string) => encodeURIComponent(v[n]!));
    const qs = new URLSearchParams();
    for (const p of (o.op.parameters ?? []) as any[]) if (p.in === 'query' && p.required) qs.set(p.name, query[p.name]!());
    const ref: string | undefined = o.op.requestBody?.content?.['application/json']?.schema?.$ref;
    const body = ref ? JSON.stringify(bodies[ref.split('/').pop()!]!()) : o.method === 'POST' ? '{}' : undefined;
    const r = await L.get(`${path}${qs.size ? `?${qs}` : ''}`, { method: o.method, body, key: L.key });
    if (NOT_SERVED.has(label)) expect(r.status, label).toBe(404);
    else expect([404, 405], `${label} → ${r.status} ${JSON.stringify(r.body).slice(0, 200)}`).not.toContain(r.status);
  });
});
