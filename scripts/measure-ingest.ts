/**
 * Measures ingest speed end to end: level updates per second from JSONL tape to Parquet partitions
 * (parse, seq, l2/raw/last_trades staging, book replay, snapshots, top of book, partition writes, catalogue).
 *
 *   npx tsx scripts/measure-ingest.ts [--updates N] [--tokens T] [--keep] [--no-derived] [input-file-or-dir...]
 *   npx tsx scripts/measure-ingest.ts --generate MARKETS [--days D]
 *
 * Without inputs it writes a synthetic websocket day (one message per line: books, old- and new-shape
 * price_change, last_trade_price) with about N level updates, deterministic; with --generate it runs the
 * project's generator (`pmlake generate`, tape + fills + Gamma markets). Either way it ingests into a fresh
 * temporary lake and prints the orchestrator's report figures (level updates/s over the whole run).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { runIngest } from '../ingest/run.js';

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
}

function synth(file: string, updates: number, tokens: number): number {
  let seed = 42;
  const rnd = (): number => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x7fffffff;
  };
  const tok = Array.from({ length: tokens }, (_, i) => `${'7'.repeat(60)}${String(i).padStart(17, '0')}`);
  const market = (i: number): string => `0x${(i >> 1).toString(16).padStart(64, '0')}`;
  const mid = Array.from({ length: tokens }, () => 200 + Math.floor(rnd() * 600));
  const fd = fs.openSync(file, 'w');
  let buf: string[] = [];
  let n = 0;
  let ts = Date.UTC(2026, 0, 5);
  const flush = (): void => {
    fs.writeSync(fd, buf.join(''));
    buf = [];
  };
  const p = (m: number): string => (m / 1000).toFixed(3).replace(/\.?0+$/, '') || '0';
  const hex = (): string =>
    Math.floor(rnd() * 2 ** 52)
      .toString(16)
      .padStart(40, '0');
  for (let t = 0; t < tokens; t += 1) {
    const bids = Array.from({ length: 20 }, (_, j) => `{"price":"${p(mid[t]! - 20 + j)}","size":"${(rnd() * 1000).toFixed(2)}"}`);
    const asks = Array.from({ length: 20 }, (_, j) => `{"price":"${p(mid[t]! + 20 - j)}","size":"${(rnd() * 1000).toFixed(2)}"}`);
    buf.push(`{"market":"${market(t)}","asset_id":"${tok[t]}","timestamp":"${ts}","hash":"${hex()}","bids":[${bids}],"asks":[${asks}],"event_type":"book"}\n`);
    n += 40;
  }
  while (n < updates) {
    ts += 1 + Math.floor(rnd() * 3);
    const t = Math.floor(rnd() * tokens) & ~1;
    const r = rnd();
    if (r < 0.45) {
      const k = 1 + Math.floor(rnd() * 3);
      const ch = Array.from({ length: k }, () => {
        const buy = rnd() < 0.5;
        const price = mid[t]! + (buy ? -1 : 1) * (1 + Math.floor(rnd() * 20));
        const size = rnd() < 0.2 ? '0' : (rnd() * 1000).toFixed(2);
        return `{"price":"${p(price)}","side":"${buy ? 'BUY' : 'SELL'}","size":"${size}"}`;
      });
      buf.push(`{"asset_id":"${tok[t]}","changes":[${ch}],"event_type":"price_change","hash":"${hex()}","market":"${market(t)}","timestamp":"${ts}"}\n`);
      n += k;
    } else if (r < 0.95) {
      const buy = rnd() < 0.5;
      const price = mid[t]! + (buy ? -1 : 1) * (1 + Math.floor(rnd() * 20));
      const size = rnd() < 0.2 ? '0' : (rnd() * 1000).toFixed(2);
      const e = [
        `{"asset_id":"${tok[t]}","price":"${p(price)}","size":"${size}","side":"${buy ? 'BUY' : 'SELL'}","hash":"${hex()}","best_bid":"0.5","best_ask":"0.51"}`,
        `{"asset_id":"${tok[t + 1]}","price":"${p(1000 - price)}","size":"${size}","side":"${buy ? 'SELL' : 'BUY'}","hash":"${hex()}","best_bid":"0.49","best_ask":"0.5"}`,
      ];
      buf.push(`{"market":"${market(t)}","price_changes":[${e}],"timestamp":"${ts}","event_type":"price_change"}\n`);
      n += 2;
    } else {
      buf.push(
        `{"market":"${market(t)}","asset_id":"${tok[t]}","price":"${p(mid[t]!)}","size":"${(rnd() * 100).toFixed(2)}","fee_rate_bps":"0","side":"BUY","timestamp":"${ts}","event_type":"last_trade_price"}\n`,
      );
    }
    if (buf.length >= 20000) flush();
  }
  flush();
  fs.closeSync(fd);
  return n;
}

const FLAGS_WITH_VALUE = new Set(['--updates', '--tokens', '--generate', '--days']);
const inputs = process.argv.slice(2).filter((a, i, all) => !a.startsWith('--') && !FLAGS_WITH_VALUE.has(all[i - 1] ?? ''));
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'pmlake-measure-'));
try {
  let paths = inputs;
  if (process.argv.includes('--generate')) {
    const out = path.join(work, 'gen');
    const args = ['tsx', 'src/cli.ts', 'generate', '--markets', String(arg('generate', 100)), '--days', String(arg('days', 1))];
    execFileSync('npx', [...args, '--seed', '1', '--out', out], { stdio: ['ignore', 'ignore', 'inherit'] });
    paths = [out];
  } else if (paths.length === 0) {
    const file = path.join(work, 'ws', '2026-01-05.jsonl');
    fs.mkdirSync(path.dirname(file));
    const t0 = performance.now();
    const n = synth(file, arg('updates', 3_000_000), arg('tokens', 400));
    process.stderr.write(`wrote ${n} level updates (${(fs.statSync(file).size / 1e6).toFixed(0)} MB) in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
    paths = [file];
  }
  const report = await runIngest(paths, {
    lakeDir: path.join(work, 'lake'),
    progress: true,
    threads: 2,
    derived: !process.argv.includes('--no-derived'),
  });
  const out = {
    files: report.files,
    level_updates: report.counts.level_updates ?? 0,
    messages: report.counts.messages ?? 0,
    seconds: report.seconds,
    level_updates_per_second: report.level_updates_per_second,
    phase_seconds: report.phase_seconds,
    rows_added: report.rows_added,
    issues: report.issues.slice(0, 5),
  };
  process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
} finally {
  if (!process.argv.includes('--keep')) fs.rmSync(work, { recursive: true, force: true });
}
