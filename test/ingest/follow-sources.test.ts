import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDBInstance } from '@duckdb/node-api';
import { generate } from '../../sim/generate/index.js';
import { Follower, type FollowCycleReport } from '../../ingest/follow.js';
import { runIngest } from '../../ingest/run.js';
import { createLogger } from '../../src/log.js';
import { currentVersion, versionsDir, type SetName } from '../../src/lake/versions.js';
import { startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { captureText, splitByTime, tokensOf, venueMs } from './capture-util.js';
import { lakeContent } from '../helpers/lake-content.js';

/**
 * `pmlake ingest --follow` over the three inputs of a deployment: capture files (docs/capture-format.md), catalogue
 * poll files (docs/catalogue-format.md) and chain files (docs/chain-format.md), each written here from a generated
 * day as the roles would write them — plain data, no code of the roles or of the ingest. They land beside each
 * other in the same cycles, and the lake equals a one-shot ingest of the same files.
 */

const tmp = tempDir('pmlake-follow-sources-');
const log = createLogger(process.env.FOLLOW_TEST_LOG ?? 'silent');
const THREE_HOURS = 3 * 3_600_000;
const EXCHANGES = new Set(['0x4bfb41d5b3570defd03c39a9a4d8de6bd8b8982e', '0xc5d563a36ae78145c45a50134d48a1215220f80a']);
const EXCHANGE_NAME: Record<string, string> = {
  '0x4bfb41d5b3570defd03c39a9a4d8de6bd8b8982e': 'ctf_v1',
  '0xc5d563a36ae78145c45a50134d48a1215220f80a': 'negrisk_v1',
};

type Fill = Record<string, string | number>;
/** A file to appear, at a venue time (files appear in that order across the three directories). */
type Item = { at: number; dir: 'capture' | 'catalogue' | 'chain'; name: string; text: string };

let db: DuckDBInstance;
let items: Item[] = [];
let makerFills = 0;
let logLines = 0;
/** The market whose tick size the second poll changes, and both values. */
let ticked = { conditionId: '', before: '', after: '' };
let secondPollAt = 0;

const hash = (s: string): string => `0x${crypto.createHash('sha256').update(s).digest('hex')}`;
const stamp = (ms: number): string => new Date(ms).toISOString().replace(/[-:]/g, '').slice(0, 15);

/** Chain files of a chunk of fills: one range [from, to], a block line per block holding logs, then its logs. */
function chainFile(fills: Fill[], from: number): { text: string; to: number } {
  const to = Math.max(...fills.map((f) => Number(f.block_number)));
  const lines: unknown[] = [{ kind: 'chain_range', format: 1, chain_id: 137, from_block: from, to_block: to, confirmations: 32 }];
  const byBlock = new Map<number, Fill[]>();
  for (const f of fills) byBlock.set(Number(f.block_number), [...(byBlock.get(Number(f.block_number)) ?? []), f]);
  for (const [n, logs] of [...byBlock.entries()].sort((a, b) => a[0] - b[0])) {
    lines.push({ kind: 'block', number: n, hash: hash(`block ${n}`), parent_hash: hash(`block ${n - 1}`), timestamp: Number(logs[0]!.block_timestamp) });
    for (const f of logs.sort((a, b) => Number(a.log_index) - Number(b.log_index))) {
      lines.push({
        kind: 'log',
        block_number: n,
        block_hash: hash(`block ${n}`),
        transaction_hash: f.transaction_hash,
        transaction_index: 0,
        log_index: Number(f.log_index),
        address: f.contract,
        exchange: EXCHANGE_NAME[String(f.contract)],
        event: 'OrderFilled',
        args: {
          orderHash: f.order_hash,
          maker: f.maker,
          taker: f.taker,
          makerAssetId: f.maker_asset_id,
          takerAssetId: f.taker_asset_id,
          makerAmountFilled: f.maker_amount_filled,
          takerAmountFilled: f.taker_amount_filled,
          fee: f.fee,
        },
        topics: [hash('OrderFilled'), hash(String(f.order_hash))],
        data: '0x',
      });
      logLines += 1;
    }
  }
  lines.push({ kind: 'end', logs: fills.length });
  return { text: lines.map((l) => JSON.stringify(l)).join('\n') + '\n', to };
}

/** A poll file holding one Gamma /markets page. */
function pollFile(at: number, markets: unknown[]): string {
  const iso = new Date(at).toISOString();
  const url = 'http://gamma.test/markets/keyset?limit=100';
  return (
    [
      { kind: 'catalogue_poll', format: 1, poller: 'p1', started_at: iso, endpoints: { gamma_markets: 'http://gamma.test/markets' } },
      { kind: 'page', endpoint: 'gamma_markets', url, received_at: iso, status: 200, body: JSON.stringify({ markets }) },
      { kind: 'end', finished_at: iso, complete: { gamma_markets: true }, pages: 1 },
    ]
      .map((l) => JSON.stringify(l))
      .join('\n') + '\n'
  );
}

async function rows(sql: string): Promise<Record<string, unknown>[]> {
  const conn = await db.connect();
  try {
    return (await conn.runAndReadAll(sql)).getRowObjectsJS();
  } finally {
    conn.closeSync();
  }
}

beforeAll(async () => {
  db = await DuckDBInstance.create(':memory:', { threads: '1' });
  const gen = path.join(tmp.dir, 'gen');
  const g = await generate({ markets: 3, days: 1, seed: 25, start: '2025-10-13', out: gen, workers: 0, rate: 0.4 });
  const day0 = Date.parse('2025-10-13T00:00:00Z');

  const tape = splitByTime(path.join(gen, g.files.ws[0]!), THREE_HOURS, (o) => Number(o.timestamp ?? 0), 'ws');
  const assets = [...new Set(tape.flatMap((c) => c.lines.flatMap(tokensOf)))];
  let recv = 0;
  for (const c of tape) {
    const body = c.lines.map((frame) => ({ recv_ms: (recv = Math.max(recv, venueMs(frame))), conn: 0, frame }));
    items.push({
      at: c.at + THREE_HOURS,
      dir: 'capture',
      name: `market-${stamp(c.at)}Z-rec-0000abcd.capture.jsonl`,
      text: captureText('rec', `s-${stamp(c.at)}`, [{ conn: 0, assets }], body, c.at),
    });
  }

  const fills = fs
    .readFileSync(path.join(gen, g.files.fills[0]!), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Fill);
  makerFills = fills.filter((f) => !EXCHANGES.has(String(f.taker))).length;
  expect(makerFills).toBe(g.counts.trades);
  const byChunk = new Map<number, Fill[]>();
  for (const f of fills) {
    const at = Math.floor((Number(f.block_timestamp) * 1000) / THREE_HOURS) * THREE_HOURS;
    byChunk.set(at, [...(byChunk.get(at) ?? []), f]);
  }
  let from = Math.min(...fills.map((f) => Number(f.block_number)));
  for (const [at, list] of [...byChunk.entries()].sort((a, b) => a[0] - b[0])) {
    const { text, to } = chainFile(list, from);
    items.push({ at: at + THREE_HOURS, dir: 'chain', name: `chain-${String(from).padStart(10, '0')}-${String(to).padStart(10, '0')}.jsonl`, text });
    from = to + 1;
  }

  // Two polls: the catalogue as generated at the start of the day, and at noon with one market's tick size changed.
  const markets = JSON.parse(fs.readFileSync(path.join(gen, g.files.markets), 'utf8')) as Record<string, unknown>[];
  const first = markets.find((m) => typeof m.conditionId === 'string' && m.orderPriceMinTickSize !== undefined)!;
  ticked = { conditionId: String(first.conditionId).toLowerCase(), before: String(first.orderPriceMinTickSize), after: '' };
  ticked.after = Number(ticked.before) === 0.01 ? '0.001' : '0.01';
  secondPollAt = day0 + 12 * 3_600_000 + 1000;
  // A poll file appears with the period it ends in, beside that period's capture and chain files.
  const appears = (ms: number): number => Math.ceil(ms / THREE_HOURS) * THREE_HOURS;
  items.push({ at: appears(day0 + 1000), dir: 'catalogue', name: `catalogue-${stamp(day0 + 1000)}Z-p1.jsonl`, text: pollFile(day0 + 1000, markets) });
  const changed = markets.map((m) => (m === first ? { ...m, orderPriceMinTickSize: Number(ticked.after) } : m));
  items.push({ at: appears(secondPollAt), dir: 'catalogue', name: `catalogue-${stamp(secondPollAt)}Z-p1.jsonl`, text: pollFile(secondPollAt, changed) });
  items = items.sort((a, b) => a.at - b.at || a.dir.localeCompare(b.dir));
});

afterAll(() => {
  db?.closeSync();
  tmp.cleanup();
});

describe('pmlake ingest --follow over the recorder, the catalogue poller and the chain indexer', () => {
  it('lands the three inputs beside each other in the same cycles, equal to a one-shot ingest, each in /v1/status', async () => {
    const root = path.join(tmp.dir, 'in');
    const dirs = { capture: path.join(root, 'capture'), catalogue: path.join(root, 'catalogue'), chain: path.join(root, 'chain') };
    for (const d of Object.values(dirs)) fs.mkdirSync(d, { recursive: true });
    const lake = path.join(tmp.dir, 'lake');
    const cycles: FollowCycleReport[] = [];
    const follower = await Follower.start({
      dirs: Object.values(dirs),
      lakeDir: lake,
      cycleSeconds: 0.5,
      log,
      threads: 1,
      memoryLimit: '1GB',
      onCycle: (r) => cycles.push(r),
    });
    try {
      // Files appear a venue period at a time: whatever the three roles closed in the same period, together.
      const periods = [...new Set(items.map((i) => i.at))];
      let appeared = 0;
      for (const at of periods) {
        for (const it of items.filter((i) => i.at === at)) fs.writeFileSync(path.join(dirs[it.dir], it.name), it.text);
        appeared += items.filter((i) => i.at === at).length;
        const deadline = Date.now() + 60_000;
        while (follower.stats().filesLanded < appeared) {
          if (Date.now() > deadline) throw new Error(`timed out waiting for ${appeared} files (${follower.stats().filesLanded} landed)`);
          await new Promise((r) => setTimeout(r, 25));
        }
      }
    } finally {
      await follower.stop();
    }
    expect(follower.stats().failedCycles).toBe(0);
    expect(follower.stats().filesLanded).toBe(items.length);
    expect(cycles.reduce((n, c) => n + c.issues, 0)).toBe(0);

    // One version held files of all three inputs: they land in the same cycle, not one input per cycle.
    const history = fs
      .readFileSync(path.join(versionsDir(lake), 'history.jsonl'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { version: number; kind: string; change: { inputs: number } });
    expect(
      history.some((h) => h.kind === 'ingest' && h.change.inputs >= 3),
      JSON.stringify(history.map((h) => [h.kind, h.change.inputs])),
    ).toBe(true);
    expect(cycles.some((c) => c.files >= 3)).toBe(true);

    // Equal to a one-shot ingest of the same three directories, data set by data set.
    const oneShot = path.join(tmp.dir, 'oneshot');
    const report = await runIngest(Object.values(dirs), { lakeDir: oneShot, threads: 1, memoryLimit: '1GB' });
    expect(report.issues).toEqual([]);
    const followed = await lakeContent(db, currentVersion(lake));
    expect(followed).toEqual(await lakeContent(db, currentVersion(oneShot)));

    // What landed, against the inputs written above.
    const v = currentVersion(lake);
    const list = (name: SetName): string =>
      `[${v
        .files(name)
        .map((f) => `'${f}'`)
        .join(', ')}]`;
    expect(Number((await rows(`SELECT count(*) AS n FROM read_parquet(${list('chain_logs')})`))[0]!.n)).toBe(logLines);
    expect(Number((await rows(`SELECT count(*) AS n FROM read_parquet(${list('trades')})`))[0]!.n)).toBe(makerFills);
    const defs = await rows(
      `SELECT tick_size::VARCHAR AS tick, epoch_ms(valid_from) AS at FROM read_parquet(${list('market_definitions')})
       WHERE condition_id = '${ticked.conditionId}' AND source = 'gamma' ORDER BY valid_from`,
    );
    expect(defs.map((d) => Number(d.tick))).toEqual([Number(ticked.before), Number(ticked.after)]);
    expect(Number(defs[1]!.at)).toBe(secondPollAt);

    // /v1/status: the three sources with their newest landed times.
    const srv = await startTestServer(testConfig({ PMLAKE_LAKE: lake, PMLAKE_STATE: path.join(tmp.dir, 'state') }));
    try {
      const st = (await (await fetch(`${srv.url}/v1/status`)).json()) as { sources: { name: string; newest_landed_at: string | null }[] };
      expect(st.sources.map((s) => s.name)).toEqual(['tape', 'catalogue', 'chain']);
      const at = Object.fromEntries(st.sources.map((s) => [s.name, Date.parse(s.newest_landed_at ?? '')]));
      expect(at.catalogue).toBe(secondPollAt);
      const newestBlock = Math.max(
        ...items
          .filter((i) => i.dir === 'chain')
          .flatMap((i) =>
            i.text
              .split('\n')
              .filter((l) => l.includes('"kind":"block"'))
              .map((l) => Number((JSON.parse(l) as { timestamp: number }).timestamp) * 1000),
          ),
      );
      expect(at.chain).toBe(newestBlock);
    } finally {
      await srv.close();
    }
  });
});
