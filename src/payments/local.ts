import crypto from 'node:crypto';
import { z } from 'zod';
import type { CheckoutRow } from '../state/billing.js';
import type { PaymentProvider, ProviderEvent } from './provider.js';
import { SIGNATURE_HEADER, sign, verify } from './signature.js';

/**
 * The built-in provider. Its hosted checkout page is served by pmlake itself (src/http/checkout-page.ts);
 * confirming there makes the "provider side" send a signed webhook over real HTTP to pmlake's own
 * /v1/billing/webhook/local, exactly as a hosted provider would call back. Nothing is credited by the page:
 * only the verified webhook moves money.
 */
export const LOCAL_PROVIDER = 'local';
export const LOCAL_WEBHOOK_PATH = '/v1/billing/webhook/local';

const EventSchema = z.object({
  id: z.string().regex(/^evt_[0-9a-f]{24}$/),
  type: z.enum(['checkout.completed', 'checkout.canceled']),
  checkout_id: z.string().regex(/^chk_[0-9a-f]{24}$/),
  created_at: z.string().max(40),
});

export function localProvider(secret: string): PaymentProvider {
  return {
    name: LOCAL_PROVIDER,
    checkoutUrl(session: CheckoutRow, baseUrl: string): string {
      return `${baseUrl.replace(/\/+$/, '')}/v1/billing/checkout/local/${session.id}`;
    },
    verifyWebhook(rawBody, header, at = new Date()): ProviderEvent | null {
      if (!verify(secret, rawBody, header, at)) return null;
      try {
        const parsed = EventSchema.safeParse(JSON.parse(rawBody.toString('utf8')));
        return parsed.success ? parsed.data : null;
      } catch {
        return null;
      }
    },
  };
}

/** A new event for a checkout session, as the provider would emit it. */
export function newEvent(type: ProviderEvent['type'], checkoutId: string, at: Date = new Date()): ProviderEvent {
  return { id: `evt_${crypto.randomBytes(12).toString('hex')}`, type, checkout_id: checkoutId, created_at: at.toISOString() };
}

/** Delivers a signed event to a webhook URL over HTTP; resolves with the receiver's status and body. */
export async function deliverWebhook(url: string, secret: string, event: ProviderEvent): Promise<{ status: number; body: string }> {
  const body = JSON.stringify(event);
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', [SIGNATURE_HEADER]: sign(secret, body) },
    body,
    signal: AbortSignal.timeout(10_000),
  });
  return { status: res.status, body: await res.text() };
}
