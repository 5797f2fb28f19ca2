import { activateSubscriptionTx, activeSubscription, type SubscriptionRow } from './accounts.js';
import { lockUser, type Db } from './db.js';
import { sql } from './sql.js';
import { newId } from './store.js';

/**
 * Money: the credit balance, its append-only ledger, checkout sessions, provider webhook events and orders.
 * Amounts are integer cents. Every movement is one transaction (./db.ts) that updates the balance row with a
 * guarded UPDATE (`balance_cents >= cost`) and appends the ledger entry, so parallel debits can neither
 * overdraw the balance nor lose an entry: the ledger's sum is the balance, always.
 */

export type CreditAccount = {
  user_id: string;
  balance_cents: number;
  lifetime_credits_cents: number;
  lifetime_usage_cents: number;
  lifetime_refunds_cents: number;
};

export type LedgerType = 'credit_purchase' | 'usage_charge' | 'refund' | 'adjustment';

export type LedgerRow = {
  seq: number;
  id: string;
  user_id: string;
  type: LedgerType;
  amount_cents: number;
  balance_after_cents: number;
  status: string;
  description: string;
  reference: string | null;
  metadata: string | null;
  created_at: string;
};

export type CheckoutRow = {
  id: string;
  user_id: string;
  provider: string;
  kind: 'credits' | 'subscription';
  amount_cents: number;
  tier: string | null;
  billing_period: 'monthly' | 'annual' | null;
  success_url: string;
  cancel_url: string;
  status: 'open' | 'completed' | 'canceled';
  created_at: string;
  completed_at: string | null;
  /** The hosted provider's id for this checkout (Paddle: txn_…); null for the local provider. */
  provider_ref: string | null;
};

export async function getCreditAccount(t: Db, userId: string): Promise<CreditAccount> {
  return (
    (await t.get<CreditAccount>(sql`SELECT * FROM credit_accounts WHERE user_id = ${userId}`)) ?? {
      user_id: userId,
      balance_cents: 0,
      lifetime_credits_cents: 0,
      lifetime_usage_cents: 0,
      lifetime_refunds_cents: 0,
    }
  );
}

type Movement = {
  userId: string;
  type: LedgerType;
  /** Positive credits the balance, negative debits it. */
  amountCents: number;
  description: string;
  reference?: string | null;
  metadata?: Record<string, unknown> | null;
  at: Date;
};

/**
 * Moves money inside the caller's transaction. Returns the ledger row, or null when a debit exceeds the
 * balance (nothing is written then). The guarded UPDATE is atomic on its own in both backends (PostgreSQL
 * re-checks the guard on the row's newest version after waiting for its lock), and holds the row until commit.
 */
export async function moveTx(t: Db, m: Movement): Promise<LedgerRow | null> {
  await t.run(sql`INSERT INTO credit_accounts (user_id) VALUES (${m.userId}) ON CONFLICT (user_id) DO NOTHING`);
  const amount = Math.trunc(m.amountCents);
  const credit = amount >= 0;
  const changed = await t.run(
    sql`UPDATE credit_accounts SET
          balance_cents = balance_cents + ${amount},
          lifetime_credits_cents = lifetime_credits_cents + ${m.type === 'credit_purchase' || m.type === 'adjustment' ? Math.max(amount, 0) : 0},
          lifetime_usage_cents = lifetime_usage_cents + ${m.type === 'usage_charge' ? -amount : 0},
          lifetime_refunds_cents = lifetime_refunds_cents + ${m.type === 'refund' ? -amount : 0}
        WHERE user_id = ${m.userId} AND balance_cents + ${amount} >= 0`,
  );
  if (changed !== 1) {
    if (credit) throw new Error('credit failed to apply');
    return null;
  }
  const after = (await getCreditAccount(t, m.userId)).balance_cents;
  const row = {
    id: newId('txn'),
    user_id: m.userId,
    type: m.type,
    amount_cents: amount,
    balance_after_cents: after,
    status: 'completed',
    description: m.description,
    reference: m.reference ?? null,
    metadata: m.metadata ? JSON.stringify(m.metadata) : null,
    created_at: m.at.toISOString(),
  };
  const inserted = await t.get<{ seq: number }>(
    sql`INSERT INTO ledger (id, user_id, type, amount_cents, balance_after_cents, status, description, reference, metadata, created_at)
        VALUES (${row.id}, ${row.user_id}, ${row.type}, ${row.amount_cents}, ${row.balance_after_cents}, ${row.status}, ${row.description},
                ${row.reference}, ${row.metadata}, ${row.created_at})
        RETURNING seq`,
  );
  return { seq: inserted!.seq, ...row };
}

/** An operator or test credit (type 'adjustment'), in its own transaction. */
export function adjustBalance(store: Db, userId: string, amountCents: number, description: string, at: Date = new Date()): Promise<LedgerRow | null> {
  return store.tx((t) => moveTx(t, { userId, type: 'adjustment', amountCents, description, at }));
}

export function listLedger(t: Db, userId: string, limit: number, offset: number): Promise<LedgerRow[]> {
  return t.all<LedgerRow>(sql`SELECT * FROM ledger WHERE user_id = ${userId} ORDER BY seq DESC LIMIT ${limit} OFFSET ${offset}`);
}

export async function ledgerSum(t: Db, userId: string): Promise<number> {
  return (await t.get<{ s: number }>(sql`SELECT COALESCE(SUM(amount_cents), 0) AS s FROM ledger WHERE user_id = ${userId}`))!.s;
}

// ---- checkouts and webhooks ----

export async function createCheckout(t: Db, row: CheckoutRow): Promise<CheckoutRow> {
  await t.run(
    sql`INSERT INTO checkouts (id, user_id, provider, kind, amount_cents, tier, billing_period, success_url, cancel_url, status, created_at, completed_at, provider_ref)
        VALUES (${row.id}, ${row.user_id}, ${row.provider}, ${row.kind}, ${row.amount_cents}, ${row.tier}, ${row.billing_period}, ${row.success_url},
                ${row.cancel_url}, ${row.status}, ${row.created_at}, ${row.completed_at}, ${row.provider_ref})`,
  );
  return row;
}

export function getCheckout(t: Db, id: string): Promise<CheckoutRow | undefined> {
  return t.get<CheckoutRow>(sql`SELECT * FROM checkouts WHERE id = ${id}`);
}

export async function cancelCheckout(t: Db, id: string): Promise<boolean> {
  return (await t.run(sql`UPDATE checkouts SET status = 'canceled' WHERE id = ${id} AND status = 'open'`)) === 1;
}

export type WebhookOutcome =
  'credited' | 'subscription_activated' | 'duplicate' | 'already_completed' | 'unknown_checkout' | 'canceled' | 'provider_ref_mismatch';

export type CheckoutEvent = {
  provider: string;
  eventId: string;
  type: 'checkout.completed' | 'checkout.canceled';
  checkoutId: string;
  /** The provider's own event type, as recorded (default: `type`). */
  providerType?: string;
  /** The provider's id of the paid transaction; must equal the checkout's provider_ref when it has one. */
  providerRef?: string;
};

/**
 * Applies a verified provider event exactly once. The event id is recorded in the same transaction as its
 * effect, so a replay (same id) is a no-op; a different event for an already completed checkout is one too.
 * A hosted provider's event must name the transaction pmlake opened: its custom data (which a customer's
 * browser can set on a checkout of its own) names the checkout, the transaction id proves which payment it is.
 */
export function applyCheckoutEvent(
  store: Db,
  ev: CheckoutEvent,
  at: Date = new Date(),
): Promise<{ outcome: WebhookOutcome; ledger?: LedgerRow; subscription?: SubscriptionRow }> {
  return store.tx(async (t) => {
    const inserted = await t.run(
      sql`INSERT INTO webhook_events (provider, event_id, type, outcome, received_at)
          VALUES (${ev.provider}, ${ev.eventId}, ${ev.providerType ?? ev.type}, 'pending', ${at.toISOString()})
          ON CONFLICT (provider, event_id) DO NOTHING`,
    );
    if (inserted === 0) return { outcome: 'duplicate' as const };
    const record = (outcome: WebhookOutcome) =>
      t.run(sql`UPDATE webhook_events SET outcome = ${outcome} WHERE provider = ${ev.provider} AND event_id = ${ev.eventId}`);
    const co = await getCheckout(t, ev.checkoutId);
    if (!co || co.provider !== ev.provider) {
      await record('unknown_checkout');
      return { outcome: 'unknown_checkout' as const };
    }
    if (co.provider_ref !== null && ev.providerRef !== co.provider_ref) {
      await record('provider_ref_mismatch');
      return { outcome: 'provider_ref_mismatch' as const };
    }
    if (ev.type === 'checkout.canceled') {
      await cancelCheckout(t, co.id);
      await record('canceled');
      return { outcome: 'canceled' as const };
    }
    await lockUser(t, co.user_id);
    const flipped = await t.run(sql`UPDATE checkouts SET status = 'completed', completed_at = ${at.toISOString()} WHERE id = ${co.id} AND status = 'open'`);
    if (flipped !== 1) {
      await record('already_completed');
      return { outcome: 'already_completed' as const };
    }
    if (co.kind === 'credits') {
      const ledger = (await moveTx(t, {
        userId: co.user_id,
        type: 'credit_purchase',
        amountCents: co.amount_cents,
        description: `Credit purchase (${co.provider} checkout ${co.id})`,
        reference: co.id,
        metadata: { checkout_id: co.id, provider: co.provider, event_id: ev.eventId },
        at,
      }))!;
      await record('credited');
      return { outcome: 'credited' as const, ledger };
    }
    const subscription = await activateSubscriptionTx(t, {
      userId: co.user_id,
      tier: co.tier ?? 'professional',
      billingPeriod: co.billing_period ?? 'monthly',
      fundedBy: 'card',
      at,
    });
    await record('subscription_activated');
    return { outcome: 'subscription_activated' as const, subscription };
  });
}

/**
 * Pays a subscription from the credit balance: 'conflict' when one is already active, 'insufficient' when the
 * balance is short; otherwise debit and activation commit together.
 */
export function redeemSubscription(
  store: Db,
  opts: { userId: string; tier: string; billingPeriod: 'monthly' | 'annual'; priceCents: number; at: Date },
): Promise<
  { outcome: 'conflict' } | { outcome: 'insufficient'; required_cents: number } | { outcome: 'ok'; subscription: SubscriptionRow; ledger: LedgerRow }
> {
  return store.tx(async (t) => {
    await lockUser(t, opts.userId);
    if (await activeSubscription(t, opts.userId, opts.at)) return { outcome: 'conflict' as const };
    const ledger = await moveTx(t, {
      userId: opts.userId,
      type: 'usage_charge',
      amountCents: -opts.priceCents,
      description: `Subscription ${opts.tier} (${opts.billingPeriod}) paid from credits`,
      metadata: { kind: 'subscription', tier: opts.tier, billing_period: opts.billingPeriod },
      at: opts.at,
    });
    if (!ledger) return { outcome: 'insufficient' as const, required_cents: opts.priceCents };
    const subscription = await activateSubscriptionTx(t, {
      userId: opts.userId,
      tier: opts.tier,
      billingPeriod: opts.billingPeriod,
      fundedBy: 'credits',
      at: opts.at,
    });
    return { outcome: 'ok' as const, subscription, ledger };
  });
}

// ---- orders (legacy credit model) ----

export type OrderRow = {
  id: string;
  user_id: string;
  idempotency_key: string | null;
  total_cost_cents: number;
  minimum_applied: number;
  created_at: string;
};

export type OrderItemRow = {
  id: string;
  order_id: string;
  position: number;
  market_id: string;
  series_id: string | null;
  data_type: string;
  format: string;
  timeframe: string | null;
  start_date: string | null;
  end_date: string | null;
  record_count: number | null;
  size_bytes: number | null;
  cost_cents: number;
  status: string;
  expires_at: string;
};

export type PricedItem = Omit<OrderItemRow, 'id' | 'order_id' | 'position'>;

/**
 * Places an order: the same idempotency key (per user) returns the first order and never charges again; a
 * short balance writes nothing.
 */
export function placeOrder(
  store: Db,
  opts: { userId: string; idempotencyKey: string | null; items: PricedItem[]; totalCents: number; minimumApplied: boolean; at: Date },
): Promise<
  { outcome: 'ok' | 'replayed'; order: OrderRow; items: OrderItemRow[] } | { outcome: 'insufficient'; required_cents: number; available_cents: number }
> {
  return store.tx(async (t) => {
    // One user's orders one at a time, on every replica: the idempotency check and the debit below decide on
    // rows no concurrent order of the same user can change until this one commits.
    await lockUser(t, opts.userId);
    if (opts.idempotencyKey) {
      const prior = await findOrderByKey(t, opts.userId, opts.idempotencyKey);
      if (prior) return { outcome: 'replayed' as const, order: prior, items: await orderItems(t, prior.id) };
    }
    const order: OrderRow = {
      id: newId('ord'),
      user_id: opts.userId,
      idempotency_key: opts.idempotencyKey,
      total_cost_cents: opts.totalCents,
      minimum_applied: opts.minimumApplied ? 1 : 0,
      created_at: opts.at.toISOString(),
    };
    if (opts.totalCents > 0) {
      const ledger = await moveTx(t, {
        userId: opts.userId,
        type: 'usage_charge',
        amountCents: -opts.totalCents,
        description: `Order ${order.id} (${opts.items.length} item${opts.items.length === 1 ? '' : 's'})`,
        reference: order.id,
        metadata: { order_id: order.id, minimum_applied: opts.minimumApplied },
        at: opts.at,
      });
      if (!ledger) {
        return {
          outcome: 'insufficient' as const,
          required_cents: opts.totalCents,
          available_cents: (await getCreditAccount(t, opts.userId)).balance_cents,
        };
      }
    }
    await t.run(
      sql`INSERT INTO orders (id, user_id, idempotency_key, total_cost_cents, minimum_applied, created_at)
          VALUES (${order.id}, ${order.user_id}, ${order.idempotency_key}, ${order.total_cost_cents}, ${order.minimum_applied}, ${order.created_at})`,
    );
    for (const [position, it] of opts.items.entries()) {
      await t.run(
        sql`INSERT INTO order_items (id, order_id, position, market_id, series_id, data_type, format, timeframe, start_date, end_date,
              record_count, size_bytes, cost_cents, status, expires_at)
            VALUES (${newId('oi')}, ${order.id}, ${position}, ${it.market_id}, ${it.series_id}, ${it.data_type}, ${it.format}, ${it.timeframe},
              ${it.start_date}, ${it.end_date}, ${it.record_count}, ${it.size_bytes}, ${it.cost_cents}, ${it.status}, ${it.expires_at})`,
      );
    }
    return { outcome: 'ok' as const, order, items: await orderItems(t, order.id) };
  });
}

export function findOrderByKey(t: Db, userId: string, key: string): Promise<OrderRow | undefined> {
  return t.get<OrderRow>(sql`SELECT * FROM orders WHERE user_id = ${userId} AND idempotency_key = ${key}`);
}

export function orderItems(t: Db, orderId: string): Promise<OrderItemRow[]> {
  return t.all<OrderItemRow>(sql`SELECT * FROM order_items WHERE order_id = ${orderId} ORDER BY position`);
}

export function listOrders(t: Db, userId: string, limit: number): Promise<OrderRow[]> {
  return t.all<OrderRow>(sql`SELECT * FROM orders WHERE user_id = ${userId} ORDER BY created_at DESC, id DESC LIMIT ${limit}`);
}
