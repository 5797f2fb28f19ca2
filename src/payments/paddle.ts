import { z } from 'zod';
import type { Config } from '../config.js';
import { type CheckoutIntent, type PaymentProvider, ProviderError } from './provider.js';

/**
 * Paddle Billing. A checkout is a Paddle transaction created with the API (`POST /transactions`, a
 * non-catalog one-time item priced in USD cents, quantity pinned to 1); the customer pays on Paddle's
 * payment link (`data.checkout.url`). Paddle then calls POST /v1/billing/webhook/paddle with
 * `transaction.completed`, whose `custom_data` names pmlake's checkout and whose `data.id` must be the
 * transaction created here (src/state/billing.ts applyCheckoutEvent).
 */
export const PADDLE_PROVIDER = 'paddle';
export const PADDLE_WEBHOOK_PATH = '/v1/billing/webhook/paddle';
/** The custom_data key naming pmlake's checkout session. */
export const CHECKOUT_KEY = 'pmlake_checkout_id';

type PaddleSettings = Config['payments']['paddle'];

const Created = z.object({
  data: z.object({
    id: z.string().regex(/^txn_[a-z0-9]{1,64}$/i),
    checkout: z.object({ url: z.string().url().nullable() }).nullable().optional(),
  }),
});

function describe(intent: CheckoutIntent): { name: string; description: string } {
  if (intent.kind === 'credits') return { name: 'pmlake credits', description: `pmlake credits (${(intent.amount_cents / 100).toFixed(2)} USD)` };
  return { name: `pmlake ${intent.tier} plan`, description: `pmlake ${intent.tier} plan, ${intent.billing_period} period` };
}

/** The request body of POST /transactions for a checkout. */
export function transactionRequest(intent: CheckoutIntent): Record<string, unknown> {
  const { name, description } = describe(intent);
  return {
    items: [
      {
        quantity: 1,
        price: {
          name,
          description,
          unit_price: { amount: String(intent.amount_cents), currency_code: 'USD' },
          // The customer cannot change how many they buy: the amount is the checkout's.
          quantity: { minimum: 1, maximum: 1 },
          product: { name, tax_category: 'standard' },
        },
      },
    ],
    currency_code: 'USD',
    collection_mode: 'automatic',
    custom_data: { [CHECKOUT_KEY]: intent.id, pmlake_kind: intent.kind },
  };
}

export function paddleProvider(settings: PaddleSettings): PaymentProvider {
  return {
    name: PADDLE_PROVIDER,
    async open(intent) {
      if (!settings.apiKey) throw new ProviderError('PMLAKE_PADDLE_API_KEY is not set');
      let res: Response;
      try {
        res = await fetch(`${settings.apiUrl.replace(/\/+$/, '')}/transactions`, {
          method: 'POST',
          headers: { Authorization: `Bearer ${settings.apiKey}`, 'Content-Type': 'application/json', Accept: 'application/json' },
          body: JSON.stringify(transactionRequest(intent)),
          redirect: 'error',
          signal: AbortSignal.timeout(15_000),
        });
      } catch (err) {
        throw new ProviderError(`Paddle API unreachable: ${(err as Error).message}`);
      }
      const text = await res.text().catch(() => '');
      if (!res.ok) throw new ProviderError(`Paddle API answered ${res.status}: ${text.slice(0, 500)}`, res.status);
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        throw new ProviderError('Paddle API answered with a body that is not JSON', res.status);
      }
      const parsed = Created.safeParse(body);
      if (!parsed.success) throw new ProviderError('Paddle API answered without a transaction id', res.status);
      const url = parsed.data.data.checkout?.url;
      // Paddle leaves checkout.url null when the account has no default payment link set.
      if (!url || !/^https?:\/\//i.test(url)) throw new ProviderError('Paddle transaction has no checkout URL (set a default payment link)', res.status);
      return { url, providerRef: parsed.data.data.id };
    },
  };
}

const Envelope = z.object({
  event_id: z.string().regex(/^evt_[a-z0-9]{1,64}$/i),
  event_type: z.string().min(1).max(100),
  data: z.unknown(),
});

const CompletedData = z.object({
  id: z.string().regex(/^txn_[a-z0-9]{1,64}$/i),
  custom_data: z.record(z.string(), z.unknown()).nullable().optional(),
});

export type PaddleEvent =
  | { kind: 'completed'; eventId: string; eventType: string; transactionId: string; checkoutId: string | null }
  | { kind: 'other'; eventId: string; eventType: string };

/** A verified webhook body → the event pmlake acts on; null when the body is not a Paddle event. */
export function parsePaddleEvent(rawBody: Buffer): PaddleEvent | null {
  let json: unknown;
  try {
    json = JSON.parse(rawBody.toString('utf8'));
  } catch {
    return null;
  }
  const env = Envelope.safeParse(json);
  if (!env.success) return null;
  const { event_id: eventId, event_type: eventType } = env.data;
  if (eventType !== 'transaction.completed') return { kind: 'other', eventId, eventType };
  const data = CompletedData.safeParse(env.data.data);
  if (!data.success) return null;
  const named = data.data.custom_data?.[CHECKOUT_KEY];
  const checkoutId = typeof named === 'string' && /^chk_[0-9a-f]{24}$/.test(named) ? named : null;
  return { kind: 'completed', eventId, eventType, transactionId: data.data.id, checkoutId };
}
