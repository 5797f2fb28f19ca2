import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { files } from '../helpers/lake-files.js';
import { query, tempDir } from './fills-oracle.js';
import { block, chainFile, expectedChainTrades, hex, match, V1_CTF, V2_CTF, type Line } from './chain-util.js';

/**
 * Token ids from outside in on-chain fills (lake/README.md, "What the ingest accepts"): a chain file whose V2 fills
 * name a token id of 100,000 digits or one above 2^256 − 1, and a fills file with a token id of 79 digits, beside good
 * fills. Each bad fill is an issue naming its line; trades, candles and the catalogue hold the good tokens only, the
 * trades exactly those plain TypeScript computes from the good logs.
 */
const tmp = tempDir('pmlake-ident-fills-');
afterAll(() => tmp.cleanup());

const T0 = 1777420800;
const HUGE = '1'.repeat(100_000);
const OVER = (2n ** 256n).toString();
const LONG = '9'.repeat(79);
const GOOD = `1${'7'.repeat(76)}`;
const addr = (s: string) => hex(s, 20);

describe('identifiers in fills', () => {
  it('fills naming a token id that is no uint256 are issues with their line; nothing derived names them', async () => {
    const b = block(100, T0);
    const b2 = block(101, T0 + 2);
    const good = match(b, 0, hex('tx-good'), V1_CTF, GOOD, true, addr('taker'), [{ maker: addr('maker'), makerAmount: 5_000_000n, takerAmount: 10_000_000n }]);
    const huge = match(b2, 0, hex('tx-huge'), V2_CTF, HUGE, false, addr('taker2'), [
      { maker: addr('maker2'), makerAmount: 1_000_000n, takerAmount: 2_000_000n },
    ]);
    const over = match(b2, 4, hex('tx-over'), V2_CTF, OVER, true, addr('taker3'), [
      { maker: addr('maker3'), makerAmount: 1_000_000n, takerAmount: 2_000_000n },
    ]);
    const lines: Line[] = [b, ...good, b2, ...huge, ...over];
    const dir = path.join(tmp.dir, 'in');
    fs.mkdirSync(dir, { recursive: true });
    const chain = path.join(dir, 'chain-0000000100-0000000101.jsonl');
    fs.writeFileSync(chain, chainFile(100, 101, lines));
    const fillsFile = path.join(dir, 'fills.jsonl');
    const fill = (taker_asset_id: string, log_index: number) => ({
      event: 'OrderFilled',
      block_number: 102,
      block_timestamp: T0 + 4,
      transaction_hash: hex('tx-fills'),
      log_index,
      order_hash: hex(`o${log_index}`),
      maker: addr('m4'),
      taker: addr('t4'),
      maker_asset_id: '0',
      taker_asset_id,
      maker_amount_filled: '5000000',
      taker_amount_filled: '10000000',
      fee: '0',
    });
    fs.writeFileSync(fillsFile, [fill(GOOD, 1), fill(LONG, 2)].map((x) => JSON.stringify(x)).join('\n') + '\n');
    const lake = path.join(tmp.dir, 'lake');
    const r = await runIngest([dir], { lakeDir: lake, threads: 1 });
    expect(r.failed).toBe(0);

    // Chain file: line 1 is the header, lines follow in order. Every OrderFilled of a bad token (the maker's and the
    // echo) is an issue at its own line; the fills file's bad line too.
    const badChainLines = lines
      .map((l, i) => ({ l, line: i + 2 }))
      .filter(({ l }) => l.kind === 'log' && l.event === 'OrderFilled' && [HUGE, OVER].includes((l.args as Record<string, string>).tokenId!))
      .map(({ line }) => line);
    expect(badChainLines).toHaveLength(4);
    const named = r.issues.map((i) => ({ file: i.file, line: i.line }));
    for (const line of badChainLines) expect(named).toContainEqual({ file: chain, line });
    expect(named).toContainEqual({ file: fillsFile, line: 2 });
    expect(r.issues).toHaveLength(5);
    for (const i of r.issues) expect(i.message.length).toBeLessThan(400);

    const trades = await query(`SELECT id, token_id FROM read_parquet(${files(lake, 'trades')}, hive_partitioning = false) ORDER BY id`);
    const want = [...expectedChainTrades([b, ...good]).map((t) => ({ id: t.id, token_id: t.token_id })), { id: `${hex('tx-fills')}-1`, token_id: GOOD }];
    expect(trades).toEqual(want.sort((x, y) => x.id.localeCompare(y.id)));
    for (const [dir, col] of [
      ['candles_1m', 'token_id'],
      ['candles_1h', 'token_id'],
      ['catalog/tokens', 'token_id'],
    ] as const) {
      const rows = await query(`SELECT DISTINCT ${col} AS t FROM read_parquet(${files(lake, dir)}, hive_partitioning = false)`);
      expect(
        rows.map((x) => x.t),
        dir,
      ).toEqual([GOOD]);
    }
    const markets = await query(`SELECT outcome_token_ids FROM read_parquet(${files(lake, 'catalog/markets')})`);
    expect(markets).toEqual([{ outcome_token_ids: [GOOD] }]);
    // The chain logs themselves stay as the node gave them (their args are recorded text, like raw's frames).
    const logs = await query(`SELECT count(*) AS n FROM read_parquet(${files(lake, 'chain_logs')}, hive_partitioning = false)`);
    expect(Number(logs[0]!.n)).toBe(lines.filter((l) => l.kind === 'log').length);
  });
});
