import path from 'node:path';
import { Rng } from './prng.js';
import { DAY_MS, isoDate, type Plan } from './plan.js';
import { ChunkWriter } from './format.js';

/**
 * Crypto-options trades in a Deribit-like shape, one JSON object per line, in time order:
 * {"instrument_name":"BTC-26SEP25-110000-C","timestamp":ms,"trade_id":"…","price":0.0123,"iv":55.2,
 *  "index_price":98000.5,"amount":1.5,"direction":"buy"|"sell"}
 * `price` is in units of the underlying (Deribit's convention), `iv` in percent, `amount` in contracts
 * (BTC: multiples of 0.1, ETH: of 1). Instruments expire at 08:00 UTC on dailies, Friday weeklies and
 * last-Friday monthlies; strikes sit on the venue's grid around the index.
 */
const UNDERLYINGS = [
  { sym: 'BTC', price: 112_000, vol: 0.45, step: 1000, farStep: 5000, lot: 0.1, tradesScale: 1 },
  { sym: 'ETH', price: 4_300, vol: 0.65, step: 50, farStep: 100, lot: 1, tradesScale: 0.7 },
];
const MON = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];

function expiryName(ms: number): string {
  const d = new Date(ms);
  return `${d.getUTCDate()}${MON[d.getUTCMonth()]}${String(d.getUTCFullYear()).slice(2)}`;
}

function normCdf(x: number): number {
  // Abramowitz–Stegun 7.1.26, plenty for synthetic prices.
  const t = 1 / (1 + (0.3275911 * Math.abs(x)) / Math.SQRT2);
  const y = 1 - ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * Math.exp(-(x * x) / 2);
  return x >= 0 ? (1 + y) / 2 : (1 - y) / 2;
}

/** Black–Scholes premium in units of the underlying (zero rates). */
function premium(S: number, K: number, T: number, iv: number, call: boolean): number {
  const s = iv * Math.sqrt(T);
  const d1 = (Math.log(S / K) + (s * s) / 2) / s;
  const d2 = d1 - s;
  const usd = call ? S * normCdf(d1) - K * normCdf(d2) : K * normCdf(-d2) - S * normCdf(-d1);
  return usd / S;
}

/** Index level at the start of `day`: a GBM path drawn from its own stream so days agree without sharing state. */
function indexAtDay(plan: Plan, u: (typeof UNDERLYINGS)[number], day: number): number {
  const rng = new Rng(plan.opts.seed, `options-index:${u.sym}`);
  let x = u.price;
  const dailySd = u.vol / Math.sqrt(365);
  for (let d = 0; d < day; d++) x *= Math.exp(dailySd * rng.normal() - (dailySd * dailySd) / 2);
  return x;
}

function expiries(dayStart: number): number[] {
  const out: number[] = [];
  const at8 = (ms: number): number => ms + 8 * 3_600_000;
  for (let i = 1; i <= 3; i++) out.push(at8(dayStart + i * DAY_MS));
  const dow = new Date(dayStart).getUTCDay();
  const firstFriday = dayStart + ((5 - dow + 7) % 7 || 7) * DAY_MS;
  for (let w = 0; w < 4; w++) out.push(at8(firstFriday + w * 7 * DAY_MS));
  const d = new Date(dayStart);
  for (let m = 1; m <= 3; m++) {
    const lastDay = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + m + 1, 0);
    const back = (new Date(lastDay).getUTCDay() - 5 + 7) % 7;
    out.push(at8(lastDay - back * DAY_MS));
  }
  return [...new Set(out)].sort((a, b) => a - b);
}

export function writeOptionsDay(plan: Plan, day: number): { bytes: number; trades: number } {
  const dayStart = plan.dayStarts[day]!;
  const rng = new Rng(plan.opts.seed, `options:${day}`);
  const w = new ChunkWriter(path.join(plan.opts.out, 'options', `${isoDate(dayStart)}.jsonl`));
  const exps = expiries(dayStart);
  type Row = { ts: number; line: (tradeId: number) => string };
  const rows: Row[] = [];
  for (const u of UNDERLYINGS) {
    const n = Math.round(150 * Math.sqrt(plan.opts.markets / 10) * u.tradesScale * plan.opts.rate * (0.7 + 0.6 * rng.float()));
    const times = Array.from({ length: n }, () => dayStart + rng.int(DAY_MS)).sort((a, b) => a - b);
    const s0 = indexAtDay(plan, u, day);
    const s1 = indexAtDay(plan, u, day + 1);
    const intraSd = u.vol / Math.sqrt(365 * 24);
    let wiggle = 0;
    let lastT = dayStart;
    for (const ts of times) {
      wiggle += intraSd * Math.sqrt((ts - lastT) / 3_600_000) * rng.normal() * 0.5;
      lastT = ts;
      const frac = (ts - dayStart) / DAY_MS;
      const S = s0 * Math.pow(s1 / s0, frac) * Math.exp(wiggle - wiggle * frac);
      const exp = exps[Math.min(exps.length - 1, Math.floor(exps.length * rng.float() ** 1.7))]!;
      const T = Math.max(1 / (365 * 24), (exp - ts) / (365 * DAY_MS));
      const step = T < 30 / 365 ? u.step : u.farStep;
      const K = Math.max(step, Math.round((S * Math.exp(rng.normal() * 0.12 * Math.sqrt(T * 12 + 0.05))) / step) * step);
      const call = rng.chance(0.55);
      const m = Math.log(K / S);
      const iv = u.vol * (1 + ((1.5 * m * m) / Math.max(0.05, T)) * 0.05 + 0.05 * rng.normal());
      const px = Math.max(0.0001, Math.round(premium(S, K, T, Math.max(0.1, iv), call) * 10_000) / 10_000);
      const amount = u.lot === 1 ? 1 + Math.floor(rng.exp(8)) : Math.round((0.1 + rng.exp(1.5)) * 10) / 10;
      const name = `${u.sym}-${expiryName(exp)}-${K}-${call ? 'C' : 'P'}`;
      const direction = rng.chance(0.5) ? 'buy' : 'sell';
      const ivPct = Math.round(Math.max(0.1, iv) * 10_000) / 100;
      const index = Math.round(S * 100) / 100;
      rows.push({
        ts,
        line: (id) =>
          `{"instrument_name":"${name}","timestamp":${ts},"trade_id":"${u.sym}-${id}","price":${px},"iv":${ivPct},"index_price":${index},"amount":${amount},"direction":"${direction}"}\n`,
      });
    }
  }
  rows.sort((a, b) => a.ts - b.ts);
  let id = 300_000_000 + day * 100_000;
  for (const r of rows) w.write(r.line(id++));
  w.close();
  return { bytes: w.bytes, trades: rows.length };
}
