import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { files } from '../helpers/lake-files.js';
import { entriesOf, tapeMessages } from './integrity-oracle.js';
import { lakeRows, tempDir } from './oracle.js';

/**
 * Silences and disconnects (lake/README.md "Tape integrity") do not depend on where ingest cuts batches. A
 * hand-made four-hour tape in four files — a busy token, tokens with silences, a quiet token, a token that starts
 * after a capture outage — where the file cuts fall inside a token's silence and inside the outage, is ingested
 * in one batch, in one batch per file, in batches cut inside files (small tape chunks), and file by file in
 * separate runs: the incidents must be the same rows every time, and the silence and disconnect rows must be
 * those of an independent reading of the rule over the written files.
 */
const tmp = tempDir('pmlake-gaps-batches-');
afterAll(() => tmp.cleanup());

const T0 = Date.parse('2025-09-10T00:00:00Z');
const MIN = 60_000;
/** File cuts (minutes from T0): inside B's first silence, inside the capture outage, and one more. */
const CUTS = [80, 160, 210];
/** The capture records nothing in [150, 172) minutes. */
const OUTAGE = [150, 172];

/** mulberry32: the tape is the same on every run. */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Line = { ms: number; text: string };

/** Receive times of one token: every `lo`–`hi` seconds from `start` to `end` minutes, none inside `quiet` windows. */
function times(r: () => number, lo: number, hi: number, start: number, end: number, quiet: [number, number][]): number[] {
  const out: number[] = [];
  for (let t = T0 + start * MIN; t < T0 + end * MIN; t += Math.round((lo + r() * (hi - lo)) * 1000)) {
    if (![...quiet, OUTAGE as [number, number]].some(([a, b]) => t >= T0 + a * MIN && t < T0 + b * MIN)) out.push(t);
  }
  return out;
}

function tape(): Line[] {
  const r = rng(7);
  const tokens: { id: string; market: string; at: number[] }[] = [
    // Busy all along.
    { id: '1001', market: `0x${'aa'.repeat(32)}`, at: times(r, 5, 11, 0, 240, []) },
    // Silent 25 minutes across the first cut (a silence), and 40 minutes around the outage (18 of them alive: one too).
    {
      id: '1002',
      market: `0x${'aa'.repeat(32)}`,
      at: times(r, 30, 60, 0, 240, [
        [62, 87],
        [140, 180],
      ]),
    },
    // Silent 30 minutes around the outage, only 8 of them alive: a disconnect, no silence.
    { id: '2001', market: `0x${'bb'.repeat(32)}`, at: times(r, 20, 40, 0, 240, [[145, 175]]) },
    // Quiet: one message every half hour is its normal pace.
    { id: '2002', market: `0x${'bb'.repeat(32)}`, at: times(r, 1500, 2100, 0, 240, []) },
    // Starts after the outage.
    { id: '3001', market: `0x${'cc'.repeat(32)}`, at: times(r, 15, 45, 180, 240, []) },
  ];
  return linesOf(tokens);
}

function linesOf(tokens: { id: string; market: string; at: number[] }[]): Line[] {
  const lines: Line[] = [];
  for (const tok of tokens) {
    tok.at.forEach((ms, i) => {
      const msg =
        i === 0
          ? {
              event_type: 'book',
              asset_id: tok.id,
              market: tok.market,
              bids: [{ price: '0.4', size: '100' }],
              asks: [{ price: '0.6', size: '100' }],
              timestamp: String(ms),
              hash: `h${tok.id}-${i}`,
            }
          : {
              asset_id: tok.id,
              changes: [{ price: '0.41', side: 'BUY', size: String(10 + (i % 50)) }],
              event_type: 'price_change',
              hash: `h${tok.id}-${i}`,
              market: tok.market,
              timestamp: String(ms),
            };
      lines.push({ ms, text: JSON.stringify(msg) });
    });
  }
  return lines.sort((a, b) => a.ms - b.ms);
}

let inputs: string[];

beforeAll(() => {
  const lines = tape();
  const bounds = [T0, ...CUTS.map((c) => T0 + c * MIN), Infinity];
  inputs = bounds.slice(0, -1).map((from, i) => {
    const file = path.join(tmp.dir, `tape-${i}.jsonl`);
    fs.writeFileSync(
      file,
      `${lines
        .filter((l) => l.ms >= from && l.ms < bounds[i + 1]!)
        .map((l) => `${l.text}\n`)
        .join('')}`,
    );
    return file;
  });
});

type Row = { asset_id: string; kind: string; from_ms: number; to_ms: number; seq: string; detail: string };

async function incidents(lake: string): Promise<Row[]> {
  return (await lakeRows(
    `SELECT asset_id, kind, epoch_ms(from_ts)::DOUBLE AS from_ms, epoch_ms(to_ts)::DOUBLE AS to_ms, seq::VARCHAR AS seq, detail
     FROM read_parquet(${files(lake, 'incidents')}) ORDER BY ALL`,
  )) as Row[];
}

/** The rule read from lake/README.md, over every book/price_change of the files in arrival order. */
function expected(files: string[] = inputs): Row[] {
  const msgs = files.flatMap((f) => tapeMessages(f)).sort((a, b) => (a.seq < b.seq ? -1 : a.seq > b.seq ? 1 : 0));
  const perToken = new Map<string, { ms: number[]; seq: bigint[] }>();
  const capture: number[] = [];
  for (const { msg, recvMs, seq } of msgs) {
    if (msg.event_type !== 'book' && msg.event_type !== 'price_change') continue;
    const toks = msg.event_type === 'book' ? [String(msg.asset_id)] : [...new Set(entriesOf(msg).map((e) => e.asset_id))];
    if (capture[capture.length - 1] !== recvMs) capture.push(recvMs);
    for (const t of toks) {
      const s = perToken.get(t) ?? { ms: [], seq: [] };
      perToken.set(t, s);
      // Distinct receive times; the seq of the first message at each.
      if (s.ms[s.ms.length - 1] !== recvMs) {
        s.ms.push(recvMs);
        s.seq.push(seq);
      }
    }
  }
  // The typical spacing: the median of the spacings before, counted in quarter-octave buckets (bucket k holds
  // spacings of 2^(k/4) ms up to the next), halved once they count 1024, read as its bucket's middle; judged
  // from 16 spacings on.
  type Hist = { counts: number[]; n: number };
  const newHist = (): Hist => ({ counts: [], n: 0 });
  const typical = (h: Hist): number => {
    let c = 0;
    for (let k = 0; k < h.counts.length; k += 1) {
      c += h.counts[k] ?? 0;
      if (2 * c >= h.n) return 2 ** ((k + 0.5) / 4);
    }
    return 0;
  };
  const count = (h: Hist, gap: number): void => {
    const k = Math.floor(4 * Math.log2(gap));
    h.counts[k] = (h.counts[k] ?? 0) + 1;
    h.n += 1;
    if (h.n < 1024) return;
    h.counts = h.counts.map((c) => Math.floor((c ?? 0) / 2));
    h.n = h.counts.reduce((a, c) => a + (c ?? 0), 0);
  };
  const downs: { a: number; b: number; typ: number }[] = [];
  const ch = newHist();
  for (let i = 1; i < capture.length; i += 1) {
    const gap = capture[i]! - capture[i - 1]!;
    const typ = typical(ch);
    if (ch.n >= 16 && gap > Math.max(120_000, 40 * typ)) downs.push({ a: capture[i - 1]!, b: capture[i]!, typ });
    count(ch, gap);
  }
  const detail = (ms: number, typ: number): string => JSON.stringify({ seconds: ms / 1000, typical_seconds: Math.round(typ) / 1000 });
  const out: Row[] = [];
  for (const [tok, { ms, seq }] of perToken) {
    const h = newHist();
    for (let i = 1; i < ms.length; i += 1) {
      const [p, t] = [ms[i - 1]!, ms[i]!];
      // Silent more than 30 days: the token starts afresh, that gap not judged.
      if (t - p > 30 * 86_400_000) {
        h.counts = [];
        h.n = 0;
        continue;
      }
      let down = 0;
      for (const d of downs) {
        if (d.a < p || d.b > t) continue;
        out.push({ asset_id: tok, kind: 'disconnect', from_ms: d.a, to_ms: d.b, seq: String(seq[i]), detail: detail(d.b - d.a, d.typ) });
        down += d.b - d.a;
      }
      const typ = typical(h);
      if (h.n >= 16 && t - p - down > Math.max(600_000, 20 * typ)) {
        out.push({ asset_id: tok, kind: 'silence', from_ms: p, to_ms: t, seq: String(seq[i]), detail: detail(t - p, typ) });
      }
      count(h, t - p);
    }
  }
  return out;
}

const gapRows = (rows: Row[]): Row[] =>
  rows
    .filter((r) => r.kind === 'silence' || r.kind === 'disconnect')
    .map((r) => ({ ...r, detail: JSON.stringify(JSON.parse(r.detail)) }))
    .sort((a, b) => `${a.asset_id}|${a.kind}|${a.seq}|${a.from_ms}`.localeCompare(`${b.asset_id}|${b.kind}|${b.seq}|${b.from_ms}`));

describe('silences and disconnects across batch cuts', () => {
  let whole: Row[];

  beforeAll(async () => {
    const lake = path.join(tmp.dir, 'whole');
    const r = await runIngest(inputs, { lakeDir: lake, derived: false });
    expect(r.failed).toBe(0);
    expect(r.batches).toBe(1);
    whole = await incidents(lake);
  }, 60_000);

  it('one batch finds the rule over the whole tape', () => {
    const want = gapRows(expected());
    // The tape holds what it was made for: both kinds, B's two silences, the outage seen by four tokens.
    expect(want.filter((r) => r.kind === 'silence').map((r) => r.asset_id)).toEqual(['1002', '1002']);
    expect(want.filter((r) => r.kind === 'disconnect').map((r) => r.asset_id)).toEqual(['1001', '1002', '2001', '2002']);
    expect(gapRows(whole)).toEqual(want);
  });

  it('one batch per file lands the same incidents', async () => {
    const lake = path.join(tmp.dir, 'per-file');
    const r = await runIngest(inputs, { lakeDir: lake, derived: false, batchRows: 1 });
    expect(r.batches).toBe(inputs.length);
    expect(await incidents(lake)).toEqual(whole);
  }, 60_000);

  it('batches cut inside files land the same incidents', async () => {
    const lake = path.join(tmp.dir, 'chunks');
    const before = process.env.PMLAKE_TAPE_CHUNK_BYTES;
    process.env.PMLAKE_TAPE_CHUNK_BYTES = String(40 * 1024);
    try {
      const r = await runIngest(inputs, { lakeDir: lake, derived: false, batchRows: 1 });
      expect(r.batches).toBeGreaterThan(inputs.length * 2);
    } finally {
      if (before === undefined) delete process.env.PMLAKE_TAPE_CHUNK_BYTES;
      else process.env.PMLAKE_TAPE_CHUNK_BYTES = before;
    }
    expect(await incidents(lake)).toEqual(whole);
  }, 60_000);

  it('separate runs, file by file, land the same incidents; a re-run adds nothing', async () => {
    const lake = path.join(tmp.dir, 'runs');
    for (const f of inputs) expect((await runIngest([f], { lakeDir: lake, derived: false })).failed).toBe(0);
    expect(await incidents(lake)).toEqual(whole);
    await runIngest(inputs, { lakeDir: lake, derived: false });
    expect(await incidents(lake)).toEqual(whole);
  }, 60_000);
});

describe('a token back after more than 30 days starts afresh, and the state forgets what no gap can use', () => {
  const DAY = 1440;
  // Hour-long windows on days 0, 20 and 45 (minutes from T0), each its own file.
  const windows = [0, 20, 45].map((d) => [d * DAY + 300, d * DAY + 360] as const);
  let files2: string[];

  beforeAll(() => {
    const r = rng(11);
    const on = (lo: number, hi: number, days: number[]): number[] => windows.flatMap(([a, b], i) => (days.includes(i) ? times(r, lo, hi, a, b, []) : []));
    const lines = linesOf([
      { id: '4001', market: `0x${'dd'.repeat(32)}`, at: on(5, 11, [0, 1, 2]) },
      { id: '4002', market: `0x${'dd'.repeat(32)}`, at: on(30, 60, [0, 1, 2]) },
      // Back after 45 days: no judgement of that gap, nor of the outages in it.
      { id: '4003', market: `0x${'ee'.repeat(32)}`, at: on(20, 40, [0, 2]) },
      // Never back: dropped from the state once the capture is 30 days past it.
      { id: '4004', market: `0x${'ee'.repeat(32)}`, at: on(20, 40, [0]) },
    ]);
    files2 = windows.map(([a, b], i) => {
      const file = path.join(tmp.dir, `long-${i}.jsonl`);
      fs.writeFileSync(
        file,
        lines
          .filter((l) => l.ms >= T0 + a * MIN && l.ms < T0 + b * MIN)
          .map((l) => `${l.text}\n`)
          .join(''),
      );
      return file;
    });
  });

  const state = (lake: string): Promise<Record<string, unknown>[]> =>
    lakeRows(`SELECT asset_id, last_ms, spacing_hist, outage_from_ms, outage_to_ms FROM read_parquet(${files(lake, 'integrity/tape_gaps')}) ORDER BY ALL`);

  it('one batch and one batch per file land the same incidents and state', async () => {
    const [one, each] = [path.join(tmp.dir, 'long-one'), path.join(tmp.dir, 'long-each')];
    expect((await runIngest(files2, { lakeDir: one, derived: false })).batches).toBe(1);
    expect((await runIngest(files2, { lakeDir: each, derived: false, batchRows: 1 })).batches).toBe(3);
    const want = gapRows(expected(files2));
    // The two capture outages (20 and 25 days) for the two tokens that lived through each; 4003 none.
    expect(want.map((r) => `${r.asset_id} ${r.kind}`)).toEqual(['4001 disconnect', '4001 disconnect', '4002 disconnect', '4002 disconnect']);
    expect(gapRows(await incidents(one))).toEqual(want);
    expect(await incidents(each)).toEqual(await incidents(one));
    const st = await state(each);
    expect(st).toEqual(await state(one));
    expect(st.map((r) => r.asset_id)).toEqual(['4001', '4002', '4003', null, null]);
    // The day-0 outage is older than 30 days before the capture's last receive time: gone; the later one stays.
    expect(st.filter((r) => r.outage_from_ms !== null).map((r) => Number(r.outage_from_ms))).toEqual([
      Math.max(...tapeMessages(files2[1]!).map((m) => m.recvMs)),
    ]);
  }, 60_000);
});
