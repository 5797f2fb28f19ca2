import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.js';
import { listPulls } from '../../src/state/pulls.js';
import { tempDir } from '../helpers/server.js';
import { connect, fixtureReplayServer, proUser, refusal } from './replay-util.js';

/**
 * A replay's handshake is a request like any other for the per-key rate limit: it counts in the bucket the
 * caller's HTTP requests count in, and the 61st of a minute is refused 429 before the upgrade, charging nothing.
 */
const tmp = tempDir('pmlake-replay-rate-');
let srv: RunningServer;
let ws: string;
const WINDOW = 'from=2025-03-02T00:00:00Z&to=2025-03-02T00:10:00Z&speed=0';

const get = (key: string) => fetch(`${srv.url}/v1/markets?limit=1`, { headers: { 'x-api-key': key } });

beforeAll(async () => {
  ({ srv, ws } = await fixtureReplayServer(tmp.dir, { PMLAKE_RATE_LIMITS: 'on' }));
}, 60_000);

afterAll(async () => {
  await srv?.close();
  tmp.cleanup();
});

describe('replay handshakes and the request rate limit', () => {
  it('count in the caller’s bucket: after 59 requests one replay runs, then requests and replays are refused 429', async () => {
    const user = await proUser(srv, 'rate@example.com');
    let last: Response | undefined;
    for (let i = 0; i < 59; i++) {
      last = await get(user.key);
      expect(last.status).toBe(200);
    }
    expect(last!.headers.get('x-ratelimit-remaining')).toBe('1');
    // The 60th request of the minute: a replay, accepted and run to its end.
    const run = connect(`${ws}?${WINDOW}`, { key: user.key, subscription: { assets_ids: [], type: 'market' } });
    expect((await run.close).code).toBe(1000);
    // It took the last slot: the next HTTP request is over the limit.
    const after = await get(user.key);
    expect(after.status).toBe(429);
    // And a replay is refused before the upgrade, with the limiter's answer.
    const refused = await refusal(`${ws}?${WINDOW}&api_key=${user.key}`);
    expect(refused.status).toBe(429);
    expect(refused.body.detail).toBe('Rate limit exceeded');
    // The refused handshake charged nothing: only the replay that ran is recorded.
    const pulls = (await listPulls(srv.ctx.state, user.id, { limit: 10, offset: 0 })).filter((p) => p.format === 'websocket');
    expect(pulls).toHaveLength(1);
    // Buckets are per key: another caller is unaffected.
    const other = await proUser(srv, 'rate-other@example.com');
    const ok = connect(`${ws}?${WINDOW}`, { key: other.key, subscription: { assets_ids: [], type: 'market' } });
    expect((await ok.close).code).toBe(1000);
  });
});
