import { z } from 'zod';
import { entitlementOf } from '../accounts/entitlements.js';
import { BYTES_PER_ROW, LEGACY_MINIMUM_ORDER_USD, PLANS, planOf, REFERENCE_RATE_PER_MB } from '../accounts/plans.js';
import { activeSubscription, cancelSubscription, type SubscriptionRow } from '../state/accounts.js';
import { getCreditAccount, listLedger, redeemSubscription, type LedgerRow } from '../state/billing.js';
import { Conflict, NotFound, PaymentRequired, Unauthorized } from '../errors.js';
import type { Route } from './route.js';
import { BalanceResponse, CheckoutResponse, TransactionResponse } from './account-schemas.js';
import { openCheckout } from './checkout-start.js';

/**
 * /v1/billing/*: subscription, credit balance and ledger, pricing, and checkout through the payment provider
 * configured by the operator (none by default: checkout answers 503). Shapes follow the anchor's Billing schemas; money is cents inside, USD outside.
 */

export const MIN_CHECKOUT_USD = 10;
export const MAX_CHECKOUT_USD = 10_000;

const usd = (cents: number) => Math.round(cents) / 100;
const cents = (amount: number) => Math.round(amount * 100);

const HttpUrl = z
  .string()
  .max(2000)
  .url()
  .refine((u) => /^https?:\/\//i.test(u), 'must be an http(s) URL');

const CheckoutBody = z.object({
  amount: z.number().min(MIN_CHECKOUT_USD).max(MAX_CHECKOUT_USD),
  success_url: HttpUrl,
  cancel_url: HttpUrl,
});

// 'professional' is the only plan sold; 'free' is the default, not something one buys.
const Tier = z.enum(['professional']);
const Period = z.enum(['monthly', 'annual']);
const SubCheckoutBody = z.object({ tier: Tier, billing_period: Period, success_url: HttpUrl, cancel_url: HttpUrl });
const RedeemBody = z.object({ tier: Tier, billing_period: Period });

const TransactionsQuery = z.object({
  limit: z.coerce.number().int().min(1).max(500).default(50),
  offset: z.coerce.number().int().min(0).max(1_000_000).default(0),
});

export function priceCents(tier: string, period: 'monthly' | 'annual'): number {
  const plan = planOf(tier);
  return cents(period === 'annual' ? plan.price_usd_year : plan.price_usd_month);
}

export function transactionView(t: LedgerRow) {
  return {
    id: t.id,
    type: t.type,
    amount: usd(t.amount_cents),
    currency: 'USD',
    status: t.status,
    description: t.description,
    created_at: t.created_at,
    metadata: { ...(t.metadata ? (JSON.parse(t.metadata) as Record<string, unknown>) : {}), balance_after: usd(t.balance_after_cents), reference: t.reference },
  };
}

export function subscriptionView(sub: SubscriptionRow | undefined) {
  if (!sub) return { active: false, tier: 'free', billing_period: null, status: null, current_period_end: null };
  return {
    active: true,
    id: sub.id,
    tier: sub.tier,
    billing_period: sub.billing_period,
    status: sub.status,
    funded_by: sub.funded_by,
    current_period_start: sub.current_period_start,
    current_period_end: sub.current_period_end,
    cancel_at_period_end: sub.cancel_at_period_end === 1,
  };
}

function planView(id: keyof typeof PLANS) {
  const p = PLANS[id];
  return {
    id: p.id,
    name: p.name,
    price_usd_month: p.price_usd_month,
    price_usd_year: p.price_usd_year,
    requires_subscription: p.requires_subscription,
    datasets: p.datasets,
    requests_per_minute: p.requests_per_minute,
    downloads_per_hour: p.downloads_per_hour,
    downloads_per_minute: p.downloads_per_minute,
    fair_use_bytes_month: p.fair_use_bytes_month,
    fair_use_gb_month: p.fair_use_bytes_month / 1024 ** 3,
    top_of_book_delay_minutes: p.top_of_book_delay_minutes,
  };
}

/** The legacy per-MB constants: GET /v1/billing/pricing (usage_pricing) and GET /v1/orders/estimate. */
export function usagePricing() {
  return {
    rate_per_mb: { ...REFERENCE_RATE_PER_MB },
    bytes_per_row: { ...BYTES_PER_ROW },
    free_tier_mb: 0,
    minimum_order_usd: LEGACY_MINIMUM_ORDER_USD,
    currency: 'USD',
  };
}

export const billingRoutes: Route[] = [
  {
    method: 'get',
    path: '/v1/billing/pricing',
    cost: 'cheap',
    auth: 'public',
    tag: 'Billing',
    summary: 'Plans, the per-MB reference rates and the legacy minimum order',
    handler: async (_req, res) => {
      res.setHeader('Cache-Control', 'public, max-age=300');
      return {
        pricing_model: 'subscription',
        // Pay-as-you-go for data is retired: pulls are included in the plan. Credits still buy legacy orders
        // and can be redeemed toward a subscription, so credit checkout stays open.
        payg_enabled: false,
        plans: [planView('free'), planView('professional')],
        reference_rates_per_mb: { ...REFERENCE_RATE_PER_MB },
        minimum_order_usd: LEGACY_MINIMUM_ORDER_USD,
        credit_pricing: { minimum_purchase: MIN_CHECKOUT_USD, maximum_purchase: MAX_CHECKOUT_USD, currency: 'USD', presets: [10, 25, 50, 100, 250] },
        usage_pricing: usagePricing(),
        note: 'Per-MB rates are reference numbers; downloads and exports are included in the plan up to its monthly fair-use volume.',
      };
    },
  },
  {
    method: 'get',
    path: '/v1/billing/balance',
    cost: 'cheap',
    auth: 'key',
    tag: 'Billing',
    summary: 'Credit balance (legacy credits: orders and subscription redemption)',
    response: BalanceResponse,
    handler: async (req, _res, ctx) => {
      const user = ctx.state.getUser(req.principal!.userId);
      if (!user) throw new Unauthorized();
      const acct = getCreditAccount(ctx.state, user.id);
      const ent = entitlementOf(ctx.state, user);
      return {
        user_id: user.id,
        balance: usd(acct.balance_cents),
        currency: 'USD',
        lifetime_credits: usd(acct.lifetime_credits_cents),
        lifetime_usage: usd(acct.lifetime_usage_cents),
        lifetime_refunds: usd(acct.lifetime_refunds_cents),
        plan: { id: ent.plan.id, name: ent.plan.name, subscription_active: Boolean(ent.subscription) },
        note: acct.balance_cents > 0 ? 'Credits pay for legacy orders and can be redeemed toward a subscription.' : null,
      };
    },
  },
  {
    method: 'get',
    path: '/v1/billing/transactions',
    cost: 'cheap',
    auth: 'key',
    tag: 'Billing',
    summary: 'The credit ledger, newest first (append-only)',
    query: TransactionsQuery,
    response: z.array(TransactionResponse),
    handler: async (req, res, ctx) => {
      const q = res.locals.query as z.infer<typeof TransactionsQuery>;
      return listLedger(ctx.state, req.principal!.userId, q.limit, q.offset).map(transactionView);
    },
  },
  {
    method: 'post',
    path: '/v1/billing/checkout',
    cost: 'cheap',
    auth: 'key',
    limit: 'orders',
    tag: 'Billing',
    summary: 'Start a checkout to buy credits (10–10,000 USD); credits land when the provider webhook arrives (503 when no payment provider is configured)',
    body: CheckoutBody,
    response: CheckoutResponse,
    handler: async (req, res, ctx) => {
      const b = res.locals.body as z.infer<typeof CheckoutBody>;
      const { session, url } = await openCheckout(req, ctx, {
        kind: 'credits',
        amount_cents: cents(b.amount),
        tier: null,
        billing_period: null,
        success_url: b.success_url,
        cancel_url: b.cancel_url,
      });
      return { checkout_id: session.id, checkout_url: url, amount: usd(session.amount_cents) };
    },
  },
  {
    method: 'get',
    path: '/v1/billing/subscription',
    cost: 'cheap',
    auth: 'key',
    tag: 'Billing',
    summary: 'The active subscription, or the Free placeholder',
    handler: async (req, _res, ctx) => subscriptionView(activeSubscription(ctx.state, req.principal!.userId)),
  },
  {
    method: 'post',
    path: '/v1/billing/subscription/checkout',
    cost: 'cheap',
    auth: 'key',
    limit: 'orders',
    tag: 'Billing',
    summary: 'Start a checkout for a subscription; 409 when one is already active (503 when no payment provider is configured)',
    body: SubCheckoutBody,
    handler: async (req, res, ctx) => {
      const b = res.locals.body as z.infer<typeof SubCheckoutBody>;
      const userId = req.principal!.userId;
      if (activeSubscription(ctx.state, userId)) throw new Conflict('A subscription is already active');
      const { session, url } = await openCheckout(req, ctx, {
        kind: 'subscription',
        amount_cents: priceCents(b.tier, b.billing_period),
        tier: b.tier,
        billing_period: b.billing_period,
        success_url: b.success_url,
        cancel_url: b.cancel_url,
      });
      return {
        checkout_id: session.id,
        checkout_url: url,
        tier: b.tier,
        billing_period: b.billing_period,
        amount: usd(session.amount_cents),
      };
    },
  },
  {
    method: 'post',
    path: '/v1/billing/subscription/redeem',
    cost: 'cheap',
    auth: 'key',
    // It spends credits: the same permission as a paid pull.
    scope: 'download',
    limit: 'orders',
    tag: 'Billing',
    summary: 'Pay a subscription from the credit balance (402 if short, 409 if one is active)',
    body: RedeemBody,
    handler: async (req, res, ctx) => {
      const b = res.locals.body as z.infer<typeof RedeemBody>;
      const out = redeemSubscription(ctx.state, {
        userId: req.principal!.userId,
        tier: b.tier,
        billingPeriod: b.billing_period,
        priceCents: priceCents(b.tier, b.billing_period),
        at: new Date(),
      });
      if (out.outcome === 'conflict') throw new Conflict('A subscription is already active');
      if (out.outcome === 'insufficient') throw new PaymentRequired('Insufficient credits');
      req.log.info({ user: req.principal!.userId, subscription: out.subscription.id }, 'subscription redeemed from credits');
      return {
        ...subscriptionView(out.subscription),
        funded_by: 'credits',
        charged: usd(-out.ledger.amount_cents),
        balance: usd(out.ledger.balance_after_cents),
        transaction_id: out.ledger.id,
      };
    },
  },
  {
    method: 'post',
    path: '/v1/billing/subscription/cancel',
    cost: 'cheap',
    auth: 'key',
    tag: 'Billing',
    summary: 'Cancel at period end: the plan stays in force until current_period_end',
    handler: async (req, _res, ctx) => {
      const sub = cancelSubscription(ctx.state, req.principal!.userId);
      if (!sub) throw new NotFound('No active subscription.');
      return { status: 'canceling', effective: 'period_end', current_period_end: sub.current_period_end, cancel_at_period_end: true };
    },
  },
];
