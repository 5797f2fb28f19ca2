import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, tempDir, testConfig } from '../helpers/server.js';
import type { RunningServer } from '../../src/server.js';

describe('GET /health', () => {
  const tmp = tempDir();
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startTestServer(testConfig({ PMLAKE_LAKE: `${tmp.dir}/lake`, PMLAKE_STATE: `${tmp.dir}/state` }));
  });
  afterAll(async () => {
    await srv.close();
    tmp.cleanup();
  });

  it('answers ok on a real port', async () => {
    const res = await fetch(`${srv.url}/health`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: 'ok' });
  });

  it('answers unknown paths with a JSON 404 detail', async () => {
    const res = await fetch(`${srv.url}/v1/nope`);
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ detail: 'Not Found' });
  });
});
