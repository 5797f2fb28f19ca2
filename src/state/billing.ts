import { activateSubscriptionTx, activeSubscription, type SubscriptionRow } from './accounts.js';
import { newId, type StateStore } from './store.js';

/**
 * Money: the credit balance, its append-only ledger, checkout sessions, provider webhook events and orders.
 * Amounts are integer cents. Every movement is one IMMEDIATE transaction that updates the balance row with a
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

export function getCreditAccount(store: StateStore, userId: string): CreditAccount {
  return (
    (store.db.prepare('SELECT * FROM credit_accounts WHERE user_id = ?').get(userId) as CreditAccount | undefined) ?? {
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
 * balance (nothing is written then).
 */
export function moveTx(store: StateStore, m: Movement): LedgerRow | null {
  store.db.prepare('INSERT INTO credit_accounts (user_id) VALUES (?) ON CONFLICT (user_id) DO NOTHING').run(m.userId);
  const amount = Math.trunc(m.amountCents);
  const credit = amount >= 0;
  const changed = store.db
    .prepare(
      `UPDATE credit_accounts SET
         balance_cents = balance_cents + @amount,
         lifetime_credits_cents = lifetime_credits_cents + CASE WHEN @type IN ('credit_purchase', 'adjustment') AND @amount > 0 THEN @amount ELSE 0 END,
         lifetime_usage_cents = lifetime_usage_cents + CASE WHEN @type = 'usage_charge' THEN -@amount ELSE 0 END,
         lifetime_refunds_cents = lifetime_refunds_cents + CASE WHEN @type = 'refund' THEN -@amount ELSE 0 END
       WHERE user_id = @user AND balance_cents + @amount >= 0`,
    )
    .run({ user: m.userId, amount, type: m.type }).changes;
  if (changed !== 1) {
    if (credit) throw new Error('credit failed to apply');
    return null;
  }
  const after = getCreditAccount(store, m.userId).balance_cents;
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
  const info = store.db
    .prepare(
      `INSERT INTO ledger (id, user_id, type, amount_cents, balance_after_cents, status, description, reference, metadata, created_at)
       VALUES (@id, @user_id, @type, @amount_cents, @balance_after_cents, @status, @description, @reference, @metadata, @created_at)`,
    )
    .run(row);
  return { seq: Number(info.lastInsertRowid), ...row };
}

/** An operator or test credit (type 'adjustment'), in its own transaction. */
export function adjustBalance(store: StateStore, userId: string, amountCents: number, description: string, at: Date = new Date()): LedgerRow | null {
  return store.db.transaction(() => moveTx(store, { userId, type: 'adjustment', amountCents, description, at })).immediate();
}

export function listLedger(store: StateStore, userId: string, limit: number, offset: number): LedgerRow[] {
  return store.db
    .prepare('SELECT * FROM ledger WHERE user_id = ? ORDER BY seq DESC LIMIT ? OFFSET ?')
    .all(userId, limit, offset) as LedgerRow[];
}

export function ledgerSum(store: StateStore, userId: string): number {
  return (store.db.prepare('SELECT COALESCE(SUM(amount_cents), 0) AS s FROM ledger WHERE user_id = ?').get(userId) as { s: number }).s;
}

// ---- checkouts and webhooks ----

export function createCheckout(store: StateStore, row: CheckoutRow): CheckoutRow {
  store.db
    .prepare(
      `INSERT INTO checkouts (id, user_id, provider, kind, amount_cents, tier, billing_period, success_url, cancel_url, status, created_at, completed_at, provider_ref)
       VALUES (@id, @user_id, @provider, @kind, @amount_cents, @tier, @billing_period, @success_url, @cancel_url, @status, @created_at, @completed_at, @provider_ref)`,
    )
    .run(row);
  return row;
}

export function getCheckout(store: StateStore, id: string): CheckoutRow | undefined {
  return store.db.prepare('SELECT * FROM checkouts WHERE id = ?').get(id) as CheckoutRow | undefined;
}

export function cancelCheckout(store: StateStore, id: string): boolean {
  return store.db.prepare(`UPDATE checkouts SET status = 'canceled' WHERE id = ? AND status = 'open'`).run(id).changes === 1;
}

export type WebhookOutcome =
  | 'credited'
  | 'subscription_activated'
  | 'duplicate'
  | 'already_completed'
  | 'unknown_checkout'
  | 'canceled'
  | 'provider_ref_mismatch';

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
  store: StateStore,
  ev: CheckoutEvent,
  at: Date = new Date(),
): { outcome: WebhookOutcome; ledger?: LedgerRow; subscription?: SubscriptionRow } {
  return store.db
    .transaction(() => {
      const inserted = store.db
        .prepare(
          `INSERT INTO webhook_events (provider, event_id, type, outcome, received_at) VALUES (?, ?, ?, 'pending', ?)
           ON CONFLICT (provider, event_id) DO NOTHING`,
        )
        .run(ev.provider, ev.eventId, ev.providerType ?? ev.type, at.toISOString()).changes;
      if (inserted === 0) return { outcome: 'duplicate' as const };
      const record = (outcome: WebhookOutcome) =>
        store.db.prepare('UPDATE webhook_events SET outcome = ? WHERE provider = ? AND event_id = ?').run(outcome, ev.provider, ev.eventId);
      const co = getCheckout(store, ev.checkoutId);
      if (!co || co.provider !== ev.provider) {
        record('unknown_checkout');
        return { outcome: 'unknown_checkout' as const };
      }
      if (co.provider_ref !== null && ev.providerRef !== co.provider_ref) {
        record('provider_ref_mismatch');
        return { outcome: 'provider_ref_mismatch' as const };
      }
      if (ev.type === 'checkout.canceled') {
        cancelCheckout(store, co.id);
        record('canceled');
        return { outcome: 'canceled' as const };
      }
      const flipped = store.db
        .prepare(`UPDATE checkouts SET status = 'completed', completed_at = ? WHERE id = ? AND status = 'open'`)
        .run(at.toISOString(), co.id).changes;
      if (flipped !== 1) {
        record('already_completed');
        return { outcome: 'already_completed' as const };
      }
      if (co.kind === 'credits') {
        const ledger = moveTx(store, {
          userId: co.user_id,
          type: 'credit_purchase',
          amountCents: co.amount_cents,
          description: `Credit purchase (${co.provider} checkout ${co.id})`,
          reference: co.id,
          metadata: { checkout_id: co.id, provider: co.provider, event_id: ev.eventId },
          at,
        })!;
        record('credited');
        return { outcome: 'credited' as const, ledger };
      }
      const subscription = activateSubscriptionTx(store, {
        userId: co.user_id,
        tier: co.tier ?? 'professional',
        billingPeriod: co.billing_period ?? 'monthly',
        fundedBy: 'card',
        at,
      });
      record('subscription_activated');
      return { outcome: 'subscription_activated' as const, subscription };
    })
    .immediate();
}

/**
 * Pays a subscription from the credit balance: 'conflict' when one is already active, 'insufficient' when the
 * balance is short; otherwise debit and activation commit together.
 */
export function redeemSubscription(
  store: StateStore,
  opts: { userId: string; tier: string; billingPeriod: 'monthly' | 'annual'; priceCents: number; at: Date },
): { outcome: 'conflict' } | { outcome: 'insufficient'; required_cents: number } | { outcome: 'ok'; subscription: SubscriptionRow; ledger: LedgerRow } {
  return store.db
    .transaction(() => {
      if (activeSubscription(store, opts.userId, opts.at)) return { outcome: 'conflict' as const };
      const ledger = moveTx(store, {
        userId: opts.userId,
        type: 'usage_charge',
        amountCents: -opts.priceCents,
        description: `Subscription ${opts.tier} (${opts.billingPeriod}) paid from credits`,
        metadata: { kind: 'subscription', tier: opts.tier, billing_period: opts.billingPeriod },
        at: opts.at,
      });
      if (!ledger) return { outcome: 'insufficient' as const, required_cents: opts.priceCents };
      const subscription = activateSubscriptionTx(store, {
        userId: opts.userId,
        tier: opts.tier,
        billingPeriod: opts.billingPeriod,
        fundedBy: 'credits',
        at: opts.at,
      });
      return { outcome: 'ok' as const, subscription, ledger };
    })
    .immediate();
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
  store: StateStore,
  opts: { userId: string; idempotencyKey: string | null; items: PricedItem[]; totalCents: number; minimumApplied: boolean; at: Date },
):
  | { outcome: 'ok' | 'replayed'; order: OrderRow; items: OrderItemRow[] }
  | { outcome: 'insufficient'; required_cents: number; available_cents: number } {
  return store.db
    .transaction(() => {
      if (opts.idempotencyKey) {
        const prior = store.db
          .prepare('SELECT * FROM orders WHERE user_id = ? AND idempotency_key = ?')
          .get(opts.userId, opts.idempotencyKey) as OrderRow | undefined;
        if (prior) return { outcome: 'replayed' as const, order: prior, items: orderItems(store, prior.id) };
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
        const ledger = moveTx(store, {
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
            available_cents: getCreditAccount(store, opts.userId).balance_cents,
          };
        }
      }
      store.db
        .prepare(
          `INSERT INTO orders (id, user_id, idempotency_key, total_cost_cents, minimum_applied, created_at)
           VALUES (@id, @user_id, @idempotency_key, @total_cost_cents, @minimum_applied, @created_at)`,
        )
        .run(order);
      const ins = store.db.prepare(
        `INSERT INTO order_items (id, order_id, position, market_id, series_id, data_type, format, timeframe, start_date, end_date,
           record_count, size_bytes, cost_cents, status, expires_at)
         VALUES (@id, @order_id, @position, @market_id, @series_id, @data_type, @format, @timeframe, @start_date, @end_date,
           @record_count, @size_bytes, @cost_cents, @status, @expires_at)`,
      );
      opts.items.forEach((it, position) => ins.run({ ...it, id: newId('oi'), order_id: order.id, position }));
      return { outcome: 'ok' as const, order, items: orderItems(store, order.id) };
    })
    .immediate();
}

export function findOrderByKey(store: StateStore, userId: string, key: string): OrderRow | undefined {
  return store.db.prepare('SELECT * FROM orders WHERE user_id = ? AND idempotency_key = ?').get(userId, key) as OrderRow | undefined;
}

export function orderItems(store: StateStore, orderId: string): OrderItemRow[] {
  return store.db.prepare('SELECT * FROM order_items WHERE order_id = ? ORDER BY position').all(orderId) as OrderItemRow[];
}

export function listOrders(store: StateStore, userId: string, limit: number): OrderRow[] {
  return store.db
    .prepare('SELECT * FROM orders WHERE user_id = ? ORDER BY created_at DESC, id DESC LIMIT ?')
    .all(userId, limit) as OrderRow[];
}
