import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { currentVersion } from '../../src/lake/versions.js';
import type { RunningServer } from '../../src/server.js';

describe('GET /, GET /v1/status, and the probes in the OpenAPI document', () => {
  const tmp = tempDir();
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startTestServer(testConfig({ PMLAKE_LAKE: `${tmp.dir}/lake`, PMLAKE_STATE: `${tmp.dir}/state`, PMLAKE_RATE_LIMITS: 'on' }));
  });
  afterAll(async () => {
    await srv.close();
    tmp.cleanup();
  });

  it('the root names the service and its documents, without a key and without a rate limit', async () => {
    for (let i = 0; i < 65; i++) {
      const r = await fetch(`${srv.url}/`);
      expect(r.status).toBe(200);
      expect(r.headers.get('x-ratelimit-limit')).toBeNull();
      if (i === 0)
        expect(await r.json()).toEqual({
          name: 'pmlake',
          version: '1.0.0',
          docs: '/docs',
          openapi: '/v1/openapi.json',
          health: '/health',
          status: '/v1/status',
        });
      else await r.arrayBuffer();
    }
  });

  it('the status names the lake version served; an empty lake is no_data; anonymous callers are limited per IP', async () => {
    const r = await fetch(`${srv.url}/v1/status`);
    expect(r.status).toBe(200);
    expect(r.headers.get('x-ratelimit-limit')).toBe('60');
    const body = await r.json();
    expect(body).toMatchObject({
      status: 'no_data',
      version: '1.0.0',
      components: [
        { name: 'api', status: 'operational' },
        { name: 'lake', status: 'no_data' },
      ],
      lake_version: currentVersion(`${tmp.dir}/lake`).version,
      lake_published_at: null,
      sources: [{ name: 'tape', newest_landed_at: null, lag_seconds: null }],
    });
    expect(Math.abs(Date.parse(body.checked_at) - Date.now())).toBeLessThan(60_000);
  });

  it('/health answers exactly as before, and the document lists /, /health, /v1/status and the public market routes', async () => {
    const h = await fetch(`${srv.url}/health`);
    expect(await h.text()).toBe(JSON.stringify({ status: 'ok', version: '1.0.0', lake_version: 0, lake_published_at: null }));
    const doc = await (await fetch(`${srv.url}/v1/openapi.json`)).json();
    for (const p of ['/', '/health', '/v1/status', '/v1/public/markets', '/v1/public/markets/{market_id}']) expect(doc.paths[p]?.get, p).toBeDefined();
    expect(doc.components.schemas.PublicMarket.properties).toHaveProperty('winning_outcome_label');
    expect(doc.components.schemas.PublicMarketSummary.properties).toHaveProperty('orderbook_count');
  });
});
