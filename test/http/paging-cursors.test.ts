import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { createTestKey, startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { buildQueryLake, type QueryLake } from '../helpers/query-lake.js';
import { gid, POLL_STARTS, scenarioPoll, writePoll } from '../helpers/catalogue-polls.js';
import type { RunningServer } from '../../src/server.js';

/**
 * Hardening issue, item 4: a `/v1/markets/{id}/changes?cursor=` carrying `9223372036854775808:gamma` reached DuckDB
 * and came back a 500 ("micros out of int64 range"). Every parameter a Link rel="next" URL carries is validated
 * whole at the edge: a value the endpoint could not have written is a 422 whose `detail` names the parameter, and
 * never reaches a statement. Real servers on real ports, over a lake with the data each list pages through.
 */
const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64url');

/** The parameter names a 422's detail lists (each issue's loc: ['query', name, …]). */
function named(body: { detail?: unknown }): string[] {
  return Array.isArray(body.detail) ? body.detail.map((i: { loc: unknown[] }) => String(i.loc[1])) : [];
}

describe('the definition-changes cursor', () => {
  const tmp = tempDir();
  let srv: RunningServer;
  let key: string;
  const get = async (p: string) => {
    const r = await fetch(`${srv.url}${p}`, { headers: { 'X-API-Key': key } });
    return { status: r.status, body: (await r.json()) as any, link: r.headers.get('link') };
  };
  beforeAll(async () => {
    const dir = path.join(tmp.dir, 'polls');
    [0, 1, 2].forEach((i) => writePoll(dir, POLL_STARTS[i]!, scenarioPoll(i)));
    await runIngest([dir], { lakeDir: path.join(tmp.dir, 'lake') });
    srv = await startTestServer(testConfig({ PMLAKE_LAKE: path.join(tmp.dir, 'lake'), PMLAKE_STATE: path.join(tmp.dir, 'state') }));
    key = await createTestKey(srv);
  });
  afterAll(async () => {
    await srv?.close();
    tmp.cleanup();
  });
  const changes = `/v1/markets/${gid(1)}/changes`;

  it('a cursor the endpoint could not have written is a 422 naming cursor, never a 500', async () => {
    const hostile: [string, string][] = [
      ['the issue: one past int64', b64('9223372036854775808:gamma')],
      ['int64 max', b64('9223372036854775807:gamma')],
      ['below int64 min', b64('-9223372036854775809:clob')],
      ['int64 min', b64('-9223372036854775808:clob')],
      ['twenty digits', b64('99999999999999999999:gamma')],
      ['past year 9999', b64('253402300800000000:gamma')],
      ['before year 0000', b64('-62167219200000001:gamma')],
      ['an unknown source', b64('1777629600000000:nonsense')],
      ['a source in capitals', b64('1777629600000000:GAMMA')],
      ['no source', b64('1777629600000000:')],
      ['no instant', b64(':gamma')],
      ['only an instant', b64('1777629600000000')],
      ['a third part', b64('1777629600000000:gamma:x')],
      ['a fraction', b64('1777629600000000.5:gamma')],
      ['a sign', b64('+1777629600000000:gamma')],
      ['leading zeros', b64('01777629600000000:gamma')],
      ['minus zero', b64('-0:gamma')],
      ['an exponent', b64('1e15:gamma')],
      ['hex', b64('0x10:gamma')],
      ['spaces', b64(' 1777629600000000:gamma')],
      ['a NUL', b64('1777629600000000:gamma\u0000')],
      ['not UTF-8', Buffer.from([0xff, 0xfe, 0x3a, 0x67]).toString('base64url')],
      ['padded base64', `${b64('1:gamma')}=`],
      ['standard base64 alphabet', Buffer.from('1777629600000000:gamma>?').toString('base64')],
      ['unused base64 bits set', `${b64('1:gamma').slice(0, -1)}R`],
      ['not base64', '!!!!'],
      ['not base64 (space)', 'MT pnYW1tYQ'],
      ['not base64 (percent)', '%00'],
      ['plain text', 'nonsense'],
      ['empty', ''],
      ['long', 'A'.repeat(49)],
      ['huge', 'A'.repeat(6_000)],
      ['the plain text of a valid cursor', '1777629600000000:gamma'],
    ];
    for (const [what, cursor] of hostile) {
      const r = await get(`${changes}?cursor=${encodeURIComponent(cursor)}`);
      expect(r.status, what).toBe(422);
      expect(named(r.body), what).toEqual(['cursor']);
    }
    // Not a string: repeated, or bracketed into an object.
    for (const qs of [`cursor=${b64('1:gamma')}&cursor=${b64('2:gamma')}`, 'cursor[a]=1', 'cursor[]=x']) {
      const r = await get(`${changes}?${qs}`);
      expect(r.status, qs).toBe(422);
      expect(named(r.body), qs).toContain('cursor');
    }
  });

  it('cursors at the ends of the range are bound and answered; the Link cursor still pages', async () => {
    for (const c of ['-62167219200000000:gamma', '0:clob', '253402300799999999:clob']) {
      const r = await get(`${changes}?cursor=${b64(c)}`);
      expect(r.status, c).toBe(200);
      expect(Array.isArray(r.body), c).toBe(true);
    }
    // Everything of M1 is after year 0: the cursor at its start gives the whole list; at its end, nothing.
    const all = await get(changes);
    expect((await get(`${changes}?cursor=${b64('-62167219200000000:clob')}`)).body).toEqual(all.body);
    expect((await get(`${changes}?cursor=${b64('253402300799999999:clob')}`)).body).toEqual([]);
    const first = await get(`${changes}?limit=1`);
    const next = new URL(/<([^>]+)>/.exec(first.link!)![1]!);
    const second = await get(next.pathname + next.search);
    expect(second.status).toBe(200);
    expect([...first.body, ...second.body]).toEqual(all.body.slice(0, 2));
  });
});

describe('the instants and offsets of the other Link URLs', () => {
  let L: QueryLake;
  let market: string;
  beforeAll(async () => {
    L = await buildQueryLake();
    const list = (await L.get('/v1/markets?limit=50')).body as { id: string; outcome_token_ids?: string[] }[];
    market = list.find((m) => (m.outcome_token_ids ?? []).length > 0)!.id;
  }, 180_000);
  afterAll(async () => {
    await L?.close();
  });

  it('an instant outside years 0000–9999 UTC (by its offset) is a 422 naming it, on every paged list', async () => {
    // Four-digit years that an offset carries into year -1 or 10000: before, the day-paged coverage lists were 500s.
    const outside = ['0000-01-01T00:00:00+00:01', '0000-01-01T00:00:00+23:59', '9999-12-31T23:59:59.999999-00:01', '9999-12-31T23:59:00-23:59'];
    const lists: [string, string][] = [
      [`/v1/trades?market_id=${market}`, 'end'],
      [`/v1/trades?market_id=${market}`, 'start'],
      ['/v1/trades?outcome=0', 'end'],
      [`/v1/orderbook/top_of_book?market_id=${market}`, 'start'],
      [`/v1/orderbook/top_of_book?market_id=${market}`, 'end'],
      [`/v1/trades/ohlcv?market_id=${market}&timeframe=1h`, 'end'],
      [`/v1/trades/ohlcv?market_id=${market}&timeframe=1h`, 'start'],
      [`/v1/markets/${market}/coverage?`, 'start'],
      [`/v1/markets/${market}/coverage?`, 'end'],
      ['/v1/coverage?', 'date'],
      [`/v1/markets/${market}/changes?`, 'from'],
      [`/v1/markets/${market}/changes?`, 'to'],
    ];
    for (const [list, name] of lists) {
      for (const v of outside) {
        const r = await L.get(`${list}&${name}=${encodeURIComponent(v)}`);
        expect(r.status, `${list} ${name}=${v}`).toBe(422);
        expect(named(r.body), `${list} ${name}=${v}`).toContain(name);
      }
      // The same instants written without the offset are inside, and answered (or refused for another reason, not 5xx).
      for (const v of ['0000-01-01T00:00:00Z', '9999-12-31T23:59:59.999999Z']) {
        const r = await L.get(`${list}&${name}=${encodeURIComponent(v)}`);
        expect(r.status, `${list} ${name}=${v}`).toBeLessThan(500);
        if (r.status === 422) expect(named(r.body), `${list} ${name}=${v}`).not.toContain(name);
      }
    }
  });

  it("a market's coverage window at the ends of the range names days the API takes, and its Link is followed", async () => {
    // Before, start=9999-12-31 stepped a year forward into "+010000-12" and linked to it (a 422 when followed).
    const day = /^\d{4}-\d\d-\d\d$/;
    for (const qs of ['start=9999-12-31', 'start=9999-06-01', 'end=0000-01-01', 'end=0000-06-01']) {
      const r = await L.get(`/v1/markets/${market}/coverage?${qs}`);
      expect(r.status, qs).toBe(200);
      for (const d of [r.body.start, r.body.end]) if (d !== null) expect(d, qs).toMatch(day);
      const link = r.headers.get('link');
      if (link !== null) {
        const next = new URL(/<([^>]+)>/.exec(link)![1]!);
        expect((await L.get(next.pathname + next.search)).status, `${qs} → ${next.search}`).toBe(200);
      }
    }
  });

  it('offsets and replay seconds beyond their bounds are a 422 naming them', async () => {
    const cases: [string, string, string[]][] = [
      [`/v1/trades?market_id=${market}`, 'offset', ['-1', '1000001', '9007199254740993', '1.5', 'x']],
      [`/v1/orderbook/top_of_book?market_id=${market}`, 'offset', ['-1', '1000001', '1e400', 'NaN']],
      ['/v1/markets?', 'offset', ['-1', '1000001', 'Infinity']],
      ['/v1/coverage?date=2025-01-01', 'offset', ['-1', '1000001']],
      [`/v1/charts/replay/ticks?symbol=${market}&to=253402300799`, 'from', ['-1', '253402300800', '9223372036854775808', '1.5']],
    ];
    for (const [list, name, values] of cases) {
      for (const v of values) {
        const r = await L.get(`${list}&${name}=${encodeURIComponent(v)}`);
        expect(r.status, `${list} ${name}=${v}`).toBe(422);
        expect(named(r.body), `${list} ${name}=${v}`).toContain(name);
      }
    }
  });
});
