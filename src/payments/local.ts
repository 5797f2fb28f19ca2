import crypto from 'node:crypto';
import { z } from 'zod';
import type { PaymentProvider } from './provider.js';
import { SIGNATURE_HEADER, sign, verify } from './signature.js';

/**
 * The built-in provider, for demos and tests only: it exists when PMLAKE_PAYMENT_PROVIDER=local, because its
 * page confirms without taking any money. Its hosted checkout page is served by pmlake itself
 * (src/http/billing/local-checkout.ts); confirming there makes the "provider side" send a signed webhook over real
 * HTTP to pmlake's own /v1/billing/webhook/local, exactly as a hosted provider would call back. Nothing is
 * credited by the page: only the verified webhook moves money.
 */
export const LOCAL_PROVIDER = 'local';
export const LOCAL_WEBHOOK_PATH = '/v1/billing/webhook/local';

export type LocalEvent = {
  id: string;
  type: 'checkout.completed' | 'checkout.canceled';
  checkout_id: string;
  created_at: string;
};

const EventSchema = z.object({
  id: z.string().regex(/^evt_[0-9a-f]{24}$/),
  type: z.enum(['checkout.completed', 'checkout.canceled']),
  checkout_id: z.string().regex(/^chk_[0-9a-f]{24}$/),
  created_at: z.string().max(40),
});

export function localProvider(): PaymentProvider {
  return {
    name: LOCAL_PROVIDER,
    async open(intent, baseUrl) {
      return { url: `${baseUrl.replace(/\/+$/, '')}/v1/billing/checkout/local/${intent.id}`, providerRef: null };
    },
  };
}

/** The event in a local webhook request, or null when its signature or shape is not valid. */
export function verifyLocalWebhook(secret: string, rawBody: Buffer, header: string | undefined, at: Date = new Date()): LocalEvent | null {
  if (!verify(secret, rawBody, header, at)) return null;
  try {
    const parsed = EventSchema.safeParse(JSON.parse(rawBody.toString('utf8')));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/** A new event for a checkout session, as the provider would emit it. */
export function newEvent(type: LocalEvent['type'], checkoutId: string, at: Date = new Date()): LocalEvent {
  return { id: `evt_${crypto.randomBytes(12).toString('hex')}`, type, checkout_id: checkoutId, created_at: at.toISOString() };
}

/** Delivers a signed event to a webhook URL over HTTP; resolves with the receiver's status and body. */
export async function deliverWebhook(url: string, secret: string, event: LocalEvent): Promise<{ status: number; body: string }> {
  const body = JSON.stringify(event);
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', [SIGNATURE_HEADER]: sign(secret, body) },
    body,
    signal: AbortSignal.timeout(10_000),
  });
  return { status: res.status, body: await res.text() };
}
