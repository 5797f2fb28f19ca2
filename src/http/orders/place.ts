import { z } from 'zod';
import { ORDER_KINDS } from '../../catalogue/kinds.js';
import { coverage, entitlementOf, type Entitlement } from '../../accounts/entitlements.js';
import { datasetOf, sizeItem, type ItemSelector, type OrderDataType } from '../../accounts/order-sizing.js';
import { BYTES_PER_ROW, LEGACY_MINIMUM_ORDER_USD, REFERENCE_RATE_PER_MB } from '../../accounts/plans.js';
import { findOrderByKey, orderItems, placeOrder, type PricedItem } from '../../state/billing.js';
import { BadRequest, NotFound, PaymentRequired, Unauthorized } from '../../errors.js';
import type { RequestContext } from '../context.js';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import { isoDateTime, timeframeParam } from '../params.js';
import { OrderResponse } from '../account-schemas.js';
import { orderView } from './views.js';

/**
 * POST /v1/orders, the legacy credit model: each item is sized from the lake, priced at the per-MB reference
 * rate of its type (items the caller's active subscription covers cost nothing), the total is raised to the
 * 10 USD minimum when anything is charged, and the balance is debited atomically. The same idempotency key
 * (per user) returns the first order and never charges twice.
 */
const MB = 1_048_576;
const REDOWNLOAD_DAYS = 7;
/** Venue token ids are 256-bit integers in decimal (70+ digits), far longer than any numeric market id. */
const TOKEN_ID = /^[0-9]{30,100}$/;

const Item = z
  .object({
    // As the query API takes it: the numeric markets.id (every outcome) or one outcome token id (that outcome).
    // The anchor's document leaves market_id an unconstrained string; the spec refuses 0x condition ids.
    market_id: z
      .string()
      .regex(/^\d{1,100}$/, 'market_id is the numeric markets.id or an outcome token id')
      .nullish(),
    series_id: z
      .string()
      .regex(/^[A-Za-z0-9_.:-]{1,100}$/)
      .nullish(),
    data_type: z.enum(ORDER_KINDS),
    format: z.enum(['csv', 'parquet', 'json']).default('csv'),
    // The query API's parser: dates, datetimes with or without a zone (UTC when none), as Python sends them.
    start: isoDateTime.nullish(),
    end: isoDateTime.nullish(),
    // The anchor enumerates 1m, 1h and 1d; pmlake's candles take any timeframe (7m, 4h, 1w), so an order does too.
    timeframe: timeframeParam.nullish(),
  })
  .refine((i) => i.market_id || i.series_id, { message: 'an item needs market_id or series_id' })
  .refine((i) => i.start == null || i.end == null || i.start < i.end, { message: 'start must be before end', path: ['end'] })
  .meta({ id: 'OrderItemRequest' });

const isoOf = (micros: bigint | null | undefined) => (micros == null ? null : new Date(Number(micros / 1000n)).toISOString());

const CreateOrderBody = z.object({
  items: z.array(Item).min(1).max(50),
  idempotency_key: z.string().min(1).max(128).nullish(),
});

/** Sizes and prices every item in order; the first item that cannot be sold stops the order (400 / 404). */
async function priceItems(ctx: RequestContext, ent: Entitlement, items: z.infer<typeof Item>[], expires: string): Promise<PricedItem[]> {
  const priced: PricedItem[] = [];
  const empty: number[] = [];
  for (const [idx, it] of items.entries()) {
    if (it.data_type === 'greeks') {
      throw new BadRequest({
        code: 'wrong_data_type',
        message: 'greeks exist only for crypto-options series, which pmlake does not sell as orders',
        item_index: idx,
      });
    }
    const t = it.data_type as OrderDataType;
    const sel: ItemSelector = it.series_id
      ? { seriesId: it.series_id }
      : TOKEN_ID.test(it.market_id!)
        ? { marketId: it.market_id!, tokenId: it.market_id! }
        : { marketId: it.market_id! };
    const start = isoOf(it.start);
    const end = isoOf(it.end);
    const rows = await sizeItem(ctx.lake, t, sel, { start, end }, it.timeframe ?? undefined);
    if (rows === null) throw new NotFound(it.series_id ? 'Series not found' : 'Market not found');
    if (rows === 0) empty.push(idx);
    const bytes = rows * (BYTES_PER_ROW[t] ?? 230);
    // A subscriber's plan already includes what it covers: those lines cost nothing.
    const covered = Boolean(ent.subscription) && coverage(ent, datasetOf(t)).ok;
    const cost = covered ? 0 : Math.round((bytes / MB) * (REFERENCE_RATE_PER_MB[t] ?? 1) * 100);
    priced.push({
      market_id: it.market_id ?? '',
      series_id: it.series_id ?? null,
      data_type: t,
      format: it.format,
      timeframe: t === 'ohlcv' ? (it.timeframe?.label ?? '1h') : (it.timeframe?.label ?? null),
      start_date: start,
      end_date: end,
      record_count: rows,
      size_bytes: bytes,
      cost_cents: cost,
      status: covered ? 'completed' : 'paid',
      expires_at: expires,
    });
  }
  if (empty.length > 0) {
    throw new BadRequest({ code: 'empty_line_item', message: 'Some items hold no data in the requested window', empty_items: empty });
  }
  return priced;
}

export const orderPlaceRoutes: Route[] = [
  defineRoute({
    method: 'post',
    path: '/v1/orders',
    cost: 'cheap',
    auth: 'key',
    scope: 'download',
    limit: 'orders',
    tag: 'Orders',
    summary: 'Place an order from credits (402 "Insufficient credits" when short; idempotent by idempotency_key)',
    body: CreateOrderBody.meta({ id: 'CreateOrderRequest' }),
    response: OrderResponse,
    handler: postOrders,
  }),
];

async function postOrders({ body, req }: RouteInput<{ body: typeof CreateOrderBody }>, ctx: RequestContext) {
  const user = await ctx.state.getUser(req.principal!.userId);
  if (!user) throw new Unauthorized();
  // A repeat of a placed order answers at once, without sizing or charging again.
  const prior = body.idempotency_key ? await findOrderByKey(ctx.state, user.id, body.idempotency_key) : undefined;
  if (prior) return { ...orderView(prior, await orderItems(ctx.state, prior.id)), replayed: true };
  const at = new Date();
  const ent = await entitlementOf(ctx.state, user, at);
  const expires = new Date(at.getTime() + REDOWNLOAD_DAYS * 86_400_000).toISOString();
  const priced = await priceItems(ctx, ent, body.items, expires);
  const sum = priced.reduce((s, i) => s + i.cost_cents, 0);
  const charged = priced.some((i) => i.status === 'paid');
  const minimumCents = LEGACY_MINIMUM_ORDER_USD * 100;
  const total = charged ? Math.max(sum, minimumCents) : 0;
  const out = await placeOrder(ctx.state, {
    userId: user.id,
    idempotencyKey: body.idempotency_key ?? null,
    items: priced,
    totalCents: total,
    minimumApplied: charged && sum < minimumCents,
    at,
  });
  if (out.outcome === 'insufficient') throw new PaymentRequired('Insufficient credits');
  req.log.info({ order: out.order.id, outcome: out.outcome, total_cents: out.order.total_cost_cents }, 'order');
  return { ...orderView(out.order, out.items), replayed: out.outcome === 'replayed' };
}
