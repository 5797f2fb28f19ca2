import path from 'node:path';
import { Rng } from './prng.js';
import { DAY_MS, DEFAULT_MAKER_FILLS, NEW_SHAPE_FROM, isoDate, type Plan, type PlanMarket } from './plan.js';
import { ChunkWriter, PRICE_STR, sizeStr, blockAt, blockTime, CTF_EXCHANGE, NEG_RISK_CTF_EXCHANGE } from './format.js';
import { writeOptionsDay } from './options.js';
import { ASK, BID, YesBook } from './yes-book.js';

/**
 * One UTC day of the venue: every active market's order book evolves event by event (limit orders added,
 * cancelled, taken at the touch), and the day is written as the websocket tape a subscriber would have
 * captured (ws/DATE.jsonl) plus the on-chain fills of every match (fills/DATE.jsonl).
 *
 * Only the Yes (outcome 0) book is modelled: the venue shows the No book as its mirror (a bid for Yes at p
 * is an ask for No at 1 − p), so every level change is emitted for both tokens. Each day starts from
 * fresh `book` snapshots, as after a subscription, which is what lets days be generated independently.
 */
export type DayCounts = {
  ws_messages: number;
  book_messages: number;
  price_change_messages: number;
  last_trade_price_messages: number;
  tick_size_change_messages: number;
  level_updates: number;
  book_level_updates: number;
  price_change_level_updates: number;
  matches: number;
  trades: number;
  fill_events: number;
  options_trades: number;
};

export type MarketDayStats = {
  idx: number;
  volumeMicro: number;
  trades: number;
  lastYesMilli: number;
  lastTradeMs: number;
  bestBid: number;
  bestAsk: number;
};

export type DayResult = {
  day: number;
  date: string;
  counts: DayCounts;
  bytes: { ws: number; fills: number; options: number };
  markets: MarketDayStats[];
};

const SIDE = ['BUY', 'SELL'] as const;

export function emptyCounts(): DayCounts {
  return {
    ws_messages: 0,
    book_messages: 0,
    price_change_messages: 0,
    last_trade_price_messages: 0,
    tick_size_change_messages: 0,
    level_updates: 0,
    book_level_updates: 0,
    price_change_level_updates: 0,
    matches: 0,
    trades: 0,
    fill_events: 0,
    options_trades: 0,
  };
}

class Sim extends YesBook {
  tick: number;
  tickChanged = false;
  noise = 0;
  lastT = 0;
  knot = 0;
  burstUntil = 0;
  burstMult = 1;
  next = 0;
  inited = false;
  lastPrice = [-1, -1];
  /** Last trade expressed as a Yes price (a No trade at q is 1 − q). */
  lastYes = -1;
  volumeMicro = 0;
  trades = 0;
  lastTradeMs = 0;
  readonly contract: string;

  constructor(readonly m: PlanMarket) {
    super();
    this.tick = m.tick;
    this.contract = m.negRisk ? NEG_RISK_CTF_EXCHANGE : CTF_EXCHANGE;
  }

  /** Fair probability of outcome 0 in milli: the knot path plus an OU noise (20-minute memory). */
  fair(rng: Rng, t: number): number {
    const { knotT, knotX } = this.m;
    while (this.knot < knotT.length - 2 && knotT[this.knot + 1]! <= t) this.knot++;
    const t0 = knotT[this.knot]!;
    const t1 = knotT[this.knot + 1]!;
    const x0 = knotX[this.knot]!;
    const x = x0 + ((knotX[this.knot + 1]! - x0) * Math.min(1, Math.max(0, t - t0))) / Math.max(1, t1 - t0);
    const decay = Math.exp(-(t - this.lastT) / 1_200_000);
    this.noise = this.noise * decay + this.m.noiseSd * Math.sqrt(1 - decay * decay) * rng.normal();
    this.lastT = t;
    return 1000 / (1 + Math.exp(-(x + this.noise)));
  }
}

/** Resting order size in cents: log-normal around ~120 shares, mostly whole shares. */
function restingCents(rng: Rng, big: boolean): number {
  const shares = Math.min(2_500_000, Math.max(5, Math.exp(Math.log(big ? 600 : 120) + 1.2 * rng.normal())));
  return rng.chance(0.6) ? Math.round(shares) * 100 : Math.round(shares * 100);
}

function takerCents(rng: Rng): number {
  const shares = Math.min(500_000, Math.max(1, Math.exp(Math.log(35) + 1.3 * rng.normal())));
  return rng.chance(0.5) ? Math.round(shares) * 100 : Math.max(100, Math.round(shares * 100));
}

/** A market's Yes book as the next day's subscription draws it (see `openingBooks`). */
export type OpeningBook = { lvl: [Float64Array, Float64Array]; tick: number };

/** Writes nothing: the opening of a day replayed only to learn its books (same draws as the real run). */
const NO_WRITE = { write(): void {}, close(): void {}, bytes: 0 };

/**
 * The books a day's subscription frame will show, by market index: the day's own stream replayed up to its
 * opening books (nothing written). The previous day ends by moving every book there, so the tape is continuous
 * across midnight while each day is still generated on its own.
 */
export function openingBooks(plan: Plan, day: number): Map<number, OpeningBook> {
  return simulate(plan, day, true).opening!;
}

export function runDay(plan: Plan, day: number): DayResult {
  return simulate(plan, day, false).result!;
}

function simulate(plan: Plan, day: number, peek: boolean): { result?: DayResult; opening?: Map<number, OpeningBook> } {
  const dayStart = plan.dayStarts[day]!;
  const dayEnd = dayStart + DAY_MS;
  const date = isoDate(dayStart);
  const newShape = date >= NEW_SHAPE_FROM;
  const rng = new Rng(plan.opts.seed, `day:${day}`);
  const out = plan.opts.out;
  const ws = peek ? NO_WRITE : new ChunkWriter(path.join(out, 'ws', `${date}.jsonl`));
  const fills = peek ? NO_WRITE : new ChunkWriter(path.join(out, 'fills', `${date}.jsonl`));
  const c = emptyCounts();
  const ratePerMs = plan.baseRatePerHour / 3_600_000;
  // Maker fills per match: 1 + geometric(p), mean 1 + (1 − p) / p, capped at 3.5× the mean (10 at the default,
  // which keeps the default's draws — and so its output — exactly as before the option existed).
  const extraP = plan.opts.makerFills === DEFAULT_MAKER_FILLS ? 0.35 : 1 / plan.opts.makerFills;
  const extraCap = Math.round(3.5 * plan.opts.makerFills) - 1;

  const sims = plan.markets.filter((m) => m.tradeFromMs < dayEnd && m.tradeToMs > dayStart).map((m) => new Sim(m));

  // ---- emitters -------------------------------------------------------------------------------------------
  const book = (s: Sim, token: number, ts: number): void => {
    const bids = s.lvl[token === 0 ? BID : ASK]!;
    const asks = s.lvl[token === 0 ? ASK : BID]!;
    // Bids ascending and asks descending (best last), as the venue sends them. For the No token a Yes ask at
    // p is a bid at 1 − p, so walking Yes asks downwards yields No bids upwards.
    let b = '';
    let a = '';
    if (token === 0) {
      for (let p = 1; p < 1000; p++) if (bids[p]! > 0) b += `${b ? ',' : ''}{"price":"${PRICE_STR[p]}","size":"${sizeStr(bids[p]!)}"}`;
      for (let p = 999; p > 0; p--) if (asks[p]! > 0) a += `${a ? ',' : ''}{"price":"${PRICE_STR[p]}","size":"${sizeStr(asks[p]!)}"}`;
    } else {
      for (let p = 999; p > 0; p--) if (bids[p]! > 0) b += `${b ? ',' : ''}{"price":"${PRICE_STR[1000 - p]}","size":"${sizeStr(bids[p]!)}"}`;
      for (let p = 1; p < 1000; p++) if (asks[p]! > 0) a += `${a ? ',' : ''}{"price":"${PRICE_STR[1000 - p]}","size":"${sizeStr(asks[p]!)}"}`;
    }
    const head = `{"market":"${s.m.conditionId}","asset_id":"${s.m.tokens[token]}","timestamp":"${ts}","hash":"${rng.hex(40)}","bids":[${b}],"asks":[${a}]`;
    if (newShape) {
      const ltp = s.lastPrice[token]! >= 0 ? `,"last_trade_price":"${PRICE_STR[s.lastPrice[token]!]}"` : '';
      ws.write(`${head},"tick_size":"${PRICE_STR[s.tick]}"${ltp},"event_type":"book"}\n`);
    } else {
      ws.write(`${head},"event_type":"book"}\n`);
    }
    const levels = s.n[0]! + s.n[1]!;
    c.ws_messages++;
    c.book_messages++;
    c.level_updates += levels;
    c.book_level_updates += levels;
  };

  /**
   * Level changes already applied to the Yes book, as flat triples (side, milli, new total cents), emitted for
   * both tokens, or for `only` one of them (the other token got a full `book` instead).
   */
  const changes = (s: Sim, ts: number, ch: number[], only = -1): void => {
    const k = ch.length / 3;
    const yesToo = only !== 1;
    const noToo = only !== 0;
    const M = s.m.conditionId;
    if (newShape) {
      // One message for the market; every entry carries its token, its own hash and that token's touch.
      const yb = PRICE_STR[s.bb];
      const ya = PRICE_STR[s.ba];
      const nb = PRICE_STR[1000 - s.ba];
      const na = PRICE_STR[1000 - s.bb];
      let e = '';
      for (let i = 0; i < ch.length; i += 3) {
        const side = ch[i]!;
        const p = ch[i + 1]!;
        const sz = sizeStr(ch[i + 2]!);
        if (yesToo)
          e += `${e ? ',' : ''}{"asset_id":"${s.m.tokens[0]}","price":"${PRICE_STR[p]}","size":"${sz}","side":"${SIDE[side]}","hash":"${rng.hex(40)}","best_bid":"${yb}","best_ask":"${ya}"}`;
        if (noToo)
          e += `${e ? ',' : ''}{"asset_id":"${s.m.tokens[1]}","price":"${PRICE_STR[1000 - p]}","size":"${sz}","side":"${SIDE[1 - side]}","hash":"${rng.hex(40)}","best_bid":"${nb}","best_ask":"${na}"}`;
      }
      ws.write(`{"market":"${M}","price_changes":[${e}],"timestamp":"${ts}","event_type":"price_change"}\n`);
      c.ws_messages++;
      c.price_change_messages++;
    } else {
      // Before September 2025: one message per token with changes[], keys in the venue's (sorted) order.
      let y = '';
      let n = '';
      for (let i = 0; i < ch.length; i += 3) {
        const side = ch[i]!;
        const p = ch[i + 1]!;
        const sz = sizeStr(ch[i + 2]!);
        y += `${i ? ',' : ''}{"price":"${PRICE_STR[p]}","side":"${SIDE[side]}","size":"${sz}"}`;
        n += `${i ? ',' : ''}{"price":"${PRICE_STR[1000 - p]}","side":"${SIDE[1 - side]}","size":"${sz}"}`;
      }
      if (yesToo)
        ws.write(`{"asset_id":"${s.m.tokens[0]}","changes":[${y}],"event_type":"price_change","hash":"${rng.hex(40)}","market":"${M}","timestamp":"${ts}"}\n`);
      if (noToo)
        ws.write(`{"asset_id":"${s.m.tokens[1]}","changes":[${n}],"event_type":"price_change","hash":"${rng.hex(40)}","market":"${M}","timestamp":"${ts}"}\n`);
      const msgs = yesToo && noToo ? 2 : 1;
      c.ws_messages += msgs;
      c.price_change_messages += msgs;
    }
    const lu = yesToo && noToo ? 2 * k : k;
    c.level_updates += lu;
    c.price_change_level_updates += lu;
  };

  const tickChange = (s: Sim, ts: number): void => {
    for (let token = 0; token < 2; token++) {
      ws.write(
        `{"asset_id":"${s.m.tokens[token]}","event_type":"tick_size_change","market":"${s.m.conditionId}","new_tick_size":"0.001","old_tick_size":"0.01","timestamp":"${ts}"}\n`,
      );
      c.ws_messages++;
      c.tick_size_change_messages++;
    }
  };

  // ---- on-chain fills ---------------------------------------------------------------------------------------
  let curBlock = -1;
  let logIndex = 0;
  const fill = (
    block: number,
    tx: string,
    contract: string,
    maker: string,
    taker: string,
    makerAsset: string,
    takerAsset: string,
    makerAmt: number,
    takerAmt: number,
  ): void => {
    logIndex += 1 + rng.int(3); // Transfer/TransferSingle logs sit between the OrderFilled logs
    fills.write(
      `{"event":"OrderFilled","block_number":${block},"block_timestamp":${blockTime(block)},"transaction_hash":"${tx}","log_index":${logIndex},"contract":"${contract}","order_hash":"0x${rng.hex(64)}","maker":"${maker}","taker":"${taker}","maker_asset_id":"${makerAsset}","taker_asset_id":"${takerAsset}","maker_amount_filled":"${makerAmt}","taker_amount_filled":"${takerAmt}","fee":"0"}\n`,
    );
    c.fill_events++;
  };

  /**
   * A taker order crosses the Yes book's touch on `side` (ASK = lifts the ask). The taker trades either token:
   * buying Yes at the ask and selling No at 1 − ask take the same resting liquidity.
   */
  const trade = (s: Sim, ts: number, side: number): void => {
    const P = side === ASK ? s.ba : s.bb;
    const a = s.lvl[side]!;
    const avail = a[P]!;
    const size = rng.chance(0.22) ? avail : Math.min(avail, takerCents(rng));
    const token = rng.chance(0.5) ? 0 : 1;
    const takerBuys = token === 0 ? side === ASK : side === BID;
    const price = token === 0 ? P : 1000 - P;
    const tx = `0x${rng.hex(64)}`;
    const assetId = s.m.tokens[token]!;
    const takerSide = takerBuys ? 'BUY' : 'SELL';
    if (newShape) {
      ws.write(
        `{"market":"${s.m.conditionId}","asset_id":"${assetId}","price":"${PRICE_STR[price]}","size":"${sizeStr(size)}","fee_rate_bps":"0","side":"${takerSide}","timestamp":"${ts}","event_type":"last_trade_price","transaction_hash":"${tx}"}\n`,
      );
    } else {
      ws.write(
        `{"asset_id":"${assetId}","event_type":"last_trade_price","fee_rate_bps":"0","market":"${s.m.conditionId}","price":"${PRICE_STR[price]}","side":"${takerSide}","size":"${sizeStr(size)}","timestamp":"${ts}","transaction_hash":"${tx}"}\n`,
      );
    }
    c.ws_messages++;
    c.last_trade_price_messages++;

    // Fills: one per maker order, then the taker order's own summary whose taker is the exchange contract.
    const block = blockAt(Math.floor(ts / 1000));
    if (block !== curBlock) {
      curBlock = block;
      logIndex = rng.int(40);
    }
    // Several resting orders usually fill one taker order (mean ≈ 2.9 maker fills per match).
    const parts = Math.min(size, 1 + Math.min(extraCap, rng.geometric(extraP)));
    const cuts: number[] = [];
    for (let i = 1; i < parts; i++) cuts.push(1 + rng.int(size - 1));
    cuts.sort((x, y) => x - y);
    const taker = plan.takers[Math.floor(plan.takers.length * rng.float() ** 1.5)]!;
    let prev = 0;
    for (let i = 0; i < parts; i++) {
      const end = i === parts - 1 ? size : cuts[i]!;
      const part = end - prev;
      prev = end;
      if (part <= 0) continue;
      const maker = plan.makers[Math.floor(plan.makers.length * rng.float() ** 2)]!;
      const shares = part * 10_000;
      const usdc = price * part * 10;
      // The maker is on the other side of the taker in the same token.
      if (takerBuys) fill(block, tx, s.contract, maker, taker, assetId, '0', shares, usdc);
      else fill(block, tx, s.contract, maker, taker, '0', assetId, usdc, shares);
      c.trades++;
      s.trades++;
    }
    const totShares = size * 10_000;
    const totUsdc = price * size * 10;
    if (takerBuys) fill(block, tx, s.contract, taker, s.contract, '0', assetId, totUsdc, totShares);
    else fill(block, tx, s.contract, taker, s.contract, assetId, '0', totShares, totUsdc);
    c.matches++;
    s.volumeMicro += totUsdc;
    s.lastPrice[token] = price;
    s.lastYes = P;
    s.lastTradeMs = ts;

    // The taken level shrinks or disappears. The venue answers a trade with a fresh `book` for the traded token;
    // the mirrored level of the other token arrives as a price_change.
    const left = avail - size;
    const emptied = left === 0 && s.n[side] === 1;
    // An emptied side is refilled by a new order: drawn now (same draws as before), placed after the trade.
    let refill: number[] = [];
    if (emptied) {
      const step = (1 + rng.geometric(0.5)) * s.tick;
      const Q = side === ASK ? P + step : P - step;
      refill = Q >= s.tick && Q <= 1000 - s.tick ? [side, Q, restingCents(rng, false)] : [side, P, restingCents(rng, false)];
    }
    s.set(side, P, left);
    book(s, token, ts);
    changes(s, ts, [side, P, left], 1 - token);
    // A new order is a price_change on the venue (both tokens), never folded into the trade's book.
    if (emptied) {
      s.set(side, refill[1]!, refill[2]!);
      changes(s, ts, refill);
    }
  };

  const add = (s: Sim, ts: number, side: number, fair: number): void => {
    const tk = s.tick;
    const gap = (s.ba - s.bb) / tk;
    let P: number;
    if (gap > 2 && rng.chance(0.85)) {
      // Market makers compete inside a wide spread, quoting next to the fair price.
      P =
        side === BID
          ? Math.min(s.ba - tk, Math.max(s.bb + tk, Math.floor((fair - tk / 2) / tk) * tk))
          : Math.max(s.bb + tk, Math.min(s.ba - tk, Math.ceil((fair + tk / 2) / tk) * tk));
    } else if (gap > 1 && rng.chance(0.35)) P = side === BID ? s.bb + tk : s.ba - tk;
    else {
      const k = Math.min(25, rng.geometric(0.4));
      P = side === BID ? s.bb - k * tk : s.ba + k * tk;
      if (P < tk || P > 1000 - tk) P = side === BID ? s.bb : s.ba;
    }
    s.set(side, P, s.lvl[side]![P]! + restingCents(rng, s.m.busy));
    changes(s, ts, [side, P, s.lvl[side]![P]!]);
  };

  const cancel = (s: Sim, ts: number, side: number): void => {
    const a = s.lvl[side]!;
    const dir = side === BID ? -1 : 1;
    let P = side === BID ? s.bb : s.ba;
    for (let skip = rng.geometric(0.45); skip > 0; skip--) {
      let q = P + dir;
      while (q > 0 && q < 1000 && a[q] === 0) q += dir;
      if (q <= 0 || q >= 1000) break;
      P = q;
    }
    const size = a[P]!;
    let left: number;
    if (s.n[side] === 1) {
      if (size <= 1000) return add(s, ts, side, (s.bb + s.ba) / 2);
      left = Math.round(size * (0.3 + 0.5 * rng.float()));
    } else if (size <= 500 || rng.chance(0.55)) left = 0;
    else left = Math.max(100, Math.round(size * (0.2 + 0.6 * rng.float())));
    s.set(side, P, left);
    changes(s, ts, [side, P, left]);
  };

  const dropFar = (s: Sim, ts: number, side: number): void => {
    const a = s.lvl[side]!;
    let P = side === BID ? 1 : 999;
    while (a[P] === 0) P += side === BID ? 1 : -1;
    s.set(side, P, 0);
    changes(s, ts, [side, P, 0]);
  };

  /** The fair price left the spread: pull the stale quote at the touch and re-quote one level through it. */
  const requote = (s: Sim, ts: number, side: number): void => {
    const tk = s.tick;
    const P = side === ASK ? s.ba : s.bb;
    const other = side === ASK ? BID : ASK;
    const ch: number[] = [];
    if (s.n[side] === 1) {
      const Q = side === ASK ? P + tk * (1 + rng.geometric(0.5)) : P - tk * (1 + rng.geometric(0.5));
      if (Q < tk || Q > 1000 - tk) return trade(s, ts, side);
      s.set(side, Q, restingCents(rng, false));
      ch.push(side, Q, s.lvl[side]![Q]!);
    }
    s.set(side, P, 0);
    ch.push(side, P, 0);
    s.set(other, P, restingCents(rng, s.m.busy));
    ch.push(other, P, s.lvl[other]![P]!);
    changes(s, ts, ch);
  };

  /** A fresh book around the fair price (what a subscriber receives first). */
  const init = (s: Sim, t: number): void => {
    s.lastT = t;
    s.knot = 0;
    s.noise = rng.normal() * s.m.noiseSd;
    if (s.m.tickChangeMs > 0 && t >= s.m.tickChangeMs) {
      s.tick = 1;
      s.tickChanged = true;
    }
    const tk = s.tick;
    const f = s.fair(rng, t);
    const spreadTicks = s.m.kind === 'crypto15m' || s.m.busy ? 1 : 1 + Math.min(3, rng.geometric(0.5));
    let bb = Math.floor((f - (spreadTicks * tk) / 2) / tk) * tk;
    bb = Math.max(tk, Math.min(1000 - tk * (spreadTicks + 1), bb));
    const ba = bb + spreadTicks * tk;
    const depth = s.m.busy ? 10 + rng.int(20) : 4 + rng.int(12);
    for (let side = 0; side < 2; side++) {
      let p = side === BID ? bb : ba;
      for (let i = 0; i < depth && p >= tk && p <= 1000 - tk; i++) {
        s.set(side, p, restingCents(rng, s.m.busy));
        const gap = 1 + (rng.chance(0.3) ? rng.geometric(0.5) : 0);
        p += side === BID ? -gap * tk : gap * tk;
      }
      // Far-away resting orders at the price bounds, as in real captures (0.001 bids, 0.999 asks).
      const edge = side === BID ? tk : 1000 - tk;
      if (rng.chance(0.4) && s.lvl[side]![edge] === 0) s.set(side, edge, 100 * Math.round(Math.exp(9 + 2 * rng.float())));
    }
    s.inited = true;
  };

  /** Moves the book to `nb` with one price_change (per token, old shape) holding every level that differs. */
  const moveTo = (s: Sim, nb: OpeningBook, ts: number): void => {
    if (nb.tick !== s.tick && !s.tickChanged) {
      s.tickChanged = true;
      s.tick = nb.tick;
      tickChange(s, ts);
    }
    const ch: number[] = [];
    for (let side = 0; side < 2; side++) {
      const a = s.lvl[side]!;
      const b = nb.lvl[side]!;
      for (let p = 1; p < 1000; p++) {
        if (a[p] === b[p]) continue;
        s.set(side, p, b[p]!);
        ch.push(side, p, b[p]!);
      }
    }
    if (ch.length) changes(s, ts, ch);
  };

  // ---- event loop -----------------------------------------------------------------------------------------
  const step = (s: Sim, ts: number): void => {
    if (!s.tickChanged && s.m.tickChangeMs > 0 && ts >= s.m.tickChangeMs) {
      s.tickChanged = true;
      s.tick = 1;
      tickChange(s, ts);
    }
    const f = s.fair(rng, ts);
    if (f > s.ba && rng.chance(0.6)) {
      if (rng.chance(0.5)) trade(s, ts, ASK);
      else requote(s, ts, ASK);
    } else if (f < s.bb && rng.chance(0.6)) {
      if (rng.chance(0.5)) trade(s, ts, BID);
      else requote(s, ts, BID);
    } else {
      const r = rng.float();
      const side = rng.chance(0.5) ? BID : ASK;
      if (s.ba - s.bb > 2 * s.tick && rng.chance(0.6)) add(s, ts, side, f);
      else if (r < 0.32) {
        // Depth stays bounded: a full side loses its farthest level instead of growing.
        if (s.n[side]! >= (s.m.busy ? 24 : 14)) dropFar(s, ts, side);
        else add(s, ts, side, f);
      } else if (r < 0.52) cancel(s, ts, side);
      else trade(s, ts, rng.chance(f > (s.bb + s.ba) / 2 ? 0.65 : 0.35) ? ASK : BID);
    }
    if (rng.chance(0.002)) {
      book(s, 0, ts);
      book(s, 1, ts);
    }
  };

  /** Next arrival: Poisson at the market's rate, times bursts (clustered arrivals) and a closing surge. */
  const schedule = (s: Sim, t: number): void => {
    if (t > s.burstUntil) {
      s.burstMult = 1;
      if (rng.chance(0.004)) {
        s.burstUntil = t + rng.exp(120_000);
        s.burstMult = 5 + 25 * rng.float();
      }
    }
    const surge = s.m.kind === 'crypto15m' && s.m.tradeToMs - t < 180_000 ? 3 : 1;
    const rate = ratePerMs * s.m.weight * s.burstMult * surge;
    s.next = t + Math.max(1, Math.ceil(rng.exp(1 / rate)));
  };

  // Heap of sims ordered by (next, market index): the tape interleaves markets in time order.
  const heap: Sim[] = [];
  const less = (x: Sim, y: Sim): boolean => x.next < y.next || (x.next === y.next && x.m.idx < y.m.idx);
  const push = (s: Sim): void => {
    heap.push(s);
    let i = heap.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!less(heap[i]!, heap[p]!)) break;
      [heap[i], heap[p]] = [heap[p]!, heap[i]!];
      i = p;
    }
  };
  const pop = (): Sim => {
    const top = heap[0]!;
    const last = heap.pop()!;
    if (heap.length > 0) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < heap.length && less(heap[l]!, heap[m]!)) m = l;
        if (r < heap.length && less(heap[r]!, heap[m]!)) m = r;
        if (m === i) break;
        [heap[i], heap[m]] = [heap[m]!, heap[i]!];
        i = m;
      }
    }
    return top;
  };

  // Subscription at midnight: the first frame is every open market's books, timestamps not in order.
  const atOpen = sims.filter((s) => s.m.tradeFromMs <= dayStart);
  for (let i = atOpen.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [atOpen[i], atOpen[j]] = [atOpen[j]!, atOpen[i]!];
  }
  for (const s of atOpen) {
    init(s, dayStart);
    const ts = dayStart + rng.int(1500);
    book(s, 0, ts);
    book(s, 1, ts);
  }
  if (peek) return { opening: new Map(atOpen.map((s) => [s.m.idx, { lvl: [s.lvl[BID]!, s.lvl[ASK]!], tick: s.tick }])) };
  for (const s of sims) {
    if (s.inited) schedule(s, dayStart + 1500);
    else s.next = s.m.tradeFromMs;
    push(s);
  }
  while (heap.length > 0) {
    const s = pop();
    const t = s.next;
    if (t >= Math.min(s.m.tradeToMs, dayEnd)) continue;
    if (!s.inited) {
      init(s, t);
      book(s, 0, t);
      book(s, 1, t);
    } else {
      step(s, t);
    }
    schedule(s, t);
    push(s);
  }
  // The venue's books do not jump at midnight: in the day's last millisecond every book still open moves to the
  // one the next day's subscription shows (price_changes, as the orders that did it would have been sent).
  if (day + 1 < plan.opts.days) {
    const next = openingBooks(plan, day + 1);
    for (const s of sims) {
      const nb = next.get(s.m.idx);
      if (s.inited && nb) moveTo(s, nb, dayEnd - 1);
    }
  }
  ws.close();
  fills.close();

  let optionsBytes = 0;
  if (plan.opts.options) {
    const o = writeOptionsDay(plan, day);
    optionsBytes = o.bytes;
    c.options_trades = o.trades;
  }
  const result: DayResult = {
    day,
    date,
    counts: c,
    bytes: { ws: ws.bytes, fills: fills.bytes, options: optionsBytes },
    markets: sims.map((s) => ({
      idx: s.m.idx,
      volumeMicro: s.volumeMicro,
      trades: s.trades,
      lastYesMilli: s.lastYes,
      lastTradeMs: s.lastTradeMs,
      bestBid: s.bb,
      bestAsk: s.ba,
    })),
  };
  return { result };
}
