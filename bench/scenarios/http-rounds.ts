import fs from 'node:fs';
import http from 'node:http';
import { peakTracker } from '../proc.js';
import type { BenchContext, Sample } from '../runner.js';
import { cannon } from './http.js';

/**
 * The measurement shared by the http-small-redis and http-small-pg scenarios: several servers answering the same
 * `GET /v1/markets/{id}` (a cache hit), each measured per round the same way — SEQUENTIAL requests on one
 * keep-alive connection (the per-request latency at p50/p99, whose target is at most 1 ms of overhead), then
 * the http-small load (64 connections, a fresh key pool), whose req/s gives the ratios. Rounds rotate which side
 * goes first, so drift on the 2-core machine hits every side alike. CPU probes (redis-server, PostgreSQL) are
 * read around each load and reported per request.
 */
export const SEQUENTIAL = 500;

export type HttpSide = {
  /** For key labels. */
  name: string;
  /** The full route URL. */
  url: string;
  /** The server's pid (peak RSS). */
  pid: number;
  /** Fresh keys of one new user in this side's state; null for a side that checks no key (bare Express). */
  newKeys: ((label: string, n: number) => Promise<string[]>) | null;
};

/** A helper process whose CPU time is read around each load: reported as `<name>_cpu_us_per_req`. */
export type CpuProbe = { name: string; cpuMs(): number };

export type HttpRounds = {
  /** One sample list per side, in the order given: seconds = 1/req/s; extra rps, p50_ms, p99_ms, seq_p50_ms, seq_p99_ms, probes. */
  samples: Sample[][];
  /** Non-2xx answers and errors over every side and round. */
  refused: number;
  /** Keys per side per round. */
  perRound: number;
};

export async function httpRounds(ctx: BenchContext, seconds: number, sides: HttpSide[], probes: CpuProbe[] = []): Promise<HttpRounds> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const keysOf = async (side: HttpSide, label: string, n: number): Promise<string[] | null> => (side.newKeys ? side.newKeys(`${side.name}-${label}`, n) : null);
  try {
    // Warm-up of every side (JIT, connections, caches, script caches), which also sizes the key pool: 60
    // requests per key per minute, so plan for 3× the fastest keyed warm-up rate and ≤45 requests per key.
    let warmRps = 0;
    for (const side of sides) {
      const warm = await cannon(side.url, Math.min(3, seconds), await keysOf(side, 'warm', 400));
      if (side.newKeys) warmRps = Math.max(warmRps, warm.rps);
    }
    const perRound = Math.ceil((Math.max(warmRps * 3, 3000) * seconds) / 45);
    const samples: Sample[][] = sides.map(() => []);
    let refused = 0;
    for (let rep = 0; rep < ctx.reps; rep++) {
      const order = sides.map((_, i) => (i + rep) % sides.length);
      for (const i of order) {
        const side = sides[i]!;
        // Keys first: creating them is a commit in the side's state, kept out of the measured CPU.
        const seqKeys = (await keysOf(side, `seq-${rep}`, Math.ceil(SEQUENTIAL / 40))) ?? ['none'];
        const loadKeys = await keysOf(side, `load-${rep}`, perRound);
        const seq = await sequential(agent, side.url, seqKeys);
        const peak = peakTracker(side.pid);
        const cpu0 = probes.map((p) => p.cpuMs());
        const load = await cannon(side.url, seconds, loadKeys);
        const cpu = probes.map((p, k) => [`${p.name}_cpu_us_per_req`, ((p.cpuMs() - cpu0[k]!) * 1000) / Math.max(1, load.requests)] as const);
        refused += seq.bad + load.non2xx + load.errors;
        samples[i]!.push({
          seconds: 1 / load.rps,
          rows: load.requests,
          peakRss: peak.stop(),
          extra: {
            rps: load.rps,
            p50_ms: load.p50,
            p99_ms: load.p99,
            seq_p50_ms: seq.p50,
            seq_p99_ms: seq.p99,
            non2xx: seq.bad + load.non2xx + load.errors,
            ...Object.fromEntries(cpu),
          },
        });
      }
    }
    return { samples, refused, perRound };
  } finally {
    agent.destroy();
  }
}

/** "min–max" of one extra figure over a side's rounds. */
export function spread(samples: Sample[], k: string, digits = 3): string {
  const v = samples.map((s) => s.extra?.[k] ?? Number.NaN);
  return `${Math.min(...v).toFixed(digits)}–${Math.max(...v).toFixed(digits)}`;
}

/** A difference with its sign: "+0.123" / "-0.045". */
export function signed(v: number, digits = 3): string {
  return `${v >= 0 ? '+' : ''}${v.toFixed(digits)}`;
}

/** Per round, side a's figure minus side b's (the sides ran back to back in each round). */
export function roundDiffs(a: Sample[], b: Sample[], k: string, digits = 3): string {
  return a.map((s, i) => signed((s.extra?.[k] ?? Number.NaN) - (b[i]?.extra?.[k] ?? Number.NaN), digits)).join(', ');
}

/** `n` requests one after another on one keep-alive connection, keys rotating; latency quantiles in ms. */
async function sequential(agent: http.Agent, url: string, keys: string[], n = SEQUENTIAL): Promise<{ p50: number; p99: number; bad: number }> {
  const lat: number[] = [];
  let bad = 0;
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint();
    const status = await new Promise<number>((resolve, reject) => {
      http
        .get(url, { agent, headers: { 'x-api-key': keys[i % keys.length]! } }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        })
        .on('error', reject);
    });
    lat.push(Number(process.hrtime.bigint() - t) / 1e6);
    if (status !== 200) bad++;
  }
  lat.sort((a, b) => a - b);
  return { p50: lat[Math.floor(n * 0.5)]!, p99: lat[Math.min(n - 1, Math.floor(n * 0.99))]!, bad };
}

/** /proc/<pid>/stat fields after the command name: [state, ppid, …]; field n of proc(5) is at index n − 3. */
function statFields(pid: number | string): string[] | null {
  try {
    return fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  } catch {
    return null;
  }
}

/** Linux's 100 clock ticks a second, in ms. */
const TICK_MS = 10;

/** User + system CPU time of a process so far, in ms (NaN when it cannot be read). */
export function cpuMs(pid: number | undefined): number {
  const f = pid === undefined ? null : statFields(pid);
  return f ? (Number(f[11]) + Number(f[12])) * TICK_MS : Number.NaN;
}

/**
 * CPU time of a process and its children so far, in ms: its own and its reaped children's (cutime, cstime), plus
 * every live child's — PostgreSQL's postmaster and its backends (one per pooled connection) and helpers.
 */
export function treeCpuMs(root: number | undefined): number {
  const f = root === undefined ? null : statFields(root);
  if (!f) return Number.NaN;
  let ticks = Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const c = statFields(entry);
    if (c && Number(c[1]) === root) ticks += Number(c[11]) + Number(c[12]) + Number(c[13]) + Number(c[14]);
  }
  return ticks * TICK_MS;
}
