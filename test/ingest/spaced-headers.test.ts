import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultHandlers, runIngest, type IngestReport } from '../../ingest/run.js';
import { headerLine, MAX_HEADER_LINE, pickHandler } from '../../ingest/detect.js';
import { cataloguePollHandler } from '../../ingest/catalogue/polls.js';
import { chainFilesHandler } from '../../ingest/chain/files.js';
import { captureHandler } from '../../ingest/ws/capture.js';
import { createTestKey, startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { gid, POLL_STARTS, pollText, scenarioPoll, writePoll, type Page } from '../helpers/catalogue-polls.js';
import { respaced } from '../helpers/spaced-json.js';
import { block, chainFile, expectedChainTrades, hex, match, V1_CTF, type Line } from './chain-util.js';
import { captureText, rawRows, writeFile } from './capture-util.js';
import type { RunningServer } from '../../src/server.js';

/**
 * Hardening issue, item 9 (c): a catalogue poll file written with spaces in its JSON was "format not recognised",
 * its detector matching the literal text `{"kind":"catalogue_poll"`; the chain files' detector had the same
 * literal prefix. The service's own formats are now recognised by their first line read as JSON: poll, chain and
 * (renamed) capture files whose every line is spaced land as their compact twins do, checked against the input
 * over a real server and the lake's files.
 */
const tmp = tempDir('pmlake-spaced-');
const lake = path.join(tmp.dir, 'lake');
const polls = [0, 1, 2].map(scenarioPoll);

// A chain file: one V1 match in block 100, the range ending at block 102.
const T0 = 1777420800; // 2026-04-29T00:00:00Z
const CHAIN_TOKEN = `5${'7'.repeat(76)}`;
const b100 = block(100, T0);
const b102 = block(102, T0 + 4);
const CHAIN_LINES: Line[] = [
  b100,
  ...match(b100, 0, hex('tx-spaced'), V1_CTF, CHAIN_TOKEN, true, hex('taker', 20), [
    { maker: hex('maker-a', 20), makerAmount: 5_200_000n, takerAmount: 10_000_000n },
    { maker: hex('maker-b', 20), makerAmount: 1_000_000n, takerAmount: 3_000_000n, fee: 10_000n },
  ]),
  b102,
];

// A capture file under a name that does not say so: only its start line can.
const ASSET = `9${'1'.repeat(70)}`;
const CAPTURE_T0 = Date.parse('2026-05-01T09:00:00Z');
const FRAMES = [
  {
    recv_ms: CAPTURE_T0 + 10,
    conn: 0,
    frame: JSON.stringify([
      {
        event_type: 'book',
        asset_id: ASSET,
        market: `0x${'ab'.repeat(32)}`,
        bids: [{ price: '0.4', size: '10' }],
        asks: [{ price: '0.6', size: '5' }],
        timestamp: String(CAPTURE_T0),
        hash: '0x1',
      },
    ]),
  },
  {
    recv_ms: CAPTURE_T0 + 20,
    conn: 0,
    frame: JSON.stringify({
      event_type: 'last_trade_price',
      asset_id: ASSET,
      market: `0x${'ab'.repeat(32)}`,
      price: '0.5',
      size: '1',
      side: 'BUY',
      timestamp: String(CAPTURE_T0 + 15),
    }),
  },
];

let report: IngestReport;
let srv: RunningServer;
let key: string;
const files = { polls: [] as string[], chain: '', capture: '' };

beforeAll(async () => {
  const input = path.join(tmp.dir, 'input');
  files.polls = polls.map((p, i) => writePoll(path.join(input, 'polls'), POLL_STARTS[i]!, p, { spaced: true }));
  files.chain = path.join(input, 'chain-0000000100-0000000102.jsonl');
  fs.writeFileSync(files.chain, respaced(chainFile(100, 102, CHAIN_LINES)));
  files.capture = writeFile(
    path.join(input, 'tape'),
    'recorded.jsonl',
    respaced(captureText('rec', 'sess-1', [{ conn: 0, assets: [ASSET] }], FRAMES, CAPTURE_T0)),
  );
  report = await runIngest([input], { lakeDir: lake });
  srv = await startTestServer(testConfig({ PMLAKE_LAKE: lake, PMLAKE_STATE: path.join(tmp.dir, 'state') }));
  key = await createTestKey(srv);
}, 120_000);
afterAll(async () => {
  await srv?.close();
  tmp.cleanup();
});

const get = async (p: string) => {
  const r = await fetch(`${srv.url}${p}`, { headers: { 'X-API-Key': key } });
  return { status: r.status, body: (await r.json()) as any };
};

describe('own formats written with spaces', () => {
  it('the inputs are spaced, and every one of them was recognised and landed', () => {
    for (const f of [...files.polls, files.chain, files.capture]) expect(fs.readFileSync(f, 'utf8')).toMatch(/^\{ "[a-z_]+": /);
    expect(report.issues.filter((i) => /not recognised/.test(i.message))).toEqual([]);
    expect(report.failed).toBe(0);
    expect(report.ingested).toBe(files.polls.length + 2);
  });

  it("a spaced catalogue poll's markets are in the catalogue, as its records say", async () => {
    // The input's Gamma records, the last poll's copy of each (M6 inside its event).
    const records = new Map<string, Record<string, unknown>>();
    for (const p of polls) {
      for (const l of p.filter((x): x is Page => 'body' in x && x.endpoint !== 'clob_markets')) {
        const body = JSON.parse(l.body) as { markets?: Record<string, unknown>[]; events?: { markets: Record<string, unknown>[] }[] };
        for (const m of [...(body.markets ?? []), ...(body.events ?? []).flatMap((e) => e.markets)]) records.set(String(m.id), m);
      }
    }
    expect([...records.keys()].sort()).toEqual([1, 2, 3, 4, 5, 6].map(gid).sort());
    const list = await get('/v1/markets?limit=100');
    expect(list.status).toBe(200);
    // Besides the placeholder markets of the tokens the chain file and the capture name, which no poll lists.
    const polled = (list.body as { id: string; outcome_token_ids?: string[] }[]).filter(
      (m) => !(m.outcome_token_ids ?? []).some((t) => t === CHAIN_TOKEN || t === ASSET),
    );
    expect(list.body.length - polled.length).toBe(2);
    expect(polled.map((m) => String(m.id)).sort()).toEqual([...records.keys()].sort());
    for (const [id, rec] of records) {
      const m = (await get(`/v1/markets/${id}`)).body;
      expect([m.question, m.condition_id, m.outcomes], id).toEqual([rec.question, rec.conditionId, JSON.parse(String(rec.outcomes))]);
      if (rec.clobTokenIds !== undefined) expect(m.outcome_token_ids, id).toEqual(JSON.parse(String(rec.clobTokenIds)));
    }
    // The point-in-time rows landed too: M1's tick size moved at poll 2, seen by both sources.
    const changes = (await get(`/v1/markets/${gid(1)}/changes?from=2026-05-01T10:01:00Z`)).body;
    expect(changes.map((c: any) => [c.source, c.changes])).toEqual([
      ['gamma', { tick_size: { from: 0.01, to: 0.001 } }],
      ['clob', { tick_size: { from: 0.01, to: 0.001 } }],
    ]);
  });

  it("a spaced chain file's fills are the trades", async () => {
    const want = expectedChainTrades(CHAIN_LINES).map((t) => [t.id, t.token_id, t.side, Number(t.price) / 1e6, Number(t.size) / 1e6]);
    expect(want).toHaveLength(2);
    const got = (await get('/v1/trades?limit=100')).body as { id: string; market_id: string; side: string; price: number; size: number }[];
    expect(got.map((t) => [t.id, t.market_id, t.side, t.price, t.size]).sort()).toEqual(want.sort());
  });

  it("a spaced, renamed capture file's frames are the raw tape", async () => {
    expect(await rawRows(lake)).toEqual(FRAMES.map((f) => [f.recv_ms, f.frame]));
  });
});

describe('detection by the first line, as JSON', () => {
  const cases = [
    { handler: cataloguePollHandler, text: pollText(POLL_STARTS[0]!, polls[0]!) },
    { handler: chainFilesHandler, text: chainFile(100, 102, CHAIN_LINES) },
    { handler: captureHandler, text: captureText('rec', 'sess-1', [{ conn: 0, assets: [ASSET] }], FRAMES, CAPTURE_T0) },
  ];

  it('each own format is recognised compact and spaced, under a name that says nothing', () => {
    for (const { handler, text } of cases) {
      for (const head of [text, respaced(text), respaced(text).replace(/^\{/, '  {'), respaced(text).replace('\n', '\r\n')]) {
        expect(pickHandler(defaultHandlers, '/in/some-file.jsonl', head)?.name, `${handler.name}: ${head.slice(0, 40)}`).toBe(handler.name);
      }
    }
  });

  it('only the first line counts, only as a JSON object, and only up to a bound', () => {
    const header = '{"kind":"catalogue_poll","format":1}';
    expect(headerLine(`${header}\n{"kind":"page"}`)).toEqual({ kind: 'catalogue_poll', format: 1 });
    expect(headerLine(header)).toEqual({ kind: 'catalogue_poll', format: 1 }); // the head is the whole file
    expect(headerLine(`{"x":1}\n${header}`)?.kind).toBeUndefined(); // a later line is not the header
    expect(headerLine(`{"meta":${header}}`)?.kind).toBeUndefined(); // nested is not the header
    expect(headerLine(`${header.slice(0, -1)}\n}`)).toBeNull(); // not JSON on its own line
    expect(headerLine(`[${header}]`)).toBeNull();
    expect(headerLine('"catalogue_poll"')).toBeNull();
    expect(headerLine(`\n \r\n${header}\n`)?.kind).toBe('catalogue_poll'); // blank lines before it, as before
    // A first line longer than any header is not read; just under the bound it is.
    const pad = (n: number) => `{"kind":"catalogue_poll",${' '.repeat(n)}"format":1}`;
    const under = pad(MAX_HEADER_LINE - pad(0).length);
    expect(under.length).toBe(MAX_HEADER_LINE);
    expect(headerLine(`${under}\n`)?.kind).toBe('catalogue_poll');
    expect(headerLine(`${pad(MAX_HEADER_LINE)}\n`)).toBeNull();
    // Other handlers' files are not taken for own formats.
    for (const other of ['{"event_type":"book","asset_id":"1"}\n', '[{"id":"1","question":"q","clobTokenIds":"[]"}]', 'a,b\n1,2\n']) {
      for (const h of [cataloguePollHandler, chainFilesHandler, captureHandler]) expect(h.detect('/in/x.jsonl', other), `${h.name}: ${other}`).toBe(false);
    }
  });
});
