import { z } from 'zod';
import { entitlementOf } from '../../accounts/entitlements.js';
import { getCreditAccount, listLedger, type LedgerRow } from '../../state/billing.js';
import { Unauthorized } from '../../errors.js';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import type { AppContext } from '../context.js';
import { BalanceResponse, CheckoutResponse, TransactionResponse } from '../account-schemas.js';
import { openCheckout, ReturnUrl } from './checkout.js';
import { cents, usd } from './money.js';
import { MAX_CHECKOUT_USD, MIN_CHECKOUT_USD } from './pricing.js';

/**
 * Legacy credits: the balance, the append-only ledger, and buying credits through the payment provider
 * (credits land when its webhook arrives). They pay for legacy orders and can be redeemed toward a subscription.
 */

const CheckoutBody = z.object({
  amount: z.number().min(MIN_CHECKOUT_USD).max(MAX_CHECKOUT_USD),
  success_url: ReturnUrl,
  cancel_url: ReturnUrl,
});

const TransactionsQuery = z.object({
  limit: z.coerce.number().int().min(1).max(500).default(50),
  offset: z.coerce.number().int().min(0).max(1_000_000).default(0),
});

function transactionView(t: LedgerRow) {
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

export const creditRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/billing/balance',
    cost: 'cheap',
    auth: 'key',
    tag: 'Billing',
    summary: 'Credit balance (legacy credits: orders and subscription redemption)',
    response: BalanceResponse,
    handler: getBalance,
  }),
  defineRoute({
    method: 'get',
    path: '/v1/billing/transactions',
    cost: 'cheap',
    auth: 'key',
    tag: 'Billing',
    summary: 'The credit ledger, newest first (append-only)',
    query: TransactionsQuery,
    response: z.array(TransactionResponse),
    handler: listTransactions,
  }),
  defineRoute({
    method: 'post',
    path: '/v1/billing/checkout',
    cost: 'cheap',
    auth: 'key',
    limit: 'orders',
    tag: 'Billing',
    summary: 'Start a checkout to buy credits (10–10,000 USD); credits land when the provider webhook arrives (503 when no payment provider is configured)',
    body: CheckoutBody.meta({ id: 'CreateCheckoutRequest' }),
    response: CheckoutResponse,
    handler: checkoutCredits,
  }),
];

async function getBalance({ req }: RouteInput, ctx: AppContext) {
  const user = await ctx.state.getUser(req.principal!.userId);
  if (!user) throw new Unauthorized();
  const acct = await getCreditAccount(ctx.state, user.id);
  const ent = await entitlementOf(ctx.state, user);
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
}

async function listTransactions({ query: q, req }: RouteInput<{ query: typeof TransactionsQuery }>, ctx: AppContext) {
  return (await listLedger(ctx.state, req.principal!.userId, q.limit, q.offset)).map(transactionView);
}

async function checkoutCredits({ body: b, req }: RouteInput<{ body: typeof CheckoutBody }>, ctx: AppContext) {
  const { session, url } = await openCheckout(req, ctx, {
    kind: 'credits',
    amount_cents: cents(b.amount),
    tier: null,
    billing_period: null,
    success_url: b.success_url,
    cancel_url: b.cancel_url,
  });
  return { checkout_id: session.id, checkout_url: url, amount: usd(session.amount_cents) };
}
