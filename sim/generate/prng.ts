/**
 * Seeded PRNG for the generator: xoshiro128** seeded through splitmix32. Math.random is never used, so a
 * seed reproduces the same bytes; every independent stream (plan, one day's tape, one day's options) gets
 * its own generator derived from (seed, stream name), so adding `--options` or changing the number of
 * worker threads cannot shift another stream's draws.
 */
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

function splitmix32(state: number): [number, number] {
  state = (state + 0x9e3779b9) | 0;
  let z = state;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return [state, (z ^ (z >>> 16)) >>> 0];
}

/** FNV-1a over the stream name, so streams are addressed by readable names ("day:12"). */
function hashName(name: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;
  private spare = NaN;

  constructor(seed: number, stream = '') {
    let s = (Math.imul(seed | 0, 0x27d4eb2d) ^ hashName(stream) ^ Math.floor(seed / 4294967296)) | 0;
    let v: number;
    [s, v] = splitmix32(s);
    this.a = v | 0;
    [s, v] = splitmix32(s);
    this.b = v | 0;
    [s, v] = splitmix32(s);
    this.c = v | 0;
    [s, v] = splitmix32(s);
    this.d = v | 1;
  }

  /** Uniform uint32. */
  u32(): number {
    const r = Math.imul(rotl(Math.imul(this.b, 5), 7), 9);
    const t = this.b << 9;
    this.c ^= this.a;
    this.d ^= this.b;
    this.b ^= this.c;
    this.a ^= this.d;
    this.c ^= t;
    this.d = rotl(this.d, 11);
    return r >>> 0;
  }

  /** Uniform in [0, 1). */
  float(): number {
    return this.u32() / 4294967296;
  }

  /** Uniform integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.float() * n);
  }

  /** Uniform integer in [lo, hi]. */
  range(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }

  chance(p: number): boolean {
    return this.float() < p;
  }

  /** Exponential with the given mean. */
  exp(mean: number): number {
    return -Math.log(1 - this.float()) * mean;
  }

  /** Standard normal (polar Box–Muller, caching the spare value). */
  normal(): number {
    if (!Number.isNaN(this.spare)) {
      const v = this.spare;
      this.spare = NaN;
      return v;
    }
    let u: number, v: number, s: number;
    do {
      u = this.float() * 2 - 1;
      v = this.float() * 2 - 1;
      s = u * u + v * v;
    } while (s >= 1 || s === 0);
    const m = Math.sqrt((-2 * Math.log(s)) / s);
    this.spare = v * m;
    return u * m;
  }

  /** Geometric count of failures before a success with probability p (0, 1, 2, …). */
  geometric(p: number): number {
    return Math.floor(Math.log(1 - this.float()) / Math.log(1 - p));
  }

  /** `chars` lowercase hex characters (chars even). */
  hex(chars: number): string {
    let s = '';
    for (let i = 0; i < chars; i += 8) {
      const x = this.u32();
      s += HEX[x >>> 24]! + HEX[(x >>> 16) & 255]! + HEX[(x >>> 8) & 255]! + HEX[x & 255]!;
    }
    return s.length === chars ? s : s.slice(0, chars);
  }

  /** Decimal string of `len` digits, first digit non-zero (token ids). */
  digits(len: number): string {
    let s = String(1 + this.int(9));
    while (s.length < len) s += String(this.u32() % 1000000000).padStart(9, '0');
    return s.slice(0, len);
  }

  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)]!;
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}
