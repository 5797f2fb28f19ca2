import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runIngest, type IngestReport } from '../../ingest/run.js';
import { currentVersion } from '../../src/lake/versions.js';
import { files } from '../helpers/lake-files.js';
import { startTestServer, testConfig } from '../helpers/server.js';
import { d6, query, tempDir } from './fills-oracle.js';
import {
  block,
  chainFile,
  expectedChainTrades,
  hex,
  log,
  match,
  V1_CTF,
  V1_NEGRISK,
  V2_CTF,
  V2_NEGRISK,
  writeChainFile,
  type Line,
  type Log,
} from './chain-util.js';

const tmp = tempDir('pmlake-chain-');
const T0 = 1777420800; // 2026-04-29T00:00:00Z
const ts = (n: number) => T0 + (n - 100) * 2;
const token = (k: number) => `${k}${'7'.repeat(76)}`;
const addr = (s: string) => hex(s, 20);

// File A: blocks 100..110. A V1 match, a V2 match whose echo names the exchange in checksum case, a V2 neg-risk
// match and a log of a topic no ABI knows.
const b100 = block(100, ts(100));
const b101 = block(101, ts(101));
const b105 = block(105, ts(105));
const b110 = block(110, ts(110));
const TX = { v1: hex('tx-v1'), v2: hex('tx-v2'), v2n: hex('tx-v2n'), v1n: hex('tx-v1n') };
const v1Logs = match(b100, 0, TX.v1, V1_CTF, token(1), true, addr('takerA'), [
  { maker: addr('makerA'), makerAmount: 5_200_000n, takerAmount: 10_000_000n, fee: 10_000n },
  { maker: addr('makerB'), makerAmount: 1_000_000n, takerAmount: 3_000_000n },
]);
const v2Logs = match(
  b101,
  4,
  TX.v2,
  V2_CTF,
  token(2),
  false,
  addr('takerC'),
  [{ maker: addr('makerC'), makerAmount: 20_000_000n, takerAmount: 13_000_000n, fee: 65_000n }],
  '0xE111180000d2663C0091e4f400237545B87B996B',
);
const v2nLogs = match(b105, 0, TX.v2n, V2_NEGRISK, token(3), true, addr('takerD'), [
  { maker: addr('makerD'), makerAmount: 2_000_000n, takerAmount: 3_000_000n },
  { maker: addr('makerE'), makerAmount: 123_456_789n, takerAmount: 987_654_321n, fee: 1n },
]);
const unknown = log(b105, 9, hex('tx-unknown'), V2_CTF, null, null);
const LINES_A: Line[] = [b100, ...v1Logs, b101, ...v2Logs, b105, ...v2nLogs, unknown, b110];
// File B: blocks 111..120, a V1 neg-risk match where the maker sells; block 120 holds no log but ends the range.
const b115 = block(115, ts(115));
const b120 = block(120, ts(120));
const v1nLogs = match(b115, 2, TX.v1n, V1_NEGRISK, token(4), false, addr('takerF'), [
  { maker: addr('makerF'), makerAmount: 7_000_000n, takerAmount: 700_000n },
]);
const LINES_B: Line[] = [b115, ...v1nLogs, b120];

const FILE_A = path.join(tmp.dir, 'chain-0000000100-0000000110.jsonl');
const FILE_B = path.join(tmp.dir, 'chain-0000000111-0000000120.jsonl');
const lake = path.join(tmp.dir, 'lake');
let report: IngestReport;

const logsOf = (lines: Line[]) => lines.filter((l): l is Log => l.kind === 'log');

type TradeRow = Record<string, unknown>;
async function trades(lakeDir: string): Promise<TradeRow[]> {
  return query(`SELECT id, token_id, epoch(ts)::BIGINT AS ts, block_number, log_index, side, price, size, usd_value, fee,
    maker, taker, collateral FROM read_parquet(${files(lakeDir, 'trades')}) ORDER BY id`);
}
function wantTrades(lines: Line[]): TradeRow[] {
  return expectedChainTrades(lines).map((t) => ({
    id: t.id,
    token_id: t.token_id,
    ts: String(t.ts),
    block_number: String(t.block_number),
    log_index: t.log_index,
    side: t.side,
    price: d6(t.price),
    size: d6(t.size),
    usd_value: d6(t.usd_value),
    fee: d6(t.fee),
    maker: t.maker,
    taker: t.taker,
    collateral: t.collateral,
  }));
}
async function chainLogs(lakeDir: string): Promise<Record<string, unknown>[]> {
  const rows = await query(`SELECT block_number, block_hash, epoch(block_ts)::BIGINT AS block_ts, transaction_hash, transaction_index,
    log_index, address, exchange, event, args, topics, data FROM read_parquet(${files(lakeDir, 'chain_logs')}) ORDER BY block_number, log_index`);
  return rows.map((r) => ({ ...r, args: r.args === null ? null : JSON.parse(String(r.args)) }));
}
function wantLogs(lines: Line[]): Record<string, unknown>[] {
  const blockTs = new Map(lines.filter((l) => l.kind === 'block').map((b) => [b.number as number, b.timestamp as number]));
  return logsOf(lines)
    .map((l) => ({
      block_number: String(l.block_number),
      block_hash: l.block_hash,
      block_ts: String(blockTs.get(l.block_number)),
      transaction_hash: l.transaction_hash,
      transaction_index: l.transaction_index,
      log_index: l.log_index,
      address: l.address,
      exchange: l.exchange,
      event: l.event,
      args: l.args,
      topics: l.topics,
      data: l.data,
    }))
    .sort((a, b) => Number(a.block_number) - Number(b.block_number) || a.log_index - b.log_index);
}

beforeAll(async () => {
  writeChainFile(FILE_A, 100, 110, LINES_A);
  writeChainFile(FILE_B, 111, 120, LINES_B);
  report = await runIngest([FILE_A, FILE_B], { lakeDir: lake });
});
afterAll(() => tmp.cleanup());

describe('chain files → chain_logs and trades', () => {
  it('lands every log line once in chain_logs, with its block time and args as JSON text', async () => {
    expect(report.issues).toEqual([]);
    expect(report.ingested).toBe(2);
    const want = wantLogs([...LINES_A, ...LINES_B]);
    expect(want).toHaveLength(logsOf(LINES_A).length + logsOf(LINES_B).length);
    expect(await chainLogs(lake)).toEqual(want);
    expect(report.counts.chain_logs).toBe(want.length);
    const events = want.map((l) => l.event);
    for (const e of ['OrderFilled', 'OrdersMatched', 'FeeCharged', null]) expect(events).toContain(e);
  });

  it('gives exactly the maker fills as trades, priced from V1 asset ids and V2 side × tokenId, V2 in PMCT', async () => {
    const want = wantTrades([...LINES_A, ...LINES_B]);
    // One per maker order: 2 (V1) + 1 (V2) + 2 (V2 neg-risk) + 1 (V1 neg-risk); the four echoes are dropped.
    expect(want).toHaveLength(6);
    expect(await trades(lake)).toEqual(want);
    expect(report.counts.fills).toBe(6);
    expect(report.counts.fills_exchange_taker_dropped).toBe(4);
  });

  it('a V2 fill and its echo give one trade with the right price and size', async () => {
    const rows = (await trades(lake)).filter((r) => String(r.id).startsWith(TX.v2));
    // The maker SELLS (side 1) 20 shares of token 2 for 13 collateral: the taker bought at 0.65.
    expect(rows).toEqual([
      expect.objectContaining({
        id: `${TX.v2}-4`,
        token_id: token(2),
        side: 'buy',
        price: '0.650000',
        size: '20.000000',
        usd_value: '13.000000',
        fee: '0.065000',
        collateral: 'PMCT',
        taker: addr('takerC'),
      }),
    ]);
  });

  it('records the newest block time as the chain source: manifest and /v1/status', async () => {
    const newest = new Date(b120.timestamp * 1000).toISOString();
    expect(currentVersion(lake).manifest.landed_to?.chain).toBe(newest);
    const srv = await startTestServer(testConfig({ PMLAKE_LAKE: lake, PMLAKE_STATE: path.join(tmp.dir, 'state') }));
    try {
      const body = (await (await fetch(`${srv.url}/v1/status`)).json()) as { sources: { name: string; newest_landed_at: string | null }[] };
      expect(body.sources.find((s) => s.name === 'chain')?.newest_landed_at).toBe(newest);
    } finally {
      await srv.close();
    }
  });

  it('re-ingesting the same files adds nothing; the same logs under another name add no row', async () => {
    const again = await runIngest([FILE_A, FILE_B], { lakeDir: lake });
    expect(again.skipped).toBe(2);
    expect(again.versions_published).toEqual([]);
    const copy = path.join(tmp.dir, 'copy.jsonl');
    fs.writeFileSync(copy, `${fs.readFileSync(FILE_A, 'utf8')}\n`);
    const dup = await runIngest([copy], { lakeDir: lake });
    expect(dup.ingested).toBe(1);
    expect(dup.rows_added.chain_logs ?? 0).toBe(0);
    expect(dup.rows_added.trades ?? 0).toBe(0);
    expect(await trades(lake)).toEqual(wantTrades([...LINES_A, ...LINES_B]));
  });

  it('a fill from a fills file and the same fill from a chain file land once (one run or two)', async () => {
    const fill = v1Logs[0]!;
    const v2fill = v2Logs[0]!;
    const json = path.join(tmp.dir, 'fills.jsonl');
    const rec = (l: Log, extra: Record<string, string>) =>
      JSON.stringify({
        event: 'OrderFilled',
        block_number: l.block_number,
        block_timestamp: ts(l.block_number),
        transaction_hash: l.transaction_hash,
        log_index: l.log_index,
        order_hash: l.args!.orderHash,
        maker: l.args!.maker,
        taker: l.args!.taker,
        maker_amount_filled: l.args!.makerAmountFilled,
        taker_amount_filled: l.args!.takerAmountFilled,
        fee: l.args!.fee,
        ...extra,
      });
    // A V1 record as the fills handler has always read it, and V2 ones in their own shape (side, tokenId).
    fs.writeFileSync(
      json,
      [
        rec(fill, { maker_asset_id: fill.args!.makerAssetId!, taker_asset_id: fill.args!.takerAssetId! }),
        rec(v2fill, { side: v2fill.args!.side!, tokenId: v2fill.args!.tokenId!, contract: V2_CTF }),
        // The V2 echo (taker = the V2 exchange) is dropped from a fills file too.
        rec(v2Logs[1]!, { side: v2Logs[1]!.args!.side!, tokenId: v2Logs[1]!.args!.tokenId! }),
      ].join('\n'),
    );
    const want = wantTrades(LINES_A);
    for (const runs of [[[json, FILE_A]], [[json], [FILE_A]], [[FILE_A], [json]]]) {
      const l = path.join(tmp.dir, `lake-overlap-${runs.length}-${path.basename(runs[0]![0]!)}`);
      for (const r of runs) expect((await runIngest(r, { lakeDir: l })).issues).toEqual([]);
      expect(await trades(l)).toEqual(want);
    }
    // The fills file alone gives the same two trades as the chain file.
    const alone = path.join(tmp.dir, 'lake-json-only');
    const r = await runIngest([json], { lakeDir: alone });
    expect(r.counts).toMatchObject({ fills: 2, fills_exchange_taker_dropped: 1 });
    expect(await trades(alone)).toEqual(want.filter((t) => t.id === `${fill.transaction_hash}-0` || t.id === `${TX.v2}-4`));
  });
});

describe('chain files: bad input', () => {
  const bad = path.join(tmp.dir, 'bad');
  fs.mkdirSync(bad, { recursive: true });
  const badLake = path.join(tmp.dir, 'bad-lake');
  const f = (name: string) => path.join(bad, name);
  let r: IngestReport;
  // Torn: the indexer died mid-line; lines 1..5 complete, line 6 cut, no end line.
  const b200 = block(200, ts(200));
  const b205 = block(205, ts(205));
  const torn = match(b200, 0, hex('tx-torn'), V1_CTF, token(5), true, addr('t5'), [{ maker: addr('m5'), makerAmount: 1_000_000n, takerAmount: 2_000_000n }]);
  const tornLines: Line[] = [b200, torn[0]!, torn[1]!, b205, log(b205, 0, hex('tx-torn2'), V1_CTF, null, null)];
  // Missing block line (block 301 has none), a block line inconsistent with its log, a timestamp going backwards.
  const b300 = block(300, ts(300));
  const b301 = block(301, ts(301));
  const b302 = block(302, ts(302));
  const b303 = { ...block(303, ts(299)) }; // earlier than block 302
  const orphan = log(b301, 0, hex('tx-orphan'), V2_CTF, null, null);
  const wrongHash = { ...log(b302, 0, hex('tx-wrong'), V2_CTF, null, null), block_hash: hex('other-302') };
  const okLogs = [
    log(b300, 0, hex('tx-ok'), V2_CTF, null, null),
    log(b302, 1, hex('tx-ok2'), V2_CTF, null, null),
    log(b303, 0, hex('tx-late'), V2_CTF, null, null),
  ];
  const checkLines: Line[] = [b300, okLogs[0]!, orphan, b302, wrongHash, okLogs[1]!, b303, okLogs[2]!];
  // The indexer's error lines, and a malformed line among good ones.
  const b400 = block(400, ts(400));
  const errLog = log(b400, 0, hex('tx-err'), V1_NEGRISK, null, null);
  const errors = [
    { kind: 'error', block_number: 400, message: 'cannot decode log 3', raw: '{"logIndex":"0x3"}' },
    { kind: 'error', block_number: 400, message: 'malformed entry', raw: 'null' },
  ];
  // Format 2: not read at all.
  const b500 = block(500, ts(500));
  const future = log(b500, 0, hex('tx-future'), V1_CTF, null, null);

  beforeAll(async () => {
    const tornText = chainFile(200, 205, tornLines, { end: false }).split('\n');
    tornText[5] = tornText[5]!.slice(0, 40);
    fs.writeFileSync(f('torn.jsonl'), tornText.slice(0, 6).join('\n'));
    writeChainFile(f('checks.jsonl'), 300, 303, checkLines);
    const errText = chainFile(400, 400, [b400, errors[0]!, errLog, errors[1]!]).split('\n');
    errText.splice(3, 0, '{"kind":"log", oops');
    fs.writeFileSync(f('errors.jsonl'), errText.join('\n'));
    fs.writeFileSync(f('future.jsonl'), chainFile(500, 500, [b500, future]).replace('"format":1', '"format":2'));
    r = await runIngest([bad], { lakeDir: badLake });
  });

  const issuesOf = (name: string) => r.issues.filter((i) => i.file === f(name)).sort((a, b) => (a.line ?? 0) - (b.line ?? 0));

  it('a torn file: its complete lines land, the cut line and the missing end are issues', () => {
    const is = issuesOf('torn.jsonl');
    expect(is).toContainEqual(expect.objectContaining({ line: 6, message: expect.stringMatching(/invalid JSON/) }));
    expect(is).toContainEqual(expect.objectContaining({ line: 5, message: expect.stringMatching(/no end line/) }));
    expect(is).toHaveLength(2);
  });

  it('a missing block line, a block hash that disagrees and a timestamp going backwards are issues at their lines', () => {
    const is = issuesOf('checks.jsonl');
    // Lines: 1 header, 2 b300, 3 ok, 4 orphan, 5 b302, 6 wrongHash, 7 ok2, 8 b303, 9 late.
    expect(is).toEqual([
      expect.objectContaining({ line: 4, message: expect.stringMatching(/no block line for block 301/) }),
      expect.objectContaining({ line: 6, message: expect.stringMatching(/block_hash .* differs from block line 5/) }),
      expect.objectContaining({ line: 8, message: expect.stringMatching(/block 303: timestamp .* before/) }),
    ]);
  });

  it('error lines are reported with their message, a malformed line by its number, and the rest lands', () => {
    const is = issuesOf('errors.jsonl');
    // Lines: 1 header, 2 b400, 3 error, 4 malformed, 5 errLog, 6 error, 7 end.
    expect(is).toEqual([
      expect.objectContaining({ line: 3, message: expect.stringMatching(/error line .*block 400.*cannot decode log 3/) }),
      expect.objectContaining({ line: 4, message: expect.stringMatching(/invalid JSON line/) }),
      expect.objectContaining({ line: 6, message: expect.stringMatching(/malformed entry/) }),
    ]);
    expect(r.counts.chain_error_lines).toBe(2);
  });

  it('a file of a later format is not ingested, and nothing of it lands', () => {
    expect(issuesOf('future.jsonl')).toEqual([expect.objectContaining({ line: 1, message: expect.stringMatching(/format 2/) })]);
    expect(r.failed).toBe(1);
    expect(r.ingested).toBe(3);
  });

  it('one version holds exactly the sound logs of every file and the fills among them', async () => {
    expect(r.versions_published).toHaveLength(1);
    const l = badLake;
    const landed = [b200, torn[0]!, torn[1]!, b300, b302, b303, ...okLogs, b400, errLog];
    expect(await chainLogs(l)).toEqual(wantLogs(landed));
    expect(r.counts.chain_logs_not_landed).toBe(2);
    expect(await trades(l)).toEqual(wantTrades([b200, torn[0]!]));
  });
});
