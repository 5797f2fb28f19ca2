import { z } from 'zod';
import { planOf } from '../../accounts/plans.js';
import { activeSubscription, cancelSubscription, type SubscriptionRow } from '../../state/accounts.js';
import { redeemSubscription } from '../../state/billing.js';
import { Conflict, NotFound, PaymentRequired } from '../../errors.js';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import type { AppContext } from '../context.js';
import { openCheckout, ReturnUrl } from './checkout.js';
import { cents, usd } from './money.js';

/**
 * /v1/billing/subscription*: the active subscription, buying one through the payment provider configured by
 * the operator (none by default: checkout answers 503) or from credits, and cancelling at period end.
 */

// 'professional' is the only plan sold; 'free' is the default, not something one buys.
const Tier = z.enum(['professional']);
const Period = z.enum(['monthly', 'annual']);
const SubCheckoutBody = z.object({ tier: Tier, billing_period: Period, success_url: ReturnUrl, cancel_url: ReturnUrl });
const RedeemBody = z.object({ tier: Tier, billing_period: Period });

function priceCents(tier: string, period: 'monthly' | 'annual'): number {
  const plan = planOf(tier);
  return cents(period === 'annual' ? plan.price_usd_year : plan.price_usd_month);
}

function subscriptionView(sub: SubscriptionRow | undefined) {
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

export const subscriptionRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/billing/subscription',
    cost: 'cheap',
    auth: 'key',
    tag: 'Billing',
    summary: 'The active subscription, or the Free placeholder',
    handler: getSubscription,
  }),
  defineRoute({
    method: 'post',
    path: '/v1/billing/subscription/checkout',
    cost: 'cheap',
    auth: 'key',
    limit: 'orders',
    tag: 'Billing',
    summary: 'Start a checkout for a subscription; 409 when one is already active (503 when no payment provider is configured)',
    body: SubCheckoutBody.meta({ id: 'SubCheckoutRequest' }),
    handler: checkoutSubscription,
  }),
  defineRoute({
    method: 'post',
    path: '/v1/billing/subscription/redeem',
    cost: 'cheap',
    auth: 'key',
    // It spends credits: the same permission as a paid pull.
    scope: 'download',
    limit: 'orders',
    tag: 'Billing',
    summary: 'Pay a subscription from the credit balance (402 if short, 409 if one is active)',
    body: RedeemBody.meta({ id: 'RedeemRequest' }),
    handler: postSubscriptionRedeem,
  }),
  defineRoute({
    method: 'post',
    path: '/v1/billing/subscription/cancel',
    cost: 'cheap',
    auth: 'key',
    tag: 'Billing',
    summary: 'Cancel at period end: the plan stays in force until current_period_end',
    handler: postSubscriptionCancel,
  }),
];

async function getSubscription({ req }: RouteInput, ctx: AppContext) {
  return subscriptionView(await activeSubscription(ctx.state, req.principal!.userId));
}

async function checkoutSubscription({ body: b, req }: RouteInput<{ body: typeof SubCheckoutBody }>, ctx: AppContext) {
  const userId = req.principal!.userId;
  if (await activeSubscription(ctx.state, userId)) throw new Conflict('A subscription is already active');
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
}

async function postSubscriptionRedeem({ body: b, req }: RouteInput<{ body: typeof RedeemBody }>, ctx: AppContext) {
  const out = await redeemSubscription(ctx.state, {
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
}

async function postSubscriptionCancel({ req }: RouteInput, ctx: AppContext) {
  const sub = await cancelSubscription(ctx.state, req.principal!.userId);
  if (!sub) throw new NotFound('No active subscription.');
  return { status: 'canceling', effective: 'period_end', current_period_end: sub.current_period_end, cancel_at_period_end: true };
}
